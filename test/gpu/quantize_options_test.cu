// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Quantize kernels vs the host reference: four-over-six, stochastic rounding, combinations.
#include "quantize_check.cuh"

namespace {
using namespace quads;
using namespace quads::gpu_test;
using bf16 = __nv_bfloat16;

using q_4o6 = block_quantizer<nvfp4, quant_options{.block_rule = block_scale_rule::four_over_six}>;
using q_sr = block_quantizer<nvfp4, quant_options{.round = rounding::stochastic}>;
using q_sr_row = block_quantizer<nvfp4, quant_options{.round = rounding::stochastic,
                                                      .global = global_scale::per_row}>;
using q_4o6_given =
    block_quantizer<nvfp4, quant_options{.block_rule = block_scale_rule::four_over_six,
                                         .global = global_scale::given}>;
} // namespace

TEST_SUITE("gpu.quantize.options") {
  TEST_CASE("sm90: nvfp4 four-over-six is byte-identical to the reference") {
    sweep_quantize<q_4o6, swizzled_128x4, bf16>(true);
    sweep_quantize<q_4o6, swizzled_128x4, __half>(false);
    sweep_quantize<q_4o6, linear_scales, float>(false);
    sweep_quantize<q_4o6_given, swizzled_128x4, bf16>(true);
  }
  TEST_CASE("sm90: nvfp4 stochastic rounding reproduces the reference's Philox bits") {
    sweep_quantize<q_sr, swizzled_128x4, bf16>(true);
    sweep_quantize<q_sr, linear_scales, float>(false);
    sweep_quantize<q_sr_row, swizzled_128x4, bf16>(true);
    sweep_quantize<q_sr_row, linear_scales, __half>(false);
  }
}
