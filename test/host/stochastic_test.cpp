// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Stochastic rounding: reproducibility, seed sensitivity, grid neighbours, the byte
//! assignment of the random words, and unbiasedness (exact over all 8-bit draws, statistical
//! over Philox draws).
#include <doctest/doctest.h>

#include "quant_helpers.hpp"

#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/random_bits.hpp>
#include <quads/reference/tensor.hpp>

#include <test_support/bits.hpp>
#include <test_support/generators.hpp>
#include <test_support/seed.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

using namespace quads_test;

namespace {

template <class Format>
using sr_quantizer = quads::block_quantizer<Format, opt_stochastic>;
template <class Format>
using rn_quantizer = quads::block_quantizer<Format, opt_default>;

//! Byte j % 4 of word j / 4: the documented assignment of random bits to element j.
template <class Bits>
std::uint32_t byte_of(const Bits& bits, int j) {
  return (bits[static_cast<std::size_t>(j / 4)] >> (8 * (j % 4))) & 0xffu;
}

//! Exact mean, over the 256 equally likely 8-bit draws, of the stochastically rounded |y|.
struct sr_moments {
  double mean;
  double sd;
};
inline sr_moments exact_moments(float y) {
  double s = 0.0, s2 = 0.0;
  for (std::uint32_t r = 0; r < 256; ++r) {
    const double v = quads::decode_e2m1(quads::encode_e2m1_stochastic(y, r));
    s += v;
    s2 += v * v;
  }
  const double mean = s / 256.0;
  return {mean, std::sqrt(std::fmax(s2 / 256.0 - mean * mean, 0.0))};
}

template <class Format>
void check_neighbours_and_bytes(const char* stream) {
  constexpr int B = Format::block_size;
  using Q = sr_quantizer<Format>;
  auto g = rng(stream);
  const quads::philox4x32_10 gen{derived_seed(stream)};
  for (int n = 0; n < 4000; ++n) {
    const auto x = to_c<B>(random_block<B>(g));
    float amax_b = 0.0f;
    for (float v : x.v) amax_b = std::fmax(amax_b, std::fabs(v));
    const auto ts = quads::make_tensor_scale<Format>(amax_b * 2.0f);
    const auto bits = quads::draw_block_bits<Format>(gen, static_cast<std::uint64_t>(n));
    const auto q = Q::quantize(x.v, ts, bits);
    // SR never changes the block scale
    const auto qr = rn_quantizer<Format>::quantize(x.v, ts);
    REQUIRE(q.scale == qr.scale);
    const quads::block_scale s = Q::scale_for(amax_b, ts);
    for (int j = 0; j < B; ++j) {
      CAPTURE(j);
      CAPTURE(describe(x.v[j]));
      const std::uint8_t code = Q::code_at(q, j);
      // element j consumed byte j % 4 of word j / 4
      REQUIRE(code == quads::encode_e2m1_stochastic(x.v[j] * s.multiplier, byte_of(bits, j)));
      // and the result is one of the two grid neighbours of the scaled value, with x's sign
      const float y = x.v[j] * s.multiplier;
      const neighbours nb = grid_neighbours(std::fabs(y));
      const float mag = std::fabs(quads::decode_e2m1(code));
      REQUIRE((mag == nb.lo || mag == nb.hi));
      REQUIRE(((code & 8) != 0) == std::signbit(x.v[j]));
    }
  }
}

} // namespace

TEST_SUITE("quant.stochastic") {
  TEST_CASE("each stochastic output is one of the two grid neighbours (nvfp4)") {
    check_neighbours_and_bytes<quads::nvfp4>("sr.nvfp4");
  }
  TEST_CASE("each stochastic output is one of the two grid neighbours (mxfp4)") {
    check_neighbours_and_bytes<quads::mxfp4>("sr.mxfp4");
  }

  TEST_CASE("all 256 draws of the 8 random bits round without bias beyond 1/256 of a step") {
    // exact: P(up) = 1 - ceil(256 (1 - f)) / 256 for fraction f, so the mean lies within
    // step / 256 of |y| (fp32 rounding of t can move one draw, still within the bound)
    std::vector<float> ys;
    for (int i = 0; i <= 6 * 4096; ++i) ys.push_back(static_cast<float>(i) / 4096.0f);
    auto g = rng("sr.exact");
    std::uniform_real_distribution<float> u(0.0f, 6.0f);
    for (int i = 0; i < 20000; ++i) ys.push_back(u(g));
    for (float m : e2m1_midpoints) {
      ys.push_back(std::nextafter(m, 0.0f));
      ys.push_back(std::nextafter(m, 10.0f));
    }
    for (const float y : ys) {
      CAPTURE(describe(y));
      const neighbours nb = grid_neighbours(y);
      const double step = static_cast<double>(nb.hi) - nb.lo;
      const sr_moments mo = exact_moments(y);
      REQUIRE(std::fabs(mo.mean - y) <= step / 256.0 + 1e-12);
      // sign symmetry
      REQUIRE(quads::encode_e2m1_stochastic(-y, 77) ==
              (quads::encode_e2m1_stochastic(y, 77) | 8));
    }
  }

  TEST_CASE("the mean of many Philox-driven stochastic roundings approaches x") {
    // Tolerance: |mean_N - E| <= 5 sd / sqrt(N) (two-sided 5 sigma: false alarm 5.7e-7 per
    // element, about 1e-4 per run for the elements below), and |E - x| <= D step / 256 from the
    // 8-bit resolution of the draws, plus the multiplier's rounding |y D - x|.
    constexpr int draws = 1 << 16;
    using Q = sr_quantizer<quads::nvfp4>;
    auto g = rng("sr.mean");
    const quads::philox4x32_10 gen{derived_seed("sr.mean")};
    int rn_rejected = 0, elements = 0;
    for (int blk = 0; blk < 8; ++blk) {
      cblock<16> x{};
      const auto v = normal_values(g, 16, 1.0f);
      for (int i = 0; i < 16; ++i) x.v[i] = v[static_cast<std::size_t>(i)];
      float amax_b = 0.0f;
      for (float e : x.v) amax_b = std::fmax(amax_b, std::fabs(e));
      const auto ts = quads::make_tensor_scale<quads::nvfp4>(amax_b * 3.0f);
      const quads::block_scale s = Q::scale_for(amax_b, ts);
      const double D = real_scale<quads::nvfp4>(s.byte, ts);
      std::vector<double> sum(16, 0.0);
      for (int d = 0; d < draws; ++d) {
        const auto bits = quads::draw_block_bits<quads::nvfp4>(
            gen, static_cast<std::uint64_t>(blk) * draws + static_cast<std::uint64_t>(d));
        float out[16];
        Q::qdq(x.v, ts, out, bits);
        for (int i = 0; i < 16; ++i) sum[static_cast<std::size_t>(i)] += out[i];
      }
      float rn[16];
      rn_quantizer<quads::nvfp4>::qdq(x.v, ts, rn);
      for (int i = 0; i < 16; ++i) {
        CAPTURE(blk);
        CAPTURE(i);
        CAPTURE(describe(x.v[i]));
        const float y = x.v[i] * s.multiplier;
        const sr_moments mo = exact_moments(std::fabs(y));
        const neighbours nb = grid_neighbours(std::fabs(y));
        const double sign = std::signbit(x.v[i]) ? -1.0 : 1.0;
        const double mean = sum[static_cast<std::size_t>(i)] / draws;
        const double expected = sign * mo.mean * D;
        const double noise = 5.0 * mo.sd * D / std::sqrt(static_cast<double>(draws));
        const double bias = (static_cast<double>(nb.hi) - nb.lo) * D / 256.0 +
                            std::fabs(static_cast<double>(y) * D - x.v[i]) + std::fabs(expected) * 0x1p-22;
        // dequantized values carry one fp32 rounding each
        CHECK(std::fabs(mean - expected) <= noise + std::fabs(expected) * 0x1p-22 + 1e-30);
        if (std::fabs(y) > 6.0f) continue;  // unbiased only before saturation
        CHECK(std::fabs(mean - x.v[i]) <= noise + bias);
        // the same tolerance rejects round-to-nearest, whose error is not averaged away
        if (std::fabs(static_cast<double>(rn[i]) - x.v[i]) > noise + bias) ++rn_rejected;
        ++elements;
      }
    }
    MESSAGE("RNE falls outside the SR tolerance for " << rn_rejected << " of " << elements
                                                      << " elements");
    CHECK(rn_rejected > elements / 2);
  }

  TEST_CASE("stochastic block quantization is reproducible for a seed and changes with it") {
    auto g = rng("sr.repro");
    const auto x = normal_values(g, 64 * 256, 1.0f);
    constexpr auto O = opt_stochastic;
    const std::uint64_t s1 = derived_seed("sr.repro.1"), s2 = s1 + 1;
    const auto a = quads::reference::quantize<quads::nvfp4, O>(x, 64, 256, {.seed = s1});
    const auto b = quads::reference::quantize<quads::nvfp4, O>(x, 64, 256, {.seed = s1});
    const auto c = quads::reference::quantize<quads::nvfp4, O>(x, 64, 256, {.seed = s2});
    const auto rn = quads::reference::quantize<quads::nvfp4>(x, 64, 256);
    CHECK(mismatch_report(a.data, b.data) == "");
    CHECK(mismatch_report(a.scales, b.scales) == "");
    CHECK(a.scales == c.scales);  // the seed changes codes, never scales
    CHECK(a.scales == rn.scales);
    std::size_t differ_seed = 0, differ_rn = 0;
    for (std::size_t i = 0; i < a.data.size(); ++i) {
      differ_seed += a.data[i] != c.data[i];
      differ_rn += a.data[i] != rn.data[i];
    }
    MESSAGE("bytes differing between seeds: " << differ_seed << " of " << a.data.size());
    CHECK(differ_seed > a.data.size() / 10);
    CHECK(differ_rn > a.data.size() / 10);

    // the reference draws block b = (expert * rows + row) * (cols / 16) + kb from Philox{seed}
    using Q = sr_quantizer<quads::nvfp4>;
    const quads::philox4x32_10 gen{s1};
    for (int row : {0, 17, 63})
      for (int kb : {0, 5, 15}) {
        cblock<16> blk{};
        for (int i = 0; i < 16; ++i) blk.v[i] = x[static_cast<std::size_t>(row) * 256 + kb * 16 + i];
        const auto q = Q::quantize(blk.v, a.tensor_scales[0],
                                   quads::draw_block_bits<quads::nvfp4>(gen, row * 16 + kb));
        for (int i = 0; i < 8; ++i)
          REQUIRE(q.codes[i] == a.data[static_cast<std::size_t>(row) * 128 + kb * 8 + i]);
      }
  }

  TEST_CASE("stochastic rounding maps NaN to +6 and saturates beyond 6") {
    for (std::uint32_t r : {0u, 1u, 128u, 255u}) {
      CHECK(quads::encode_e2m1_stochastic(flt_nan(), r) == 0x7);
      CHECK(quads::encode_e2m1_stochastic(-flt_nan(), r) == 0x7);
      CHECK(quads::encode_e2m1_stochastic(7.0f, r) == 0x7);
      CHECK(quads::encode_e2m1_stochastic(-flt_inf(), r) == 0xF);
      CHECK(quads::encode_e2m1_stochastic(6.0f, r) == 0x7);
      CHECK(quads::encode_e2m1_stochastic(-0.0f, r) == 0x8);
    }
  }
}
