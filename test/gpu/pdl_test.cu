// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Programmatic dependent launch: the quantize / QDQ launchers start their large-call
//! kernels (pair kernel, turbo block kernels) programmatically, so such a kernel may be resident
//! before the previous kernel of the stream has finished and must wait before touching memory.
//! Each path (small one-block and half-block calls, the pair kernel's walks, the pipelined QDQ
//! kernel, the row kernel of per-row scales, the per-tensor amax pass) runs right after a producer
//! that releases its dependents at entry and writes the input 20 us later; the results must equal
//! the host reference of the late input. A probe prints when a dependent started and what it read
//! before its wait. On the H200 of 2026-11-30 dependents started only after the producer had
//! finished (27.8 us), so there these checks could not catch a missing wait (docs/gpu-tests.md).
#include "quantize_check.cuh"

#include <cstdio>

namespace {
using namespace quads;
using namespace quads::gpu_test;
using bf16 = __nv_bfloat16;

//! Launched programmatically after `late_copy_kernel`: records its start time and `x[0]` before
//! and after its `griddepcontrol.wait` (a kernel without the wait measured as if it had one).
__global__ void probe_kernel(const unsigned char* x, unsigned char* seen,
                             unsigned long long* started) {
  *started = global_ns();
  seen[0] = *static_cast<const volatile unsigned char*>(x);
  kernels::detail::pdl_wait();
  seen[1] = *static_cast<const volatile unsigned char*>(x);
}

//! The tensor amax of a tensor that a late producer writes, into an output holding garbage: the
//! calls of more than one round launch a zeroing kernel and the amax kernel programmatically, so
//! both must wait (the old contents are the new values doubled: a different amax).
void check_amax_late(shape3 sh, std::uint64_t s) {
  const int E = sh.experts, R = sh.rows, C = sh.cols;
  CAPTURE(describe("tensor amax (late input, garbage out)", "-", "-", "bf16", sh,
                   input_kind::normal, s));
  const std::size_t rows_all = static_cast<std::size_t>(E) * R;
  const std::vector<float> x = make_input<bf16>(input_kind::normal, E, R, C, 16, s);
  std::vector<float> old(x);
  for (float& v : old)
    v *= 2.0f; // exact in bf16 (the inputs are far from the overflow threshold)
  device_buffer<bf16> staged(rows_all * C), dx(rows_all * C);
  upload_strided(staged, x, rows_all, C, C);
  upload_strided(dx, old, rows_all, C, C);
  device_buffer<float> dt(E, 0x7f); // 0x7f7f7f7f: a huge positive float an atomicMax would keep
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess); // the uploads ran on the legacy stream
  late_copy(staged, dx, stream);
  QUADS_CUDA_CHECK(
      kernels::tensor_amax(dx.ptr, kernels::tensor_shape{E, R, C, C, 0}, dt.ptr, stream));
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  cudaStreamDestroy(stream);
  const auto t = dt.download(E);
  for (int e = 0; e < E; ++e) {
    const float want = expert_amax(x, e, R, C);
    CHECK(fbits(t[e]) == fbits(want));
  }
}

} // namespace

TEST_SUITE("gpu.pdl") {
  TEST_CASE("sm90: programmatic launches wait for the previous kernel") {
    cudaStream_t stream = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    device_buffer<unsigned char> src(1 << 16, 0x11), dst(1 << 16, 0x22), seen(2, 0);
    device_buffer<unsigned long long> times(2, 0);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess); // the fills ran (the stream is non-blocking)
    late_copy(src, dst, stream, times.ptr);
    REQUIRE(kernels::detail::launch_kernel(true, probe_kernel, dim3(1), dim3(1), 0, stream,
                                           static_cast<const unsigned char*>(dst.ptr), seen.ptr,
                                           times.ptr + 1) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    const auto got = seen.download(2);
    const auto t = times.download(2);
    CHECK((got[0] == 0x22 || got[0] == 0x11));
    CHECK(got[1] == 0x11); // after the wait: always the producer's bytes
    // printed, not asserted: whether the device starts a dependent early is its choice
    std::printf("gpu.pdl: a programmatic dependent started %.1f us after the producer (which "
                "writes at 20 us) and before its wait %s\n",
                1e-3 * static_cast<double>(static_cast<long long>(t[1] - t[0])),
                got[0] == 0x22 ? "saw the old bytes: the checks below can fail"
                               : "saw the new bytes: the checks below cannot tell");
    cudaStreamDestroy(stream);

    const std::uint64_t s0 = seed();
    using q_given = block_quantizer<nvfp4, quant_options{.global = global_scale::given}>;
    using q_row = block_quantizer<nvfp4, quant_options{.global = global_scale::per_row}>;
    // 1 x 4096: one-block kernel; 512 x 4096: pair kernel (quantize), pipelined kernel (QDQ)
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
    // the amax pass of more than one round (256 x 4 and 1024 x 8 kernels, an expert stack), alone
    // and inside a per-tensor quantize
    for (const shape3 sh : {shape3{1, 2048, 4096}, shape3{1, 4096, 8192}, shape3{3, 700, 4096}})
      check_amax_late(sh, s0 + 7);
    check_quantize<block_quantizer<nvfp4>, swizzled_128x4, bf16>(
        {1, 2048, 4096}, input_kind::normal, s0 + 8, 0, true, 0, true);
  }
}
