// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief make_tensor_scale (TE's rule) and tensor_scale_from_decode, including edge cases.
#include <doctest/doctest.h>

#include "quant_helpers.hpp"

#include <quads/quant/tensor_scale.hpp>

#include <test_support/bits.hpp>
#include <test_support/generators.hpp>
#include <test_support/seed.hpp>

#include <cmath>
#include <limits>
#include <cstdint>
#include <random>

using namespace quads_test;

namespace {

bool is_identity(quads::tensor_scale ts) { return ts.encode == 1.0f && ts.decode == 1.0f; }

} // namespace

TEST_SUITE("quant.tensor_scale") {
  TEST_CASE("the tensor scale is min(2688 / amax, FLT_MAX) with a correctly rounded inverse") {
    auto g = rng("ts.random");
    std::uniform_int_distribution<int> e(-120, 127);
    std::uniform_real_distribution<float> m(1.0f, 2.0f);
    for (int n = 0; n < 100000; ++n) {
      const float amax = std::ldexp(m(g), e(g));
      if (!std::isfinite(amax)) continue;
      CAPTURE(describe(amax));
      const auto ts = quads::make_tensor_scale<quads::nvfp4>(amax);
      const float enc = std::fmin(2688.0f / amax, flt_max());
      REQUIRE(same_bits(ts.encode, enc));
      REQUIRE(same_bits(ts.decode, 1.0f / enc));
      const auto t46 = quads::make_tensor_scale<quads::nvfp4, opt_four_over_six>(amax);
      const float enc46 = std::fmin(1536.0f / amax, flt_max());
      REQUIRE(same_bits(t46.encode, enc46));
      REQUIRE(same_bits(t46.decode, 1.0f / enc46));
    }
  }

  TEST_CASE("amax 0 and amax Inf give the identity scale") {
    CHECK(is_identity(quads::make_tensor_scale<quads::nvfp4>(0.0f)));
    CHECK(is_identity(quads::make_tensor_scale<quads::nvfp4>(-0.0f)));
    CHECK(is_identity(quads::make_tensor_scale<quads::nvfp4>(flt_inf())));
    CHECK(is_identity(quads::make_tensor_scale<quads::nvfp4, opt_four_over_six>(0.0f)));
    CHECK(is_identity(quads::make_tensor_scale<quads::nvfp4, opt_four_over_six>(flt_inf())));
  }

  TEST_CASE("a NaN amax and a tiny amax clamp the encode scale to FLT_MAX") {
    for (const float amax : {flt_nan(), 1e-36f, 1e-38f, flt_denorm_min(), 2688.0f / flt_max() / 2.0f}) {
      CAPTURE(describe(amax));
      const auto ts = quads::make_tensor_scale<quads::nvfp4>(amax);
      CHECK(same_bits(ts.encode, flt_max()));
      CHECK(same_bits(ts.decode, 1.0f / flt_max()));
    }
    // the smallest amax that does not clamp
    const float edge = 2688.0f / flt_max();
    const auto ts = quads::make_tensor_scale<quads::nvfp4>(std::nextafter(edge, 1.0f) * 2.0f);
    CHECK(ts.encode < flt_max());
  }

  TEST_CASE("FLT_MAX amax gives a tiny but non-zero encode scale") {
    const auto ts = quads::make_tensor_scale<quads::nvfp4>(flt_max());
    CHECK(same_bits(ts.encode, 2688.0f / flt_max()));
    CHECK(ts.encode > 0.0f);
    CHECK(std::isfinite(ts.decode));
  }

  TEST_CASE("schemes without a tensor scale always get the identity") {
    for (const float amax : {0.0f, 1.0f, 1e-30f, flt_max(), flt_inf(), flt_nan()})
      CHECK(is_identity(quads::make_tensor_scale<quads::mxfp4>(amax)));
  }

  TEST_CASE("tensor_scale_from_decode keeps the decode scale and inverts it") {
    auto g = rng("ts.from_decode");
    std::uniform_int_distribution<int> e(-100, 100);
    std::uniform_real_distribution<float> m(1.0f, 2.0f);
    for (int n = 0; n < 100000; ++n) {
      const float d = std::ldexp(m(g), e(g));
      const auto ts = quads::tensor_scale_from_decode(d);
      REQUIRE(same_bits(ts.decode, d));
      REQUIRE(same_bits(ts.encode, 1.0f / d));
    }
    // 0 is amax = 0 in the decode direction: {1, 1}; a tiny scale clamps the encode side to
    // FLT_MAX (TE's clamp); Inf, NaN and negatives are outside the precondition and rejected
    const auto z = quads::tensor_scale_from_decode(0.0f);
    CHECK(z.encode == 1.0f);
    CHECK(z.decode == 1.0f);
    const auto t = quads::tensor_scale_from_decode(std::ldexp(1.0f, -140));
    CHECK(t.encode == std::numeric_limits<float>::max());
    CHECK(t.decode == std::ldexp(1.0f, -140));
    CHECK(quads::valid_decode_scale(0.0f));
    CHECK(quads::valid_decode_scale(std::numeric_limits<float>::max()));
    CHECK_FALSE(quads::valid_decode_scale(flt_inf()));
    CHECK_FALSE(quads::valid_decode_scale(flt_nan()));
    CHECK_FALSE(quads::valid_decode_scale(-1.0f));
    CHECK_FALSE(quads::valid_tensor_scale({1.0f, flt_nan()}));
    CHECK_FALSE(quads::valid_tensor_scale({0.0f, 1.0f}));
    CHECK(quads::valid_tensor_scale(quads::tensor_scale_from_decode(0.5f)));
  }

  TEST_CASE("a decode scale read back from make_tensor_scale gives the encode scale within 1 ulp") {
    // ModelOpt stores only the decode direction; re-inverting may move the encode scale by 1 ulp
    auto g = rng("ts.round_trip");
    std::uniform_int_distribution<int> e(-100, 100);
    std::uniform_real_distribution<float> m(1.0f, 2.0f);
    int off_by_one = 0;
    for (int n = 0; n < 100000; ++n) {
      const float amax = std::ldexp(m(g), e(g));
      const auto ts = quads::make_tensor_scale<quads::nvfp4>(amax);
      const auto back = quads::tensor_scale_from_decode(ts.decode);
      REQUIRE(same_bits(back.decode, ts.decode));
      const auto diff = static_cast<std::int64_t>(bits_of(back.encode)) - bits_of(ts.encode);
      REQUIRE(std::abs(diff) <= 1);
      off_by_one += diff != 0;
    }
    MESSAGE("encode scale moved by 1 ulp after the round trip in " << off_by_one << " of 100000");
  }
}
