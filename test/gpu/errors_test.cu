// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Launcher argument checks: cudaErrorInvalidValue plus a reason in last_error_message().
#include "gpu_test.cuh"

namespace {
using namespace quads;
using namespace quads::gpu_test;
using bf16 = __nv_bfloat16;
namespace qk = quads::kernels;

using q_default = block_quantizer<nvfp4>;
using q_given = block_quantizer<nvfp4, quant_options{.global = global_scale::given}>;
using q_per_row = block_quantizer<nvfp4, quant_options{.global = global_scale::per_row}>;

void expect_invalid(cudaError_t e, const char* needle) {
  CHECK(e == cudaErrorInvalidValue);
  const std::string msg = qk::last_error_message();
  INFO("message: " << msg);
  CHECK(msg.find(needle) != std::string::npos);
}
} // namespace

TEST_SUITE("gpu.errors") {
  TEST_CASE("sm90: launchers reject bad arguments with a reason and enqueue nothing") {
    device_buffer<bf16> x(4096);
    device_buffer<std::uint8_t> data(4096), scales(4096);
    device_buffer<tensor_scale> ts(64);
    device_buffer<float> amax(64);
    const qk::quantized_view out{data.ptr, scales.ptr, ts.ptr};
    const qk::tensor_shape ok_shape{1, 4, 64, 0, 0};
    qk::scale_args args{ts.ptr, 1, amax.ptr, 0};

    expect_invalid(qk::quantize<q_default>(x.ptr, qk::tensor_shape{1, 4, 40, 0, 0}, out, args),
                   "multiple of the block size 16");
    expect_invalid(
        qk::quantize<block_quantizer<mxfp4>>(x.ptr, qk::tensor_shape{1, 4, 48, 0, 0}, out, args),
        "multiple of the block size 32");
    expect_invalid(qk::quantize<q_default>(static_cast<const bf16*>(nullptr), ok_shape, out, args),
                   "null");
    expect_invalid(qk::quantize<q_default>(x.ptr + 1, ok_shape, out, args), "16-byte aligned");
    expect_invalid(qk::quantize<q_default>(x.ptr, qk::tensor_shape{1, 4, 64, 68, 0}, out, args),
                   "row_stride * sizeof");
    expect_invalid(qk::quantize<q_default>(x.ptr, qk::tensor_shape{1, 4, 64, 32, 0}, out, args),
                   "row_stride must be");
    expect_invalid(qk::quantize<q_default>(x.ptr, qk::tensor_shape{70000, 1, 16, 0, 0}, out, args),
                   "65535");
    expect_invalid(qk::quantize<q_default>(
                       x.ptr, ok_shape, qk::quantized_view{data.ptr + 1, scales.ptr, ts.ptr}, args),
                   "8-byte aligned");
    expect_invalid(qk::quantize<q_default, swizzled_128x4>(
                       x.ptr, ok_shape, qk::quantized_view{data.ptr, scales.ptr + 2, ts.ptr}, args),
                   "4-byte aligned");
    expect_invalid(qk::quantize<q_default>(x.ptr, ok_shape,
                                           qk::quantized_view{data.ptr, scales.ptr, nullptr}, args),
                   "tensor_scales");
    expect_invalid(qk::quantize<q_default>(x.ptr, ok_shape, out, qk::scale_args{}),
                   "amax_workspace");
    expect_invalid(qk::quantize<q_given>(x.ptr, ok_shape, out, qk::scale_args{}), "given");
    expect_invalid(qk::quantize<q_given>(x.ptr, qk::tensor_shape{3, 4, 64, 0, 0}, out,
                                         qk::scale_args{ts.ptr, 2, nullptr, 0}),
                   "given_count");
    expect_invalid(qk::quantize<q_per_row>(x.ptr, ok_shape,
                                           qk::quantized_view{data.ptr, scales.ptr, nullptr}, args),
                   "tensor_scales");
    expect_invalid(qk::qdq<q_default>(x.ptr, static_cast<bf16*>(nullptr), ok_shape, args, ts.ptr),
                   "y must be");
    expect_invalid(qk::dequantize<q_default>(qk::const_quantized_view{data.ptr, scales.ptr, ts.ptr},
                                             static_cast<float*>(nullptr), ok_shape),
                   "output y");
    expect_invalid(qk::dequantize<q_default>(
                       qk::const_quantized_view{data.ptr, scales.ptr, nullptr},
                       reinterpret_cast<float*>(amax.ptr), qk::tensor_shape{1, 1, 16, 0, 0}),
                   "tensor_scales");
    expect_invalid(qk::tensor_amax(x.ptr, qk::tensor_shape{1, 4, 4, 0, 0}, amax.ptr),
                   "multiple of 16 bytes");
    expect_invalid(qk::row_amax(x.ptr, ok_shape, static_cast<float*>(nullptr)), "null");
    expect_invalid(qk::rmsnorm_quantize<q_given>(x.ptr, static_cast<const bf16*>(nullptr), 1e-6f,
                                                 ok_shape, out, args),
                   "weight");
    expect_invalid(qk::silu_mul_quantize<q_given>(x.ptr, x.ptr + 1, ok_shape, out, args),
                   "up must be");
    // nothing was enqueued, and a valid call clears the message
    sync_ok();
    CHECK(qk::quantize<q_given>(x.ptr, ok_shape, out, args) == cudaSuccess);
    CHECK(std::string(qk::last_error_message()).empty());
    // empty tensors are fine and enqueue nothing
    CHECK(qk::quantize<q_default>(x.ptr, qk::tensor_shape{1, 0, 64, 0, 0}, out, args) ==
          cudaSuccess);
    sync_ok();
  }
}
