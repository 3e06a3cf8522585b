// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Counter-based random bits for stochastic rounding: a concept and Philox-4x32-10.
//!
//! Stochastic rounding consumes 8 bits per element. The bits of block `b` of a tensor come from
//! the generator at counters `b * (block_size / 16) + i`, i = 0 .. block_size/16 - 1 (one 128-bit
//! draw per 16 elements; element j uses byte j % 4 of the block's word j / 4). They depend only on the
//! seed and the block's index, never on which thread quantizes it, so host and GPU agree.
#pragma once

#include <quads/config.hpp>

#include <quads/scheme/schemes.hpp>

#include <cuda/std/array>
#include <cuda/std/cstdint>

#include <concepts>

namespace quads {

using random_words4 = ::cuda::std::array<::cuda::std::uint32_t, 4>;

//! A generator: `g(counter)` returns 128 random bits for a 64-bit counter, deterministically.
template <class G>
concept counter_based_generator = std::copy_constructible<G> && requires(const G& g,
                                                                         ::cuda::std::uint64_t c) {
  { g(c) } -> std::same_as<random_words4>;
};

//! Philox-4x32 with 10 rounds (Salmon et al., SC'11), keyed by a 64-bit seed.
struct philox4x32_10 {
  ::cuda::std::uint64_t seed = 0;

  QUADS_API constexpr random_words4 operator()(::cuda::std::uint64_t counter) const noexcept {
    ::cuda::std::uint32_t c0 = static_cast<::cuda::std::uint32_t>(counter);
    ::cuda::std::uint32_t c1 = static_cast<::cuda::std::uint32_t>(counter >> 32);
    ::cuda::std::uint32_t c2 = 0, c3 = 0;
    ::cuda::std::uint32_t k0 = static_cast<::cuda::std::uint32_t>(seed);
    ::cuda::std::uint32_t k1 = static_cast<::cuda::std::uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      const ::cuda::std::uint64_t p0 = ::cuda::std::uint64_t{0xD2511F53u} * c0;
      const ::cuda::std::uint64_t p1 = ::cuda::std::uint64_t{0xCD9E8D57u} * c2;
      const ::cuda::std::uint32_t n0 = static_cast<::cuda::std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
      const ::cuda::std::uint32_t n2 = static_cast<::cuda::std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
      c1 = static_cast<::cuda::std::uint32_t>(p1);
      c3 = static_cast<::cuda::std::uint32_t>(p0);
      c0 = n0;
      c2 = n2;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    return {c0, c1, c2, c3};
  }
};
static_assert(counter_based_generator<philox4x32_10>);

//! The random words of one block: `block_size / 4` words, element j uses byte j % 4 of word j / 4.
template <block_scaled_format Format>
using block_random_bits = ::cuda::std::array<::cuda::std::uint32_t, Format::block_size / 4>;

//! Draws the random bits of block `block_index` (see the file comment for the counter rule).
template <block_scaled_format Format, counter_based_generator Generator>
QUADS_API constexpr block_random_bits<Format> draw_block_bits(const Generator& g,
                                                              ::cuda::std::uint64_t block_index) noexcept {
  block_random_bits<Format> out{};
  constexpr int draws = Format::block_size / 16;
  for (int d = 0; d < draws; ++d) {
    const random_words4 w = g(block_index * draws + static_cast<::cuda::std::uint64_t>(d));
    for (int i = 0; i < 4; ++i) out[4 * d + i] = w[i];
  }
  return out;
}

} // namespace quads
