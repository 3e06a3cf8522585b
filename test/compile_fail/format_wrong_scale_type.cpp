// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: a format whose scale type is signed E4M3 instead of UE4M3/UE8M0.
//! Positive twin: UE4M3.
// expect: format scale_type must be ue4m3_t or ue8m0_t
#include <quads/quant/block_quantizer.hpp>

#include <cstdint>

struct my_format {
  using element_type = quads::e2m1x2_t;
#ifdef QUADS_COMPILE_FAIL
  using scale_type = quads::e4m3_t;
#else
  using scale_type = quads::ue4m3_t;
#endif
  static constexpr int block_size = 16;
  static constexpr bool has_tensor_scale = true;
  static constexpr float decode_scale(std::uint8_t b) noexcept { return quads::decode_ue4m3(b); }
};

int use(const float (&x)[16]) { return quads::block_quantizer<my_format>::quantize(x, {}).scale; }
