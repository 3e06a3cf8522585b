// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief NVFP4 quantize (+ one-pass QDQ) kernels vs the host reference: default, given, per-row.
#include "quantize_check.cuh"

namespace {
using namespace quads;
using namespace quads::gpu_test;
using bf16 = __nv_bfloat16;

using q_default = block_quantizer<nvfp4>;
using q_given = block_quantizer<nvfp4, quant_options{.global = global_scale::given}>;
using q_per_row = block_quantizer<nvfp4, quant_options{.global = global_scale::per_row}>;
} // namespace

TEST_SUITE("gpu.quantize.nvfp4") {
  TEST_CASE("sm90: nvfp4 per-tensor scale (amax pass) is byte-identical to the reference") {
    sweep_quantize<q_default, swizzled_128x4, bf16>(true);
    sweep_quantize<q_default, swizzled_128x4, __half>(true);
    sweep_quantize<q_default, swizzled_128x4, float>(true);
    sweep_quantize<q_default, linear_scales, bf16>(false);
  }
  TEST_CASE("sm90: nvfp4 given scale (one pass) is byte-identical to the reference") {
    sweep_quantize<q_given, swizzled_128x4, bf16>(true);
    sweep_quantize<q_given, swizzled_128x4, __half>(false);
    sweep_quantize<q_given, swizzled_128x4, float>(false);
    sweep_quantize<q_given, linear_scales, bf16>(false);
  }
  TEST_CASE("sm90: nvfp4 per-row scale (fused row amax) is byte-identical to the reference") {
    sweep_quantize<q_per_row, swizzled_128x4, bf16>(true);
    sweep_quantize<q_per_row, swizzled_128x4, __half>(false);
    sweep_quantize<q_per_row, swizzled_128x4, float>(true);
    sweep_quantize<q_per_row, linear_scales, bf16>(false);
  }
}
