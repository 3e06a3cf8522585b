// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Scale layouts: worked examples, exhaustive offset/coords round trips, padding, batching.
#include <doctest/doctest.h>

#include <quads/layout/scale_layouts.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

struct shape {
  int rows;
  int cols;
};

// Rows on and off multiples of 128 (and 32), scale columns on and off multiples of 4.
constexpr shape shapes[] = {{128, 8}, {1, 1},  {5, 3},   {32, 4},  {127, 5},
                            {128, 4}, {130, 7}, {257, 13}, {300, 4}, {64, 1}};

// The swizzled order built from the prose description (formats.md §3.3), not from the formula:
// pad to [Rp, Cp]; tiles of 128 x 4, K-tile fastest within an M-tile; inside a tile row
// r = 32 i + j is stored in [j][i][k] order. Returns pos[r * Cp + c] = byte offset.
std::vector<std::size_t> swizzle_by_construction(int rows, int cols) {
  const int rp = (rows + 127) / 128 * 128, cp = (cols + 3) / 4 * 4;
  std::vector<std::size_t> pos(static_cast<std::size_t>(rp) * cp);
  std::size_t next = 0;
  for (int rb = 0; rb < rp / 128; ++rb)
    for (int cb = 0; cb < cp / 4; ++cb)
      for (int j = 0; j < 32; ++j)
        for (int i = 0; i < 4; ++i)
          for (int k = 0; k < 4; ++k)
            pos[static_cast<std::size_t>(rb * 128 + i * 32 + j) * cp + cb * 4 + k] = next++;
  return pos;
}

template <class Layout>
void check_round_trip(const Layout& l, int rows, int cols) {
  // offsets -> coords -> offsets, for every byte including padding
  std::size_t valid = 0;
  for (std::size_t off = 0; off < l.size(); ++off) {
    const quads::scale_coord c = l.coords(off);
    if (!c.valid) continue;
    ++valid;
    REQUIRE(c.row >= 0);
    REQUIRE(c.row < rows);
    REQUIRE(c.col >= 0);
    REQUIRE(c.col < cols);
    REQUIRE(l.offset(c.row, c.col) == off);
  }
  CHECK(valid == static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  // coords -> offsets -> coords, and injectivity: together a bijection of the valid coordinates
  // onto the valid offsets inside [0, size)
  std::vector<unsigned char> seen(l.size(), 0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const std::size_t off = l.offset(r, c);
      REQUIRE(off < l.size());
      REQUIRE(seen[off] == 0);
      seen[off] = 1;
      const quads::scale_coord back = l.coords(off);
      REQUIRE(back.valid);
      REQUIRE(back.row == r);
      REQUIRE(back.col == c);
    }
}

} // namespace

TEST_SUITE("layout.swizzled_128x4") {
  TEST_CASE("the worked examples of nvmath give offsets 82 and 593 for M = K = 128") {
    const quads::swizzled_128x4 l{128, 128 / 16};  // NVFP4: 8 scale columns
    CHECK(l.offset(5, 2) == 82);
    CHECK(l.offset(5, 5) == 593);
    CHECK(l.size() == 1024);
    const quads::scale_coord c = l.coords(593);
    CHECK(c.row == 5);
    CHECK(c.col == 5);
    CHECK(c.valid);
  }

  TEST_CASE("offsets equal the order built tile by tile from the layout's description") {
    for (const shape s : shapes) {
      CAPTURE(s.rows);
      CAPTURE(s.cols);
      const quads::swizzled_128x4 l{s.rows, s.cols};
      const std::vector<std::size_t> pos = swizzle_by_construction(s.rows, s.cols);
      const int cp = (s.cols + 3) / 4 * 4;
      for (int r = 0; r < s.rows; ++r)
        for (int c = 0; c < s.cols; ++c)
          REQUIRE(l.offset(r, c) == pos[static_cast<std::size_t>(r) * cp + c]);
    }
  }

  TEST_CASE("size counts whole padded 128 x 4 tiles of 512 bytes") {
    for (const shape s : shapes) {
      CAPTURE(s.rows);
      CAPTURE(s.cols);
      const quads::swizzled_128x4 l{s.rows, s.cols};
      const std::size_t tiles =
          static_cast<std::size_t>((s.rows + 127) / 128) * static_cast<std::size_t>((s.cols + 3) / 4);
      CHECK(l.size() == tiles * 512);
      CHECK(l.row_tiles() == (s.rows + 127) / 128);
      CHECK(l.col_tiles() == (s.cols + 3) / 4);
    }
  }

  TEST_CASE("every byte round-trips through coords and padding bytes are not valid") {
    for (const shape s : shapes) {
      CAPTURE(s.rows);
      CAPTURE(s.cols);
      check_round_trip(quads::swizzled_128x4{s.rows, s.cols}, s.rows, s.cols);
    }
  }

  TEST_CASE("padding rows and padding columns are reported invalid") {
    const quads::swizzled_128x4 l{130, 7};
    // row 129 (inside the second row tile) and column 7 (inside the second column tile) exist
    // in the padded tile but not in the matrix
    const auto pad_row = l.coords(l.offset(129, 0) + 4 * 1);  // row 161 of the padded tile
    CHECK_FALSE(pad_row.valid);
    CHECK(pad_row.row >= 130);
    const auto pad_col = l.coords(l.offset(0, 6) + 1);  // column 7
    CHECK_FALSE(pad_col.valid);
    CHECK(pad_col.col == 7);
    CHECK_FALSE(l.coords(l.size()).valid);
  }
}

TEST_SUITE("layout.linear_scales") {
  TEST_CASE("linear scales are row-major without padding") {
    for (const shape s : shapes) {
      CAPTURE(s.rows);
      CAPTURE(s.cols);
      const quads::linear_scales l{s.rows, s.cols};
      CHECK(l.size() == static_cast<std::size_t>(s.rows) * s.cols);
      for (int r = 0; r < s.rows; ++r)
        for (int c = 0; c < s.cols; ++c)
          REQUIRE(l.offset(r, c) == static_cast<std::size_t>(r) * s.cols + c);
      check_round_trip(l, s.rows, s.cols);
      CHECK_FALSE(l.coords(l.size()).valid);
    }
  }
}

TEST_SUITE("layout.batched") {
  TEST_CASE("batched layouts place batch b at b times the layout size") {
    const quads::batched<quads::swizzled_128x4> bl{3, {130, 7}};
    const std::size_t one = quads::swizzled_128x4{130, 7}.size();
    CHECK(bl.size() == 3 * one);
    std::vector<unsigned char> seen(bl.size(), 0);
    for (int b = 0; b < 3; ++b)
      for (int r = 0; r < 130; ++r)
        for (int c = 0; c < 7; ++c) {
          const std::size_t off = bl.offset(b, r, c);
          REQUIRE(off == b * one + bl.layout.offset(r, c));
          REQUIRE(bl.batch_of(off) == b);
          const quads::scale_coord back = bl.layout.coords(off % bl.layout.size());
          REQUIRE(back.valid);
          REQUIRE(back.row == r);
          REQUIRE(back.col == c);
          REQUIRE(seen[off] == 0);
          seen[off] = 1;
        }
    const quads::batched<quads::linear_scales> lin{4, {3, 5}};
    CHECK(lin.size() == 60);
    CHECK(lin.offset(2, 1, 4) == 2 * 15 + 1 * 5 + 4);
    CHECK(lin.batch_of(59) == 3);
    CHECK(lin.batch_of(15) == 1);
    CHECK(lin.batch_of(14) == 0);
  }
}

TEST_SUITE("layout.packed_offset") {
  TEST_CASE("packed FP4 data puts two consecutive K elements in one byte") {
    for (const int K : {2, 16, 32, 4096})
      for (const int row : {0, 1, 7})
        for (int k = 0; k < K; ++k) {
          REQUIRE(quads::packed_offset(row, k, K) ==
                  static_cast<std::size_t>(row) * (K / 2) + static_cast<std::size_t>(k / 2));
        }
    CHECK(quads::packed_offset(3, 5, 16) == 3 * 8 + 2);
  }
}

TEST_SUITE("layout.concept") {
  TEST_CASE("the built-in layouts model scale_layout") {
    static_assert(quads::scale_layout<quads::linear_scales>);
    static_assert(quads::scale_layout<quads::swizzled_128x4>);
    static_assert(!quads::scale_layout<int>);
    CHECK(true);
  }
}
