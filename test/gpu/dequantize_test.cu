// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Dequantize kernels vs reference::dequantize (fp32 bit for bit; bf16/fp16 = RNE casts).
#include "quantize_check.cuh"

namespace {
using namespace quads;
using namespace quads::gpu_test;
using bf16 = __nv_bfloat16;

using q_default = block_quantizer<nvfp4>;
using q_per_row = block_quantizer<nvfp4, quant_options{.global = global_scale::per_row}>;
using q_given = block_quantizer<nvfp4, quant_options{.global = global_scale::given}>;
using m_up = block_quantizer<mxfp4>;

template <class Quantizer, class Layout, class TOut>
void sweep_dequantize() {
  int variant = 0;
  for (const shape3 sh : test_shapes(Quantizer::block_size))
    for (const input_kind k : all_kinds) {
      check_dequantize<Quantizer, Layout, TOut>(sh, k, seed() + 104729u * variant, variant);
      ++variant;
    }
}
} // namespace

TEST_SUITE("gpu.dequantize") {
  TEST_CASE("sm90: nvfp4 dequantize to fp32/bf16/fp16 matches the reference") {
    sweep_dequantize<q_default, swizzled_128x4, float>();
    sweep_dequantize<q_default, swizzled_128x4, bf16>();
    sweep_dequantize<q_default, linear_scales, __half>();
    sweep_dequantize<q_given, linear_scales, float>();
    sweep_dequantize<q_per_row, swizzled_128x4, float>();
    sweep_dequantize<q_per_row, linear_scales, bf16>();
  }
  TEST_CASE("sm90: mxfp4 dequantize to fp32/bf16 matches the reference") {
    sweep_dequantize<m_up, swizzled_128x4, float>();
    sweep_dequantize<m_up, linear_scales, bf16>();
  }
}
