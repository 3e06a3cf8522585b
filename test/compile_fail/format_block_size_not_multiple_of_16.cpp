// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: a block size of 24 (E2M1 blocks come in multiples of 16).
//! Positive twin: 32.
// expect: format block_size must be a positive multiple of 16
#include <quads/quant/block_quantizer.hpp>

#include <cstdint>

struct my_format {
  using element_type = quads::e2m1x2_t;
  using scale_type = quads::ue4m3_t;
#ifdef QUADS_COMPILE_FAIL
  static constexpr int block_size = 24;
#else
  static constexpr int block_size = 32;
#endif
  static constexpr bool has_tensor_scale = true;
  static constexpr float decode_scale(std::uint8_t b) noexcept { return quads::decode_ue4m3(b); }
};

int use(const float (&x)[my_format::block_size]) {
  return quads::block_quantizer<my_format>::quantize(x, {}).scale;
}
