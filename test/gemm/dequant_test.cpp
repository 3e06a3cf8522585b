// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host tests of the operand loaders: the E2M1-in-lane + one-multiply dequantization is
//!        exact for every code and every scale byte, for bf16 and fp16 lanes, NVFP4 and MXFP4.
#include <doctest/doctest.h>

#include <quads/gemm/dequant.hpp>

#include <test_support/seed.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

namespace qg = quads::gemm;

namespace {

template <class Lane>
float lane_float(std::uint16_t b) {
  return qg::detail::lane_to_float<Lane>(b);
}

//! The expected dequantized value times 2^-c, computed in double (exact).
double expected(std::uint8_t code, double scale, int c) {
  return static_cast<double>(quads::decode_e2m1(code)) * scale * std::ldexp(1.0, -c);
}

template <class Lane>
void check_nvfp4_all() {
  using L = qg::fp4_loader<quads::nvfp4, Lane>;
  CHECK(L::fold_log2 == 7);
  int checked = 0;
  for (int byte = 0; byte <= 0x7e; ++byte) {  // every finite UE4M3 scale, zero included
    const double s = quads::decode_ue4m3(static_cast<std::uint8_t>(byte));
    const std::uint16_t m = L::multiplier(static_cast<std::uint8_t>(byte));
    // the multiplier is exactly s * 2^(bias - 1 - c)
    CHECK(static_cast<double>(lane_float<Lane>(m)) ==
          s * std::ldexp(1.0, Lane::exponent_bias - 1 - L::fold_log2));
    for (int code = 0; code < 16; ++code) {
      const double want = expected(static_cast<std::uint8_t>(code), s, L::fold_log2);
      // the lane holds e2m1 * 2^-(bias - 1) exactly
      const std::uint16_t lane = qg::e2m1_lane<Lane>(static_cast<std::uint8_t>(code));
      REQUIRE(static_cast<double>(lane_float<Lane>(lane)) ==
              static_cast<double>(quads::decode_e2m1(static_cast<std::uint8_t>(code))) *
                  std::ldexp(1.0, -(Lane::exponent_bias - 1)));
      // the exact product is representable in the lane type, so mul.rn returns it
      const float got = L::dequant_one(static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(byte));
      INFO("code " << code << " byte " << byte);
      REQUIRE(static_cast<double>(got) == want);
      CHECK(std::signbit(got) == std::signbit(quads::decode_e2m1(static_cast<std::uint8_t>(code))));
      // and its 16-bit pattern equals the correctly rounded (here: exact) conversion
      const std::uint16_t exact_bits = qg::detail::float_to_lane<Lane>(static_cast<float>(want));
      CHECK(static_cast<double>(lane_float<Lane>(exact_bits)) == want);
      // after the alpha fold (x 2^c) it is decode_e2m1(code) * decode_ue4m3(byte) in fp32
      CHECK(std::ldexp(got, L::fold_log2) ==
            quads::decode_e2m1(static_cast<std::uint8_t>(code)) *
                quads::decode_ue4m3(static_cast<std::uint8_t>(byte)));
      ++checked;
    }
  }
  CHECK(checked == 127 * 16);
}

} // namespace

TEST_SUITE("gemm.dequant") {

TEST_CASE("every E2M1 code times every UE4M3 scale dequantizes exactly to bf16") {
  check_nvfp4_all<qg::bf16_lane>();
}

TEST_CASE("every E2M1 code times every UE4M3 scale dequantizes exactly to fp16") {
  check_nvfp4_all<qg::fp16_lane>();
}

TEST_CASE("MXFP4 scales in the documented byte range dequantize exactly to bf16") {
  using L = qg::fp4_loader<quads::mxfp4, qg::bf16_lane>;
  CHECK(L::mx_min_byte == 11);
  CHECK(L::mx_max_byte == 144);
  for (int byte = 0; byte <= 254; ++byte) {
    const bool in = L::byte_in_range(static_cast<std::uint8_t>(byte));
    CHECK(in == (byte >= L::mx_min_byte && byte <= L::mx_max_byte));
    if (!in) continue;
    const double s = quads::decode_ue8m0(static_cast<std::uint8_t>(byte));
    for (int code = 0; code < 16; ++code) {
      INFO("code " << code << " byte " << byte);
      const float got = L::dequant_one(static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(byte));
      REQUIRE(static_cast<double>(got) == expected(static_cast<std::uint8_t>(code), s, L::fold_log2));
    }
  }
}

TEST_CASE("MXFP4 bytes just outside the range are not exact (the range is tight)") {
  using L = qg::fp4_loader<quads::mxfp4, qg::bf16_lane>;
  // below: 0.5 * 2^(b - 127 - c) falls under the smallest bf16 subnormal
  const auto lo = static_cast<std::uint8_t>(L::mx_min_byte - 1);
  CHECK(static_cast<double>(L::dequant_one(1, lo)) != expected(1, quads::decode_ue8m0(lo), L::fold_log2));
  // above: the multiplier itself is no longer a finite bf16
  const auto hi = static_cast<std::uint8_t>(L::mx_max_byte + 1);
  CHECK(static_cast<double>(L::dequant_one(2, hi)) != expected(2, quads::decode_ue8m0(hi), L::fold_log2));
}

TEST_CASE("unpack_word pairs codes (i, i + 4) and matches the per-code lanes for random words") {
  auto g = quads_test::rng("gemm.dequant.words");
  std::uniform_int_distribution<std::uint32_t> d;
  for (int it = 0; it < 20000; ++it) {
    const std::uint32_t q = it < 16 ? 0x11111111u * static_cast<std::uint32_t>(it) : d(g);
    std::uint32_t pb[4], pf[4];
    qg::unpack_word<qg::bf16_lane>(q, pb);
    qg::unpack_word<qg::fp16_lane>(q, pf);
    for (int i = 0; i < 4; ++i) {
      const auto lo = static_cast<std::uint8_t>((q >> (4 * i)) & 0xfu);
      const auto hi = static_cast<std::uint8_t>((q >> (4 * (i + 4))) & 0xfu);
      REQUIRE(pb[i] == (qg::e2m1_lane<qg::bf16_lane>(lo) |
                        (static_cast<std::uint32_t>(qg::e2m1_lane<qg::bf16_lane>(hi)) << 16)));
      REQUIRE(pf[i] == (qg::e2m1_lane<qg::fp16_lane>(lo) |
                        (static_cast<std::uint32_t>(qg::e2m1_lane<qg::fp16_lane>(hi)) << 16)));
    }
  }
}

TEST_CASE("dequant_word multiplies both lanes of every pair by the block multiplier") {
  using L = qg::fp4_loader<quads::nvfp4, qg::bf16_lane>;
  auto g = quads_test::rng("gemm.dequant.dequant_word");
  std::uniform_int_distribution<std::uint32_t> d;
  std::uniform_int_distribution<int> sb(0, 0x7e);
  for (int it = 0; it < 5000; ++it) {
    const std::uint32_t q = d(g);
    const auto byte = static_cast<std::uint8_t>(sb(g));
    std::uint32_t out[4];
    L::dequant_word(q, L::multiplier2(byte), out);
    for (int i = 0; i < 4; ++i) {
      const auto lo = static_cast<std::uint8_t>((q >> (4 * i)) & 0xfu);
      const auto hi = static_cast<std::uint8_t>((q >> (4 * (i + 4))) & 0xfu);
      REQUIRE(lane_float<qg::bf16_lane>(static_cast<std::uint16_t>(out[i] & 0xffffu)) ==
              L::dequant_one(lo, byte));
      REQUIRE(lane_float<qg::bf16_lane>(static_cast<std::uint16_t>(out[i] >> 16)) ==
              L::dequant_one(hi, byte));
    }
  }
}

TEST_CASE("pair_octet_words pairs 16-bit activations like unpack_word pairs codes") {
  std::uint16_t x[8];
  for (int i = 0; i < 8; ++i) x[i] = static_cast<std::uint16_t>(0x1000 + i);
  const std::uint32_t w[4] = {x[0] | (std::uint32_t{x[1]} << 16), x[2] | (std::uint32_t{x[3]} << 16),
                              x[4] | (std::uint32_t{x[5]} << 16), x[6] | (std::uint32_t{x[7]} << 16)};
  std::uint32_t a[4], b[4];
  qg::pair_octet(x, a);
  qg::pair_octet_words(w, b);
  for (int i = 0; i < 4; ++i) {
    CHECK(a[i] == b[i]);
    CHECK((a[i] & 0xffffu) == x[i]);
    CHECK((a[i] >> 16) == x[i + 4]);
  }
}

TEST_CASE("16-bit conversions round to nearest even, keep subnormals and saturate to Inf") {
  using quads::detail::float_to_bf16_bits;
  using quads::detail::float_to_fp16_bits;
  using quads::detail::fp16_bits_to_float;
  // every binary16 value converts back to itself
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) continue;  // NaN
    const float f = fp16_bits_to_float(static_cast<std::uint16_t>(h));
    REQUIRE(float_to_fp16_bits(f) == h);
  }
  // ties to even between neighbours, in the normal and the subnormal range
  CHECK(float_to_fp16_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00u);
  CHECK(float_to_fp16_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02u);
  CHECK(float_to_fp16_bits(std::ldexp(1.0f, -25)) == 0x0000u);
  CHECK(float_to_fp16_bits(std::ldexp(1.5f, -25)) == 0x0001u);
  CHECK(float_to_fp16_bits(3 * std::ldexp(1.0f, -25)) == 0x0002u);
  CHECK(float_to_fp16_bits(65520.0f) == 0x7c00u);
  CHECK(float_to_fp16_bits(65519.0f) == 0x7bffu);
  CHECK(float_to_fp16_bits(-0.0f) == 0x8000u);
  CHECK(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3f80u);
  CHECK(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82u);
  CHECK(float_to_bf16_bits(std::nanf("")) == 0x7fffu);
  // random fp32 values against a double-based rounding of the exact value
  auto g = quads_test::rng("gemm.dequant.fp16");
  std::uniform_int_distribution<std::uint32_t> d;
  for (int it = 0; it < 200000; ++it) {
    const float f = std::bit_cast<float>(d(g) & 0xbfffffffu);  // exponents up to 2^1 or tiny
    const float t = std::ldexp(f, -std::ilogb(f) + (it % 40) - 25);
    if (!std::isfinite(t)) continue;
    const std::uint16_t h = float_to_fp16_bits(t);
    const double back = fp16_bits_to_float(h);
    // no other binary16 is closer
    const double up = fp16_bits_to_float(static_cast<std::uint16_t>(h + 1));
    const double down = (h & 0x7fffu) ? fp16_bits_to_float(static_cast<std::uint16_t>(h - 1)) : back;
    if (std::isfinite(back) && (h & 0x7c00u) != 0x7c00u) {
      REQUIRE(std::fabs(back - t) <= std::fabs(up - t));
      REQUIRE(std::fabs(back - t) <= std::fabs(down - t));
    }
  }
}

} // TEST_SUITE
