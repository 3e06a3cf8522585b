// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Philox-4x32-10 known answers and the counter rule of `draw_block_bits`.
#include <doctest/doctest.h>

#include <quads/quant/random_bits.hpp>
#include <quads/scheme/schemes.hpp>

#include <test_support/seed.hpp>

#include <array>
#include <cstdint>
#include <random>

namespace {

// An independent Philox-4x32-10 with the full 128-bit counter and 64-bit key, written from the
// algorithm's description (Salmon et al., SC'11), so the Random123 known-answer vectors that
// need counter words 2 and 3 can be checked too.
using words = std::array<std::uint32_t, 4>;

void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}

words philox_ref(words ctr, std::array<std::uint32_t, 2> key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, ctr[0], hi0, lo0);
    mulhilo(0xCD9E8D57u, ctr[2], hi1, lo1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

//! A generator that returns its counter, to observe which counters a caller asks for.
struct echo_generator {
  quads::random_words4 operator()(std::uint64_t c) const noexcept {
    const auto lo = static_cast<std::uint32_t>(c);
    return {lo, lo ^ 0x11111111u, lo ^ 0x22222222u, static_cast<std::uint32_t>(c >> 32)};
  }
};
static_assert(quads::counter_based_generator<echo_generator>);
static_assert(!quads::counter_based_generator<int>);

} // namespace

TEST_SUITE("quant.random_bits") {
  TEST_CASE("philox4x32_10 reproduces the Random123 known answer for counter 0 and key 0") {
    const quads::random_words4 w = quads::philox4x32_10{0}(0);
    CHECK(w[0] == 0x6627e8d5u);
    CHECK(w[1] == 0xe169c58du);
    CHECK(w[2] == 0xbc57ac4cu);
    CHECK(w[3] == 0x9b00dbd8u);
  }

  TEST_CASE("the independent Philox passes all three Random123 known answers") {
    CHECK(philox_ref({0, 0, 0, 0}, {0, 0}) == words{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
    CHECK(philox_ref({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}) ==
          words{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
    CHECK(philox_ref({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}) ==
          words{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
  }

  TEST_CASE("philox4x32_10 maps seed to the key and the 64-bit counter to counter words 0 and 1") {
    auto g = quads_test::rng("philox.random");
    for (int n = 0; n < 20000; ++n) {
      const std::uint64_t seed = g(), ctr = g();
      const quads::random_words4 w = quads::philox4x32_10{seed}(ctr);
      const words r = philox_ref({static_cast<std::uint32_t>(ctr), static_cast<std::uint32_t>(ctr >> 32), 0, 0},
                                 {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
      REQUIRE(words{w[0], w[1], w[2], w[3]} == r);
    }
  }

  TEST_CASE("draw_block_bits uses counters b * (B / 16) + i, four words per draw, in order") {
    const echo_generator g;
    for (const std::uint64_t b : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{12345},
                                  std::uint64_t{1} << 40}) {
      CAPTURE(b);
      const auto nv = quads::draw_block_bits<quads::nvfp4>(g, b);
      CHECK(nv.size() == 4);
      const auto w = g(b);
      for (int i = 0; i < 4; ++i) CHECK(nv[static_cast<std::size_t>(i)] == w[static_cast<std::size_t>(i)]);

      const auto mx = quads::draw_block_bits<quads::mxfp4>(g, b);
      CHECK(mx.size() == 8);
      for (int d = 0; d < 2; ++d) {
        const auto wd = g(2 * b + static_cast<std::uint64_t>(d));
        for (int i = 0; i < 4; ++i)
          CHECK(mx[static_cast<std::size_t>(4 * d + i)] == wd[static_cast<std::size_t>(i)]);
      }
    }
    // with Philox: consecutive nvfp4 blocks are consecutive counters; mxfp4 block b covers the
    // counters of nvfp4 blocks 2b and 2b + 1
    const quads::philox4x32_10 ph{quads_test::derived_seed("philox.blocks")};
    for (std::uint64_t b = 0; b < 64; ++b) {
      const auto mx = quads::draw_block_bits<quads::mxfp4>(ph, b);
      const auto a = quads::draw_block_bits<quads::nvfp4>(ph, 2 * b);
      const auto c = quads::draw_block_bits<quads::nvfp4>(ph, 2 * b + 1);
      for (int i = 0; i < 4; ++i) {
        REQUIRE(mx[static_cast<std::size_t>(i)] == a[static_cast<std::size_t>(i)]);
        REQUIRE(mx[static_cast<std::size_t>(4 + i)] == c[static_cast<std::size_t>(i)]);
      }
    }
  }

  TEST_CASE("Philox bytes are close to uniform") {
    // Byte histogram over 2^18 bytes; chi-square with 255 degrees of freedom: mean 255, sd 22.6.
    // 400 is about 6.4 sd (false alarm well below 1e-9).
    const quads::philox4x32_10 ph{quads_test::derived_seed("philox.uniform")};
    std::array<double, 256> hist{};
    constexpr int draws = 1 << 14;
    for (int c = 0; c < draws; ++c) {
      const auto w = ph(static_cast<std::uint64_t>(c));
      for (std::uint32_t v : w)
        for (int k = 0; k < 4; ++k) hist[(v >> (8 * k)) & 0xffu] += 1;
    }
    const double expected = draws * 16.0 / 256.0;
    double chi2 = 0.0;
    for (double h : hist) chi2 += (h - expected) * (h - expected) / expected;
    MESSAGE("chi-square of Philox bytes: " << chi2);
    CHECK(chi2 < 400.0);
  }
}
