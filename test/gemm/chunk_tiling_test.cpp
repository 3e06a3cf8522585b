// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host tests of chunk-tiled NVFP4 weights (quads/gemm/chunk_tiling.hpp): the tiled byte
//!        of every position is the row-major byte the decode kernel's lane reads (checked against
//!        an independent walk over lanes, rows and chunks), tiling is a bijection (untile inverts
//!        it), experts tile one by one, and bad shapes / sizes are refused.
#include <doctest/doctest.h>

#include <quads/gemm/chunk_tiling.hpp>

#include <test_support/seed.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace qg = quads::gemm;

namespace {

std::vector<std::uint8_t> random_bytes(std::mt19937_64& g, std::size_t n) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(d(g));
  return v;
}

} // namespace

TEST_SUITE("gemm.chunk_tiling") {

TEST_CASE("a tile holds, lane by lane, the 16-byte pieces of rows g and g + 8 and the rows' 8 scale bytes") {
  auto g = quads_test::rng("gemm.chunk_tiling.layout");
  for (const auto [E, N, K] : {std::array{1, 16, 128}, std::array{1, 48, 384}, std::array{3, 32, 256}}) {
    const std::size_t cb = static_cast<std::size_t>(N) * K / 2, sb = static_cast<std::size_t>(N) * K / 16;
    const auto codes = random_bytes(g, cb * E), scales = random_bytes(g, sb * E);
    std::vector<std::uint8_t> tc(codes.size()), ts(scales.size());
    qg::tile_chunks(codes, scales, tc, ts, N, K, E);
    // Independent walk: for each expert, row group, chunk, lane, half, byte.
    const int C = K / 128;
    for (int e = 0; e < E; ++e)
      for (int G = 0; G < N / 16; ++G)
        for (int c = 0; c < C; ++c) {
          const std::size_t tile = static_cast<std::size_t>(G) * C + c;
          for (int lane = 0; lane < 32; ++lane)
            for (int h = 0; h < 2; ++h)
              for (int b = 0; b < 16; ++b) {
                const int row = 16 * G + lane / 4 + 8 * h;
                const std::size_t want = cb * e + static_cast<std::size_t>(row) * (K / 2) + 64 * c +
                                         16 * (lane % 4) + b;
                const std::size_t at = cb * e + 1024 * tile + 32 * lane + 16 * h + b;
                REQUIRE(tc[at] == codes[want]);
              }
          for (int r = 0; r < 16; ++r)
            for (int j = 0; j < 8; ++j) {
              const std::size_t want = sb * e + static_cast<std::size_t>(16 * G + r) * (K / 16) + 8 * c + j;
              REQUIRE(ts[sb * e + 128 * tile + 8 * r + j] == scales[want]);
            }
        }
  }
}

TEST_CASE("untile_chunks inverts tile_chunks on random bytes") {
  auto g = quads_test::rng("gemm.chunk_tiling.roundtrip");
  for (const auto [E, N, K] : {std::array{1, 64, 1024}, std::array{2, 208, 640}}) {
    const std::size_t cb = static_cast<std::size_t>(N) * K / 2 * E, sb = static_cast<std::size_t>(N) * K / 16 * E;
    const auto codes = random_bytes(g, cb), scales = random_bytes(g, sb);
    std::vector<std::uint8_t> tc(cb), ts(sb), bc(cb), bs(sb);
    qg::tile_chunks(codes, scales, tc, ts, N, K, E);
    CHECK(tc != codes);  // a real permutation (random bytes: equal only by accident)
    qg::untile_chunks(tc, ts, bc, bs, N, K, E);
    CHECK(bc == codes);
    CHECK(bs == scales);
  }
}

TEST_CASE("tile_chunks refuses shapes it does not cover, wrong sizes and aliasing") {
  std::vector<std::uint8_t> c(16 * 128 / 2), s(16 * 128 / 16), tc(c.size()), ts(s.size());
  CHECK_NOTHROW(qg::tile_chunks(c, s, tc, ts, 16, 128));
  CHECK_THROWS_AS(qg::tile_chunks(c, s, tc, ts, 8, 256), std::invalid_argument);   // N % 16
  CHECK_THROWS_AS(qg::tile_chunks(c, s, tc, ts, 32, 64), std::invalid_argument);   // K % 128
  CHECK_THROWS_AS(qg::tile_chunks(c, s, tc, ts, 16, 128, 2), std::invalid_argument);  // sizes
  CHECK_THROWS_AS(qg::tile_chunks(c, s, c, ts, 16, 128), std::invalid_argument);   // in place
  CHECK(qg::chunk_tiling::check_shape(1, 48, 128) == nullptr);
  CHECK(qg::chunk_tiling::check_shape(0, 48, 128) != nullptr);
  static_assert(qg::is_chunk_tiled<qg::chunk_tiled<quads::nvfp4>>);
  static_assert(!qg::is_chunk_tiled<quads::nvfp4>);
  static_assert(std::is_same_v<qg::value_format_t<qg::chunk_tiled<qg::pair_coded<quads::nvfp4>>>,
                               quads::nvfp4>);
  static_assert(std::is_same_v<qg::weight_loader_t<qg::chunk_tiled<qg::pair_coded<quads::nvfp4>>, qg::fp16_lane>,
                               qg::weight_loader_t<qg::pair_coded<quads::nvfp4>, qg::fp16_lane>>);
}

}
