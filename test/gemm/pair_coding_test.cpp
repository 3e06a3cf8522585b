// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host tests of pair-coded NVFP4 weights (quads/gemm/pair_coding.hpp): the coding is a
//!        bijection whose decoder yields exactly the plain loader's lane pairs, and the coded
//!        loader dequantizes every code x every scale byte exactly.
#include <doctest/doctest.h>

#include <quads/gemm/pair_coding.hpp>

#include <test_support/seed.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

namespace qg = quads::gemm;
namespace pc = quads::gemm::pair_coding;

TEST_SUITE("gemm.pair_coding") {

TEST_CASE("the decoder of a coded word equals unpack_word of the plain word (unit and random words)") {
  // The decoder and the coding are GF(2)-linear, so the 32 unit words prove it for all words;
  // random and structured words check the implementation, not the algebra.
  auto g = quads_test::rng("gemm.pair_coding.words");
  std::uniform_int_distribution<std::uint32_t> d;
  for (int it = 0; it < 200000; ++it) {
    std::uint32_t plain;
    if (it < 32) plain = std::uint32_t{1} << it;
    else if (it < 48) plain = 0x11111111u * static_cast<std::uint32_t>(it - 32);  // one code everywhere
    else if (it == 48) plain = 0xffffffffu;
    else plain = d(g);
    std::uint32_t want[4], got[4];
    qg::unpack_word<qg::fp16_lane>(plain, want);
    const std::uint32_t q = pc::encode_word(plain);
    pc::decode_word(q, got);
    INFO("plain word 0x" << std::hex << plain << " coded 0x" << q);
    for (int i = 0; i < 4; ++i) REQUIRE(got[i] == want[i]);
    REQUIRE(pc::decode_to_plain(q) == plain);
  }
}

TEST_CASE("every coded word is the code of exactly one plain word (bijection on a dense sample)") {
  // decode_to_plain(encode_word(x)) == x is checked above; here encode(decode(q)) == q for
  // arbitrary q, i.e. no coded word is unreachable or ambiguous.
  auto g = quads_test::rng("gemm.pair_coding.bijection");
  std::uniform_int_distribution<std::uint32_t> d;
  for (int it = 0; it < 200000; ++it) {
    const std::uint32_t q = it < 32 ? (std::uint32_t{1} << it) : d(g);
    REQUIRE(pc::encode_word(pc::decode_to_plain(q)) == q);
  }
}

TEST_CASE("the coded loader dequantizes every code x every UE4M3 byte exactly (fold 2^14)") {
  using L = qg::pair_coded_loader<qg::pair_coded<quads::nvfp4>>;
  CHECK(L::fold_log2 == 14);
  for (int byte = 0; byte <= 0x7e; ++byte) {
    const double s = quads::decode_ue4m3(static_cast<std::uint8_t>(byte));
    // the multiplier is the scale itself, exactly
    CHECK(static_cast<double>(qg::detail::lane_to_float<qg::fp16_lane>(
              L::multiplier(static_cast<std::uint8_t>(byte)))) == s);
    for (int code = 0; code < 16; ++code) {
      const float got = L::dequant_one(static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(byte));
      const double want = static_cast<double>(quads::decode_e2m1(static_cast<std::uint8_t>(code))) *
                          s * std::ldexp(1.0, -14);
      INFO("code " << code << " byte " << byte);
      REQUIRE(static_cast<double>(got) == want);  // includes the fp16 subnormals down to 2^-24
      CHECK(std::signbit(got) == std::signbit(quads::decode_e2m1(static_cast<std::uint8_t>(code))));
    }
  }
}

TEST_CASE("dequant_word of a coded word equals the per-code values of the plain word") {
  using L = qg::pair_coded_loader<qg::pair_coded<quads::nvfp4>>;
  auto g = quads_test::rng("gemm.pair_coding.dequant_word");
  std::uniform_int_distribution<std::uint32_t> d;
  std::uniform_int_distribution<int> sb(0, 0x7e);
  for (int it = 0; it < 20000; ++it) {
    const std::uint32_t plain = d(g);
    const auto byte = static_cast<std::uint8_t>(it < 127 ? it : sb(g));
    std::uint32_t out[4];
    L::dequant_word(pc::encode_word(plain), L::multiplier2(byte), out);
    for (int i = 0; i < 4; ++i) {
      const auto lo = static_cast<std::uint8_t>((plain >> (4 * i)) & 0xfu);
      const auto hi = static_cast<std::uint8_t>((plain >> (4 * (i + 4))) & 0xfu);
      REQUIRE(qg::detail::lane_to_float<qg::fp16_lane>(static_cast<std::uint16_t>(out[i] & 0xffffu)) ==
              L::dequant_one(lo, byte));
      REQUIRE(qg::detail::lane_to_float<qg::fp16_lane>(static_cast<std::uint16_t>(out[i] >> 16)) ==
              L::dequant_one(hi, byte));
    }
  }
}

TEST_CASE("encode_pair_coded / decode_pair_coded round-trip a buffer in place and check sizes") {
  auto g = quads_test::rng("gemm.pair_coding.buffer");
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<std::uint8_t> plain(4 * 1000 + 4);
  for (auto& b : plain) b = static_cast<std::uint8_t>(d(g));
  auto buf = plain;
  qg::encode_pair_coded(buf, buf);
  CHECK(buf != plain);
  for (std::size_t i = 0; i < plain.size(); i += 4) {  // word-local: word i depends on word i only
    std::uint32_t w = 0, c = 0;
    for (int j = 0; j < 4; ++j) {
      w |= static_cast<std::uint32_t>(plain[i + j]) << (8 * j);
      c |= static_cast<std::uint32_t>(buf[i + j]) << (8 * j);
    }
    REQUIRE(c == pc::encode_word(w));
  }
  qg::decode_pair_coded(buf, buf);
  CHECK(buf == plain);
  std::vector<std::uint8_t> odd(6), other(8);
  CHECK_THROWS_AS(qg::encode_pair_coded(odd, odd), std::invalid_argument);
  CHECK_THROWS_AS(qg::encode_pair_coded(plain, other), std::invalid_argument);
}

TEST_CASE("pair_coded keeps the base format's block size and scales; the loader trait selects it") {
  using F = qg::pair_coded<quads::nvfp4>;
  static_assert(quads::block_scaled_format<F>);
  static_assert(F::block_size == 16 && quads::is_two_level<F>);
  static_assert(std::is_same_v<qg::weight_loader_t<F, qg::fp16_lane>, qg::pair_coded_loader<F>>);
  static_assert(std::is_same_v<qg::weight_loader_t<quads::nvfp4, qg::bf16_lane>,
                               qg::fp4_loader<quads::nvfp4, qg::bf16_lane>>);
  static_assert(std::is_same_v<qg::value_format_t<F>, quads::nvfp4>);
  CHECK(qg::is_pair_coded<F>);
  CHECK_FALSE(qg::is_pair_coded<quads::nvfp4>);
}

} // TEST_SUITE
