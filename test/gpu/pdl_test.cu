// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Programmatic dependent launch: the quantize / QDQ launchers start their kernels
//! programmatically, so a kernel may be resident before the previous kernel of the stream has
//! finished. Each path (one-block and half-block small calls, the pair kernel, the turbo block
//! kernel of QDQ, the row kernel of per-row scales, the per-tensor amax pass) runs right after a
//! producer that releases its dependents at entry and writes the input 20 us later; the results
//! must equal the host reference of the late input. A probe kernel that does not wait shows
//! whether the dependent really started early on this device (reported, not required).
#include "quantize_check.cuh"

#include <cstdio>

namespace {
using namespace quads;
using namespace quads::gpu_test;
using bf16 = __nv_bfloat16;

//! Launched programmatically after `late_copy_kernel`; reads `x[0]` without waiting.
__global__ void probe_kernel(const unsigned char* x, unsigned char* seen) { seen[0] = x[0]; }

} // namespace

TEST_SUITE("gpu.pdl") {
  TEST_CASE("sm90: programmatic launches wait for the previous kernel") {
    cudaStream_t stream = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    device_buffer<unsigned char> src(1 << 16, 0x11), dst(1 << 16, 0x22), seen(1, 0);
    late_copy(src, dst, stream);
    REQUIRE(kernels::detail::launch_kernel(true, probe_kernel, dim3(1), dim3(1), stream,
                                           static_cast<const unsigned char*>(dst.ptr),
                                           seen.ptr) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    const unsigned char got = seen.download(1)[0];
    CHECK((got == 0x22 || got == 0x11));
    // printed, not asserted: whether the device starts a dependent early is its choice
    std::printf("gpu.pdl: a programmatic dependent that does not wait %s\n",
                got == 0x22 ? "started early (saw the old bytes): the checks below can fail"
                            : "started late on this device: the checks below cannot tell");
    cudaStreamDestroy(stream);

    const std::uint64_t s0 = seed();
    using q_given = block_quantizer<nvfp4, quant_options{.global = global_scale::given}>;
    using q_row = block_quantizer<nvfp4, quant_options{.global = global_scale::per_row}>;
    // 1 x 4096: one-block kernel; 512 x 4096: pair kernel (quantize), turbo block kernel (QDQ)
    for (const shape3 sh : {shape3{1, 1, 4096}, shape3{1, 512, 4096}, shape3{2, 300, 1024}}) {
      check_quantize<q_given, swizzled_128x4, bf16>(sh, input_kind::normal, s0 + 1, 0, true, 0,
                                                    true);
      check_quantize<q_given, linear_scales, bf16>(sh, input_kind::normal, s0 + 2, 0, true, 0,
                                                   true);
    }
    check_quantize<block_quantizer<nvfp4>, swizzled_128x4, bf16>({1, 512, 4096}, input_kind::normal,
                                                                 s0 + 3, 0, true, 0, true);
    check_quantize<q_row, swizzled_128x4, bf16>({1, 64, 4096}, input_kind::normal, s0 + 4, 0, true,
                                                0, true);
    check_quantize<block_quantizer<mxfp4>, swizzled_128x4, bf16>({1, 16, 4096}, input_kind::normal,
                                                                 s0 + 5, 0, false, 0, true);
    check_quantize<q_given, swizzled_128x4, float>({1, 256, 2048}, input_kind::normal, s0 + 6, 0,
                                                   false, 0, true);
  }
}
