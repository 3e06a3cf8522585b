// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: a UE8M0 (power-of-two) format that claims an FP32 tensor scale.
//! Positive twin: has_tensor_scale = false.
// expect: has_tensor_scale must be true exactly for ue4m3_t block scales
#include <quads/quant/block_quantizer.hpp>

#include <cstdint>

struct my_format {
  using element_type = quads::e2m1x2_t;
  using scale_type = quads::ue8m0_t;
  static constexpr int block_size = 32;
#ifdef QUADS_COMPILE_FAIL
  static constexpr bool has_tensor_scale = true;
#else
  static constexpr bool has_tensor_scale = false;
#endif
  static constexpr float decode_scale(std::uint8_t b) noexcept { return quads::decode_ue8m0(b); }
};

int use(const float (&x)[32]) { return quads::block_quantizer<my_format>::quantize(x, {}).scale; }
