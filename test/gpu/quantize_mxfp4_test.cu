// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief MXFP4 quantize (+ QDQ) kernels vs the host reference: both UE8M0 roundings, stochastic.
#include "quantize_check.cuh"

namespace {
using namespace quads;
using namespace quads::gpu_test;
using bf16 = __nv_bfloat16;

using m_up = block_quantizer<mxfp4>;
using m_floor = block_quantizer<mxfp4, quant_options{.mx_rounding = ue8m0_rounding::floor}>;
using m_sr = block_quantizer<mxfp4, quant_options{.round = rounding::stochastic}>;
} // namespace

TEST_SUITE("gpu.quantize.mxfp4") {
  TEST_CASE("sm90: mxfp4 round-up (RCEIL) scales are byte-identical to the reference") {
    sweep_quantize<m_up, swizzled_128x4, bf16>(true);
    sweep_quantize<m_up, swizzled_128x4, __half>(false);
    sweep_quantize<m_up, swizzled_128x4, float>(true);
    sweep_quantize<m_up, linear_scales, bf16>(false);
  }
  TEST_CASE("sm90: mxfp4 floor (OCP) scales are byte-identical to the reference") {
    sweep_quantize<m_floor, swizzled_128x4, bf16>(true);
    sweep_quantize<m_floor, linear_scales, float>(false);
  }
  TEST_CASE("sm90: mxfp4 stochastic rounding is byte-identical to the reference") {
    sweep_quantize<m_sr, swizzled_128x4, bf16>(true);
    sweep_quantize<m_sr, linear_scales, __half>(false);
  }
}
