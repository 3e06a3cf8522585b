// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Extension points: a user-written format and a user-written scale layout plug in; types
//! that miss a requirement are rejected by the concepts (positive twins of test/compile_fail).
#include <doctest/doctest.h>

#include "quant_helpers.hpp"

#include <quads/layout/scale_layouts.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/random_bits.hpp>
#include <quads/reference/tensor.hpp>
#include <quads/scheme/schemes.hpp>

#include <test_support/bits.hpp>
#include <test_support/generators.hpp>
#include <test_support/seed.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

using namespace quads_test;
namespace ref = quads::reference;

namespace user {

//! NVFP4 numerics with 32-value blocks: written by a user, not by quads.
struct nvfp4_b32 {
  using element_type = quads::e2m1x2_t;
  using scale_type = quads::ue4m3_t;
  static constexpr int block_size = 32;
  static constexpr bool has_tensor_scale = true;
  static constexpr float decode_scale(std::uint8_t b) noexcept { return quads::decode_ue4m3(b); }
};

//! Column-major scales: scale (r, c) at c * rows + r.
struct column_major_scales {
  int rows = 0;
  int cols = 0;
  constexpr std::size_t size() const noexcept { return static_cast<std::size_t>(rows) * cols; }
  constexpr std::size_t offset(int r, int c) const noexcept {
    return static_cast<std::size_t>(c) * rows + r;
  }
  constexpr quads::scale_coord coords(std::size_t off) const noexcept {
    return {static_cast<int>(off % rows), static_cast<int>(off / rows), off < size()};
  }
};

// Types missing one requirement each; the concept says no (compile_fail/ checks the messages).
struct no_block_size {
  using element_type = quads::e2m1x2_t;
  using scale_type = quads::ue4m3_t;
  static constexpr bool has_tensor_scale = true;
  static constexpr float decode_scale(std::uint8_t b) noexcept { return quads::decode_ue4m3(b); }
};
struct block_24 : nvfp4_b32 {
  static constexpr int block_size = 24;
};
struct wrong_scale_type : nvfp4_b32 {
  using scale_type = quads::e4m3_t;
};
struct inconsistent_tensor_scale : nvfp4_b32 {
  static constexpr bool has_tensor_scale = false;
};
struct wrong_element_type : nvfp4_b32 {
  using element_type = std::uint8_t;
};
struct no_coords {
  int rows = 0;
  int cols = 0;
  std::size_t size() const noexcept { return 0; }
  std::size_t offset(int, int) const noexcept { return 0; }
};

} // namespace user

static_assert(quads::block_scaled_format<user::nvfp4_b32>);
static_assert(quads::is_two_level<user::nvfp4_b32>);
static_assert(quads::check_block_scaled_format<user::nvfp4_b32>());
static_assert(!quads::block_scaled_format<user::no_block_size>);
static_assert(!quads::block_scaled_format<user::block_24>);
static_assert(!quads::block_scaled_format<user::wrong_scale_type>);
static_assert(!quads::block_scaled_format<user::inconsistent_tensor_scale>);
static_assert(!quads::block_scaled_format<user::wrong_element_type>);
static_assert(!quads::block_scaled_format<int>);
static_assert(quads::scale_layout<user::column_major_scales>);
static_assert(!quads::scale_layout<user::no_coords>);

TEST_SUITE("concepts") {
  TEST_CASE("a user format with 32-value NVFP4 blocks quantizes like two NVFP4 blocks sharing a scale") {
    using Q32 = quads::block_quantizer<user::nvfp4_b32>;
    using Q16 = quads::block_quantizer<quads::nvfp4>;
    auto g = rng("concepts.nvfp4_b32");
    for (int n = 0; n < 2000; ++n) {
      // both halves get the same amax, so each 16-half alone picks the 32-block's scale
      auto x = to_c<32>(random_block<32>(g));
      float a0 = 0.0f, a1 = 0.0f;
      for (int i = 0; i < 16; ++i) {
        a0 = std::fmax(a0, std::fabs(x.v[i]));
        a1 = std::fmax(a1, std::fabs(x.v[16 + i]));
      }
      if (!std::isfinite(a0) || !std::isfinite(a1)) continue;
      const float a = std::fmax(a0, a1);
      x.v[0] = a;
      x.v[16] = -a;
      const auto ts = quads::make_tensor_scale<user::nvfp4_b32>(a * 2.0f);
      REQUIRE(same_bits(ts.encode, quads::make_tensor_scale<quads::nvfp4>(a * 2.0f).encode));
      const auto q = Q32::quantize(x.v, ts);
      const auto& lo = reinterpret_cast<const float(&)[16]>(x.v[0]);
      const auto& hi = reinterpret_cast<const float(&)[16]>(x.v[16]);
      const auto q0 = Q16::quantize(lo, ts), q1 = Q16::quantize(hi, ts);
      REQUIRE(q.scale == q0.scale);
      REQUIRE(q.scale == q1.scale);
      for (int i = 0; i < 8; ++i) {
        REQUIRE(q.codes[i] == q0.codes[i]);
        REQUIRE(q.codes[8 + i] == q1.codes[i]);
      }
      float out[32];
      Q32::qdq(x.v, ts, out);
      float o0[16], o1[16];
      Q16::dequantize(q0, ts, o0);
      Q16::dequantize(q1, ts, o1);
      for (int i = 0; i < 16; ++i) {
        REQUIRE(same_bits(out[i], o0[i]));
        REQUIRE(same_bits(out[16 + i], o1[i]));
      }
    }
  }

  TEST_CASE("a user format runs through the reference, stochastic rounding included") {
    auto g = rng("concepts.reference");
    const auto x = normal_values(g, 8 * 96, 1.0f);
    const auto q = ref::quantize<user::nvfp4_b32>(x, 8, 96);
    CHECK(q.scales.size() == 8 * 3);
    const auto fq = ref::qdq<user::nvfp4_b32>(x, 8, 96);
    CHECK(mismatch_report(ref::dequantize<user::nvfp4_b32>(q), fq) == "");
    // 48 is a multiple of 16 but not of this format's 32
    const std::vector<float> y(2 * 48, 1.0f);
    try {
      (void)ref::quantize<user::nvfp4_b32>(y, 2, 48);
      FAIL("no exception for K = 48 with 32-value blocks");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("32") != std::string::npos);
    }
    constexpr quads::quant_options sr{.round = quads::rounding::stochastic};
    const auto b = quads::draw_block_bits<user::nvfp4_b32>(quads::philox4x32_10{3}, 5);
    CHECK(b.size() == 8);
    const auto s1 = ref::quantize<user::nvfp4_b32, sr>(x, 8, 96, {.seed = 11});
    const auto s2 = ref::quantize<user::nvfp4_b32, sr>(x, 8, 96, {.seed = 11});
    CHECK(s1.data == s2.data);
    CHECK(s1.scales == q.scales);
  }

  TEST_CASE("a user scale layout stores the same scales at its own offsets") {
    auto g = rng("concepts.layout");
    constexpr int E = 2, R = 5, C = 64;
    const auto x = normal_values(g, static_cast<std::size_t>(E) * R * C, 1.0f);
    const auto lin = ref::quantize<quads::nvfp4, opt_default, quads::linear_scales>(x, R, C, {.experts = E});
    const auto col = ref::quantize<quads::nvfp4, opt_default, user::column_major_scales>(x, R, C, {.experts = E});
    CHECK(lin.data == col.data);
    REQUIRE(col.scales.size() == lin.scales.size());
    const auto lb = lin.scale_layout();
    const auto cb = col.scale_layout();
    for (int e = 0; e < E; ++e)
      for (int r = 0; r < R; ++r)
        for (int kb = 0; kb < C / 16; ++kb) {
          REQUIRE(cb.offset(e, r, kb) == static_cast<std::size_t>(e) * R * (C / 16) + kb * R + r);
          REQUIRE(col.scales[cb.offset(e, r, kb)] == lin.scales[lb.offset(e, r, kb)]);
        }
    CHECK(mismatch_report(ref::dequantize<quads::nvfp4>(lin), ref::dequantize<quads::nvfp4>(col)) == "");
  }
}
