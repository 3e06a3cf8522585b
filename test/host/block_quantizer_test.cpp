// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief block_quantizer (RNE): spec formulas, QDQ consistency, error bound, zero/NaN/Inf blocks,
//! the tensor-amax block, 4/6 selection.
#include <doctest/doctest.h>

#include "quant_helpers.hpp"

#include <quads/quant/block_quantizer.hpp>

#include <test_support/bits.hpp>
#include <test_support/generators.hpp>
#include <test_support/seed.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using namespace quads_test;

namespace {

constexpr int random_blocks = 4000;

//! The block scale and multiplier written out from the recipes (formats.md §2.4, §2.6), using
//! only the scalar codecs: TE-exact NVFP4, RCEIL and OCP-floor MX.
template <class Format, quads::quant_options O>
quads::block_scale spec_scale(float amax_b, quads::tensor_scale ts) {
  if constexpr (quads::is_two_level<Format>) {
    const float rcp6 = 1.0f / 6.0f;
    const std::uint8_t byte = quads::encode_ue4m3(amax_b * (ts.encode * rcp6));
    const float m = std::fmin(1.0f / (quads::decode_ue4m3(byte) * ts.decode), flt_max());
    return {byte, m};
  } else {
    std::uint8_t byte;
    if constexpr (O.mx_rounding == quads::ue8m0_rounding::round_up) {
      byte = quads::encode_ue8m0_round_up(amax_b * (1.0f / 6.0f));
    } else {
      const int field = std::isinf(amax_b) ? 254 : static_cast<int>((bits_of(amax_b) >> 23) & 0xff);
      byte = static_cast<std::uint8_t>(field < 2 ? 0 : field - 2);
    }
    return {byte, std::ldexp(1.0f, 127 - byte)};
  }
}

template <int B>
float spec_amax(const float (&x)[B]) {
  float m = 0.0f;
  for (float v : x)
    if (!std::isnan(v)) m = std::fmax(m, std::fabs(v));
  return m;
}

//! Tensor scales to pair with a block: its own amax, a larger tensor amax (the common case), a
//! smaller one (the block saturates at 448), none (amax 0 -> identity).
template <class Format>
std::vector<quads::tensor_scale> scales_for(float amax_b, std::mt19937_64& g) {
  std::uniform_int_distribution<int> k(0, 24);
  return {quads::make_tensor_scale<Format>(amax_b),
          quads::make_tensor_scale<Format>(amax_b * std::ldexp(1.0f, k(g))),
          quads::make_tensor_scale<Format>(amax_b * 0.3f), quads::make_tensor_scale<Format>(0.0f)};
}

template <class Format, quads::quant_options O>
void check_block(const float (&x)[Format::block_size], quads::tensor_scale ts) {
  using Q = quads::block_quantizer<Format, O>;
  constexpr int B = Format::block_size;
  const auto q = Q::quantize(x, ts);

  // 1. the recipe written out independently
  const quads::block_scale s = spec_scale<Format, O>(spec_amax(x), ts);
  REQUIRE(q.scale == s.byte);
  for (int i = 0; i < B; ++i) {
    CAPTURE(i);
    CAPTURE(describe(x[i]));
    REQUIRE(Q::code_at(q, i) == quads::encode_e2m1(x[i] * s.multiplier));
  }

  // 2. dequantize(quantize(x)) == qdq(x), bit for bit; the dequantized value is
  //    (e2m1 * scale) * S_dec with one rounding
  float deq[B], fq[B];
  Q::dequantize(q, ts, deq);
  Q::qdq(x, ts, fq);
  REQUIRE(mismatch_report(deq, fq) == "");
  for (int i = 0; i < B; ++i) {
    float expect = quads::decode_e2m1(Q::code_at(q, i)) * Format::decode_scale(q.scale);
    if constexpr (quads::is_two_level<Format>) expect = expect * ts.decode;
    REQUIRE(same_bits(deq[i], expect));
  }

  // 3. error bound: |x - qdq(x)| <= half the local grid step times the real scale D, plus the
  //    rounding of the multiplier (|y D - x|) and of the final product; saturated elements
  //    (|x m| > 6, which includes scale underflow to byte 0) give ±6 instead.
  const double D = real_scale<Format>(q.scale, ts);
  for (int i = 0; i < B; ++i) {
    if (!std::isfinite(x[i])) continue;
    CAPTURE(i);
    CAPTURE(describe(x[i]));
    const float y = x[i] * s.multiplier;
    const std::uint8_t code = Q::code_at(q, i);
    if (!(std::fabs(y) <= 6.0f)) {
      REQUIRE((code & 7) == 7);
      continue;
    }
    const neighbours n = grid_neighbours(std::fabs(y));
    const double half = 0.5 * (static_cast<double>(n.hi) - n.lo);
    const double err = std::fabs(static_cast<double>(x[i]) - deq[i]);
    const double mult_err = std::fabs(static_cast<double>(y) * D - x[i]);
    const double bound = half * D + mult_err + std::fabs(static_cast<double>(deq[i])) * 0x1p-23 +
                         0x1p-149;
    REQUIRE(err <= bound);
    // "times the scale": with normal numbers the multiplier is the reciprocal of D within ulps
    if (D >= 0x1p-126 && s.multiplier < flt_max() && std::fabs(y) >= 0x1p-126)
      REQUIRE(mult_err <= std::fabs(static_cast<double>(x[i])) * 0x1p-21);
  }
}

template <class Format, quads::quant_options O>
void check_random_and_adversarial(const char* stream) {
  constexpr int B = Format::block_size;
  auto g = rng(stream);
  for (int n = 0; n < random_blocks; ++n) {
    const auto x = to_c<B>(random_block<B>(g));
    for (const quads::tensor_scale ts : scales_for<Format>(spec_amax(x.v), g)) check_block<Format, O>(x.v, ts);
  }
  for (const auto& a : adversarial_blocks<B>()) {
    const auto x = to_c<B>(a);
    for (const quads::tensor_scale ts : scales_for<Format>(spec_amax(x.v), g)) check_block<Format, O>(x.v, ts);
  }
}

} // namespace

TEST_SUITE("quant.block_quantizer") {
  TEST_CASE("nvfp4 default equals TransformerEngine's recipe and keeps its QDQ promises") {
    check_random_and_adversarial<quads::nvfp4, opt_default>("bq.nvfp4");
  }
  TEST_CASE("mxfp4 round-up equals RCEIL and keeps its QDQ promises") {
    check_random_and_adversarial<quads::mxfp4, opt_default>("bq.mxfp4");
  }
  TEST_CASE("mxfp4 floor equals the OCP shared-exponent rule and keeps its QDQ promises") {
    check_random_and_adversarial<quads::mxfp4, opt_mx_floor>("bq.mxfp4.floor");
  }

  TEST_CASE("an all-zero block gets scale byte 0 and zero codes") {
    float zeros[32] = {};
    float nzeros[32];
    for (float& v : nzeros) v = -0.0f;
    for (const float amax_t : {0.0f, 1.0f, 1e-30f, 1e30f, flt_max()}) {
      CAPTURE(amax_t);
      const auto ts = quads::make_tensor_scale<quads::nvfp4>(amax_t);
      const auto& z16 = reinterpret_cast<const float(&)[16]>(zeros);
      const auto q = quads::block_quantizer<quads::nvfp4>::quantize(z16, ts);
      CHECK(q.scale == 0);
      for (std::uint8_t c : q.codes) CHECK(c == 0);
      // -0.0 keeps its sign (code 0x8) and dequantizes to -0.0
      const auto& n16 = reinterpret_cast<const float(&)[16]>(nzeros);
      const auto qn = quads::block_quantizer<quads::nvfp4>::quantize(n16, ts);
      CHECK(qn.scale == 0);
      for (std::uint8_t c : qn.codes) CHECK(c == 0x88);
      float out[16];
      quads::block_quantizer<quads::nvfp4>::dequantize(qn, ts, out);
      for (float v : out) CHECK(same_bits(v, -0.0f));
    }
    const auto qm = quads::block_quantizer<quads::mxfp4>::quantize(zeros, {});
    CHECK(qm.scale == 0);
    for (std::uint8_t c : qm.codes) CHECK(c == 0);
    const auto qf = quads::block_quantizer<quads::mxfp4, opt_mx_floor>::quantize(zeros, {});
    CHECK(qf.scale == 0);
    for (std::uint8_t c : qf.codes) CHECK(c == 0);
  }

  TEST_CASE("the block holding the tensor amax gets scale byte 0x7E (448) by default") {
    auto g = rng("bq.amax_block");
    std::uniform_int_distribution<int> e(-110, 126), pos(0, 15);
    std::vector<float> amaxes = {1.0f, 6.0f, 2688.0f, flt_max(), std::ldexp(1.0f, -110)};
    for (int n = 0; n < 2000; ++n)
      amaxes.push_back(std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(g), e(g)));
    for (const float amax_t : amaxes) {
      CAPTURE(describe(amax_t));
      // uniform values in (-amax, amax) and amax itself, with a random sign, at a random place
      cblock<16> b{};
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (float& v : b.v) v = u(g) * amax_t;
      const int p = pos(g);
      b.v[p] = (pos(g) % 2 ? -1.0f : 1.0f) * amax_t;
      const auto ts = quads::make_tensor_scale<quads::nvfp4>(amax_t);
      const auto q = quads::block_quantizer<quads::nvfp4>::quantize(b.v, ts);
      REQUIRE(q.scale == 0x7E);
      REQUIRE((quads::block_quantizer<quads::nvfp4>::code_at(q, p) & 7) == 7);
      // with 4/6 (bound 256) the amax block maps to 256 (target 6) or 384 (target 4)
      const auto ts46 = quads::make_tensor_scale<quads::nvfp4, opt_four_over_six>(amax_t);
      const auto q46 = quads::block_quantizer<quads::nvfp4, opt_four_over_six>::quantize(b.v, ts46);
      REQUIRE((q46.scale == 0x78 || q46.scale == 0x7C));
    }
  }

  TEST_CASE("a NaN element gets code 0x7 and leaves the rest of the block unchanged") {
    auto g = rng("bq.nan");
    std::uniform_int_distribution<int> pos(0, 31);
    for (int n = 0; n < 2000; ++n) {
      auto x32 = to_c<32>(random_block<32>(g));
      cblock<32> with_nan = x32, with_zero = x32;
      const int p1 = pos(g), p2 = pos(g);
      with_nan.v[p1] = flt_nan();
      with_nan.v[p2] = -flt_nan();
      with_zero.v[p1] = 0.0f;
      with_zero.v[p2] = 0.0f;
      auto check = [&]<class Q>(const auto& xn, const auto& xz, int n_elems) {
        const auto ts = quads::make_tensor_scale<typename Q::format>(1.0f);
        const auto qn = Q::quantize(xn, ts);
        const auto qz = Q::quantize(xz, ts);
        REQUIRE(qn.scale == qz.scale);  // NaN never enters the block amax
        for (int i = 0; i < n_elems; ++i) {
          const bool is_nan = std::isnan(xn[i]);
          REQUIRE(Q::code_at(qn, i) == (is_nan ? 0x7 : Q::code_at(qz, i)));
        }
      };
      check.template operator()<quads::block_quantizer<quads::mxfp4>>(with_nan.v, with_zero.v, 32);
      const auto& n16 = reinterpret_cast<const float(&)[16]>(with_nan.v);
      const auto& z16 = reinterpret_cast<const float(&)[16]>(with_zero.v);
      check.template operator()<quads::block_quantizer<quads::nvfp4>>(n16, z16, 16);
    }
    // all-NaN block: amax 0, scale byte 0, every code +6
    float all_nan[16];
    for (float& v : all_nan) v = flt_nan();
    const auto q = quads::block_quantizer<quads::nvfp4>::quantize(all_nan, {});
    CHECK(q.scale == 0);
    for (std::uint8_t c : q.codes) CHECK(c == 0x77);
  }

  TEST_CASE("an infinite element saturates the block scale and encodes as ±6") {
    auto g = rng("bq.inf");
    for (int n = 0; n < 500; ++n) {
      auto x = to_c<32>(random_block<32>(g));
      for (float& v : x.v)
        if (!std::isfinite(v)) v = 1.0f;
      x.v[3] = flt_inf();
      x.v[20] = -flt_inf();
      // NVFP4: e4m3 saturates to 448 whatever the tensor scale
      const auto& x16 = reinterpret_cast<const float(&)[16]>(x.v);
      for (const float amax_t : {1.0f, 1e-20f, 1e20f}) {
        const auto ts = quads::make_tensor_scale<quads::nvfp4>(amax_t);
        using Q = quads::block_quantizer<quads::nvfp4>;
        const auto q = Q::quantize(x16, ts);
        REQUIRE(q.scale == 0x7E);
        REQUIRE(Q::code_at(q, 3) == 0x7);
        const float m = std::fmin(1.0f / (448.0f * ts.decode), flt_max());
        for (int i = 0; i < 16; ++i)
          if (i != 3) REQUIRE(Q::code_at(q, i) == quads::encode_e2m1(x16[i] * m));
      }
      // MXFP4: UE8M0 saturates to 2^127 (0xFE); ±Inf -> ±6 (and dequantize back to ±Inf)
      using M = quads::block_quantizer<quads::mxfp4>;
      const auto q = M::quantize(x.v, {});
      REQUIRE(q.scale == 0xFE);
      REQUIRE(M::code_at(q, 3) == 0x7);
      REQUIRE(M::code_at(q, 20) == 0xF);
      float out[32];
      M::dequantize(q, {}, out);
      REQUIRE(out[3] == flt_inf());
      REQUIRE(out[20] == -flt_inf());
    }
  }

  TEST_CASE("four_over_six keeps the candidate with strictly lower fp32 error, never worse") {
    using Q46 = quads::block_quantizer<quads::nvfp4, opt_four_over_six>;
    using Q6 = quads::block_quantizer<quads::nvfp4, opt_default>;
    auto g = rng("bq.four_over_six");
    int chose_four = 0, total = 0;
    auto sq_err_f32 = [](const float (&x)[16], const float (&d)[16]) {
      float e = 0.0f;
      for (int i = 0; i < 16; ++i) {
        volatile float sq = (x[i] - d[i]) * (x[i] - d[i]);  // no FMA contraction with -mfma
        e = e + sq;
      }
      return e;
    };
    auto sq_err_f64 = [](const float (&x)[16], const float (&d)[16]) {
      double e = 0.0;
      for (int i = 0; i < 16; ++i) e += (static_cast<double>(x[i]) - d[i]) * (static_cast<double>(x[i]) - d[i]);
      return e;
    };
    for (int n = 0; n < 20000; ++n) {
      // Gaussian blocks (finite): the setting the 4/6 rule is designed for
      cblock<16> x{};
      const auto v = normal_values(g, 16, std::ldexp(1.0f, std::uniform_int_distribution<int>(-20, 20)(g)));
      for (int i = 0; i < 16; ++i) x.v[i] = v[static_cast<std::size_t>(i)];
      const float amax_b = spec_amax(x.v);
      const float amax_t = amax_b * std::uniform_real_distribution<float>(1.0f, 64.0f)(g);
      const auto ts = quads::make_tensor_scale<quads::nvfp4, opt_four_over_six>(amax_t);
      const auto q46 = Q46::quantize(x.v, ts);
      const auto q6 = Q6::quantize(x.v, ts);  // the target-6 candidate under the same scale
      // the target-4 candidate, built from the public pieces
      const quads::block_scale s4 = Q46::scale_for(amax_b, ts, 4.0f);
      float d46[16], d6[16], d4[16];
      Q46::dequantize(q46, ts, d46);
      Q6::dequantize(q6, ts, d6);
      for (int i = 0; i < 16; ++i) d4[i] = Q46::decode(Q46::encode(x.v[i], s4.multiplier), s4.byte, ts);
      const float e6 = sq_err_f32(x.v, d6), e4 = sq_err_f32(x.v, d4), e46 = sq_err_f32(x.v, d46);
      CAPTURE(e6);
      CAPTURE(e4);
      REQUIRE(e46 <= e6);
      REQUIRE(sq_err_f64(x.v, d46) <= sq_err_f64(x.v, d6) * (1.0 + 1e-5));
      const bool four = e4 < e6;  // ties keep 6
      REQUIRE(q46.scale == (four ? s4.byte : q6.scale));
      if (four) {
        for (int i = 0; i < 16; ++i) REQUIRE(same_bits(d46[i], d4[i]));
      } else {
        REQUIRE(mismatch_report(d46, d6) == "");
      }
      chose_four += four;
      ++total;
    }
    MESSAGE("four_over_six chose target 4 in " << chose_four << " of " << total << " blocks");
    CHECK(chose_four > 0);
    CHECK(chose_four < total);
  }

  TEST_CASE("four_over_six keeps 6 for an all-zero block") {
    using Q46 = quads::block_quantizer<quads::nvfp4, opt_four_over_six>;
    float z[16] = {};
    const auto q = Q46::quantize(z, quads::make_tensor_scale<quads::nvfp4, opt_four_over_six>(1.0f));
    CHECK(q.scale == 0);
    for (std::uint8_t c : q.codes) CHECK(c == 0);
  }

  TEST_CASE("a tensor scale smaller than the block needs saturates the scale byte at 448") {
    auto g = rng("bq.saturate");
    using Q = quads::block_quantizer<quads::nvfp4>;
    for (int n = 0; n < 500; ++n) {
      const auto x = to_c<16>(random_block<16>(g));
      const float amax_b = spec_amax(x.v);
      if (!(amax_b > 1e-30f && amax_b < 1e30f)) continue;
      const auto ts = quads::make_tensor_scale<quads::nvfp4>(amax_b / 4.0f);
      const auto q = Q::quantize(x.v, ts);
      REQUIRE(q.scale == 0x7E);
      for (int i = 0; i < 16; ++i)  // the amax element maps to about 24 and clips to ±6
        if (std::fabs(x.v[i]) == amax_b) REQUIRE((Q::code_at(q, i) & 7) == 7);
    }
  }
}
