// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: a format without `block_size`. Positive twin: with it.
// expect: format lacks `static constexpr int block_size`
#include <quads/quant/block_quantizer.hpp>

#include <cstdint>

struct my_format {
  using element_type = quads::e2m1x2_t;
  using scale_type = quads::ue4m3_t;
#ifndef QUADS_COMPILE_FAIL
  static constexpr int block_size = 16;
#endif
  static constexpr bool has_tensor_scale = true;
  static constexpr float decode_scale(std::uint8_t b) noexcept { return quads::decode_ue4m3(b); }
};

int use(const float (&x)[16]) { return quads::block_quantizer<my_format>::quantize(x, {}).scale; }
