// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Straight-through rules: identity passes gradients bit for bit; clipped masks exactly
//! the elements whose scaled value saturated, checked against an independent computation from
//! the packed bytes of `reference::quantize`.
#include <doctest/doctest.h>

#include "policy_helpers.hpp"

#include <quads/policy/reference.hpp>
#include <quads/policy/ste.hpp>

#include <cfloat>
#include <cmath>
#include <limits>
#include <string>

using namespace policy_test;
namespace ref = quads::reference;

namespace {

struct mask_counts {
  int saturated = 0;      // masked elements
  int rounded_to_six = 0; // code ±6 without saturating (keeps its gradient)
};

//! Independent multiplier of a block from its stored scale byte (plain float arithmetic, not
//! block_quantizer): NVFP4 min(1 / (scale * S_dec), FLT_MAX), MXFP4 2^(127 - byte); 0 for a
//! scale that decodes to 0 (the block dequantizes to zeros, nothing clipped).
template <class Format>
float multiplier_from_byte(std::uint8_t byte, quads::tensor_scale ts) {
  if constexpr (Format::has_tensor_scale) {
    if (Format::decode_scale(byte) == 0.0f) return 0.0f;
    const float d = Format::decode_scale(byte) * ts.decode;
    return std::fmin(1.0f / d, FLT_MAX);
  } else {
    return std::ldexp(1.0f, 127 - static_cast<int>(byte));
  }
}

//! Runs the clipped STE on a gradient of ones and checks it against the packed tensor: a zero
//! exactly where |x * m| > 6 (or NaN), with m from the block's stored byte; every masked finite
//! element must carry code ±6. Returns the counts so callers can require non-vacuity.
template <class Format, quads::quant_options O>
mask_counts check_clipped_mask(const std::vector<float>& x, int experts, int rows, int cols,
                               std::span<const quads::tensor_scale> given = {},
                               std::uint64_t seed = 0) {
  using Q = quads::block_quantizer<Format, O>;
  constexpr int B = Format::block_size;
  const auto fq = ref::fake_quant<Q>(x, experts, rows, cols, given, seed);
  const auto packed = ref::quantize<Format, O>(x, rows, cols, {experts, given, seed});
  std::vector<float> grad(x.size(), 1.0f);
  ref::apply_ste<Q, quads::ste::clipped>(std::span<const float>(x), std::span<float>(grad), fq);
  const auto mask = ref::saturation_mask<Q>(x, fq);
  const auto layout = packed.scale_layout();
  mask_counts counts;
  for (int e = 0; e < experts; ++e)
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const std::size_t i = (static_cast<std::size_t>(e) * rows + r) * cols + c;
        const std::uint8_t byte = packed.scales[layout.offset(e, r, c / B)];
        const float m = multiplier_from_byte<Format>(byte, packed.scale_of(e, r));
        const float scaled = x[i] * m;
        const bool expect = !(std::fabs(scaled) <= 6.0f);
        const std::uint8_t code = (packed.data[i / 2] >> (4 * (i % 2))) & 0xfu;
        INFO("element " << i << " x=" << x[i] << " m=" << m << " code=" << int(code));
        REQUIRE((grad[i] == 0.0f) == expect);
        REQUIRE(mask[i] == (expect ? 1 : 0));
        if (expect && !std::isnan(x[i])) REQUIRE((code & 0x7u) == 0x7u);
        if (expect) ++counts.saturated;
        if (!expect && (code & 0x7u) == 0x7u) ++counts.rounded_to_six;
        if (!expect) REQUIRE(grad[i] == 1.0f);
      }
  return counts;
}

} // namespace

TEST_SUITE("policy.ste") {
  TEST_CASE("identity STE passes every gradient through bit for bit, Inf and NaN included") {
    auto g = quads_test::rng("policy.ste.identity");
    const std::vector<float> x = weights(g, 2, 8, 32, false);
    using Q = quads::block_quantizer<quads::nvfp4>;
    const auto fq = ref::fake_quant<Q>(x, 2, 8, 32);
    std::vector<float> grad = quads_test::normal_values(g, x.size());
    grad[3] = quads_test::flt_inf();
    grad[4] = quads_test::flt_nan();
    grad[5] = -0.0f;
    const std::vector<float> before = grad;
    ref::apply_ste<Q, quads::ste::identity>(std::span<const float>(x), std::span<float>(grad), fq);
    CHECK(diff(grad, before) == "");
  }

  TEST_CASE(
      "clipped STE: nvfp4 default masks exactly the elements pushed past 6 by E4M3 rounding") {
    auto g = quads_test::rng("policy.ste.nvfp4");
    const std::vector<float> x = weights(g, 3, 24, 64);
    const mask_counts c = check_clipped_mask<quads::nvfp4, o_default>(x, 3, 24, 64);
    MESSAGE("saturated " << c.saturated << ", rounded to 6 without saturating "
                         << c.rounded_to_six);
    CHECK(c.saturated > 0);
    CHECK(c.rounded_to_six > 0);
  }

  TEST_CASE(
      "clipped STE: a too-small given tensor scale saturates the block scale and masks more") {
    auto g = quads_test::rng("policy.ste.given");
    const std::vector<float> x = weights(g, 1, 32, 64);
    const float amax = ref::amax(x);
    // S_dec four times too small: block scales above 448 saturate, whole blocks clip.
    const quads::tensor_scale ts = quads::tensor_scale_from_decode(amax / (6.0f * 448.0f) / 4.0f);
    const mask_counts c =
        check_clipped_mask<quads::nvfp4, o_given>(x, 1, 32, 64, std::span(&ts, 1));
    MESSAGE("saturated " << c.saturated << " of " << x.size());
    CHECK(c.saturated > 8);
  }

  TEST_CASE("clipped STE: mxfp4 floor rule masks values in (6, 8] * 2^e, round-up never clips") {
    auto g = quads_test::rng("policy.ste.mx");
    const std::vector<float> x = weights(g, 2, 16, 96);
    const mask_counts floor = check_clipped_mask<quads::mxfp4, o_mx_floor>(x, 2, 16, 96);
    CHECK(floor.saturated > 0);
    const mask_counts up = check_clipped_mask<quads::mxfp4, o_default>(x, 2, 16, 96);
    CHECK(up.saturated == 0);
    const mask_counts floor_sr =
        check_clipped_mask<quads::mxfp4, o_mx_floor_sr>(x, 2, 16, 96, {}, 77);
    CHECK(floor_sr.saturated == floor.saturated); // saturation does not depend on the rounding
  }

  TEST_CASE("clipped STE: four_over_six uses the multiplier of the kept candidate") {
    auto g = quads_test::rng("policy.ste.46");
    const std::vector<float> x = weights(g, 2, 32, 64);
    const mask_counts c = check_clipped_mask<quads::nvfp4, o_four_six>(x, 2, 32, 64);
    CHECK(c.saturated > 0);
    check_clipped_mask<quads::nvfp4, o_four_six_sr>(x, 2, 32, 64, {},
                                                    quads_test::derived_seed("46"));
    // Some blocks keep the 4 candidate, so the multiplier choice is exercised.
    using Q = quads::block_quantizer<quads::nvfp4, o_four_six>;
    const auto fq = ref::fake_quant<Q>(x, 2, 32, 64);
    const auto m = ref::block_multipliers<Q>(x, fq);
    int kept4 = 0;
    for (std::size_t b = 0; b < m.size(); ++b) {
      float blk[16];
      for (int i = 0; i < 16; ++i)
        blk[i] = x[b * 16 + i];
      const int r = static_cast<int>(b / 4);
      const auto s6 = Q::scale_for(Q::amax(blk), fq.scale_of(r / 32, r % 32));
      if (m[b] != s6.multiplier) ++kept4;
    }
    MESSAGE("blocks that kept the 4 candidate: " << kept4 << " of " << m.size());
    CHECK(kept4 > 0);
  }

  TEST_CASE("clipped STE: per-row scales, stochastic rounding and adversarial blocks") {
    auto g = quads_test::rng("policy.ste.adv");
    std::vector<float> x = weights(g, 1, 8, 32, false);
    x[0] = quads_test::flt_inf();  // Inf saturates (masked)
    x[40] = quads_test::flt_nan(); // NaN: E2M1 maps it to +6; masked
    x[41] = -quads_test::flt_inf();
    for (int i = 64; i < 96; ++i)
      x[static_cast<std::size_t>(i)] = 0.0f; // zero blocks
    x[130] = quads_test::flt_max();
    check_clipped_mask<quads::nvfp4, o_per_row>(x, 1, 8, 32);
    check_clipped_mask<quads::nvfp4, o_stochastic>(x, 1, 8, 32, {}, 123);
    check_clipped_mask<quads::mxfp4, o_mx_floor>(x, 1, 8, 32);
    // With the real amax the tensor scale is finite; the Inf element itself is masked.
    using Q = quads::block_quantizer<quads::nvfp4, o_per_row>;
    const auto fq = ref::fake_quant<Q>(x, 1, 8, 32);
    const auto mask = ref::saturation_mask<Q>(x, fq);
    CHECK(mask[40] == 1);
  }

  TEST_CASE("clipped STE keeps the gradient of a block whose NVFP4 scale byte is 0") {
    // A block 1e-9 below the tensor amax gets scale byte 0: it encodes with multiplier FLT_MAX,
    // so its codes are ±6, but it dequantizes to zeros; nothing in it was clipped.
    std::vector<float> x(64, 1.0f);
    for (int i = 16; i < 32; ++i)
      x[static_cast<std::size_t>(i)] = (i % 2 ? 1e-9f : -3e-9f);
    using Q = quads::block_quantizer<quads::nvfp4>;
    const auto packed = ref::quantize<quads::nvfp4>(x, 1, 64);
    REQUIRE(packed.scales[1] == 0);
    REQUIRE((packed.data[8] & 0x7u) == 0x7u); // code ±6
    const auto fq = ref::fake_quant<Q>(x, 1, 1, 64);
    std::vector<float> grad(64, 1.0f);
    ref::apply_ste<Q, quads::ste::clipped>(std::span<const float>(x), std::span<float>(grad), fq);
    for (int i = 16; i < 32; ++i)
      CHECK(grad[static_cast<std::size_t>(i)] == 1.0f);
    check_clipped_mask<quads::nvfp4, o_default>(x, 1, 1, 64);
  }

  TEST_CASE("apply_ste gives +0 (not NaN) for a masked Inf or NaN gradient, and scales otherwise") {
    CHECK(quads_test::same_bits(
        quads::apply_ste<quads::ste::clipped>(quads_test::flt_inf(), 7.0f, 1.0f), 0.0f));
    CHECK(quads_test::same_bits(
        quads::apply_ste<quads::ste::clipped>(quads_test::flt_nan(), -7.0f, 1.0f), 0.0f));
    CHECK(quads::apply_ste<quads::ste::clipped>(2.5f, 6.0f, 1.0f) == 2.5f); // exactly 6: kept
    CHECK(quads::apply_ste<quads::ste::clipped>(2.5f, std::nextafter(6.0f, 7.0f), 1.0f) == 0.0f);
    CHECK(quads::apply_ste<quads::ste::clipped>(2.5, 3.0f, 2.0f) == 2.5); // 6: kept (double grad)
    CHECK(quads::apply_ste<quads::ste::clipped>(2.5, 3.0f, 2.5f) == 0.0); // 7.5: masked
  }
}
