// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief RAC channel selection: the count rule, the selectors, ties, NaN, the permutations.

#include <doctest/doctest.h>

#include <quads/compensation/selection.hpp>

#include <test_support/seed.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

namespace qc = quads::compensation;

namespace {

qc::channel_statistics random_stats(int K, std::mt19937_64& g) {
  qc::channel_statistics st(K);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int k = 0; k < K; ++k) {
    st.sq_error[static_cast<std::size_t>(k)] = u(g);
    st.max_abs[static_cast<std::size_t>(k)] = u(g);
  }
  st.tokens = 1;
  return st;
}

//! A user selector: prefers high channel indices (plugs into select_channels).
struct last_channels {
  static constexpr const char* name = "last";
  std::vector<double> channel_scores(const qc::channel_statistics& st) const {
    std::vector<double> s(static_cast<std::size_t>(st.channels()));
    for (std::size_t k = 0; k < s.size(); ++k)
      s[k] = static_cast<double>(k);
    return s;
  }
  double block_score(std::span<const double> s) const { return s.back(); }
};
static_assert(qc::channel_selector<last_channels>);
struct not_a_selector {
  std::vector<double> channel_scores(const qc::channel_statistics&) const { return {}; }
};
static_assert(!qc::channel_selector<not_a_selector>);
static_assert(!qc::channel_selector<int>);
struct wrong_count {
  static constexpr const char* name = "wrong";
  std::vector<double> channel_scores(const qc::channel_statistics&) const { return {1.0}; }
  double block_score(std::span<const double>) const { return 0; }
};

} // namespace

TEST_SUITE("compensation.selection") {

  TEST_CASE("the selected count rounds ratio times K to the nearest whole block") {
    CHECK(qc::selected_count(0.0, 4096) == 0);
    CHECK(qc::selected_count(0.125, 4096) == 512);
    CHECK(qc::selected_count(0.25, 4096) == 1024);
    CHECK(qc::selected_count(0.5, 4096) == 2048);
    CHECK(qc::selected_count(1.0, 4096) == 4096);
    CHECK(qc::selected_count(1e-9, 4096) == 16);  // at least one block when ratio > 0
    CHECK(qc::selected_count(0.1, 160) == 16);    // 16 / 16 = 1 block
    CHECK(qc::selected_count(0.15, 160) == 32);   // 1.5 blocks rounds half away from zero: 2
    CHECK(qc::selected_count(0.14, 160) == 16);   // 1.4 blocks: 1
    CHECK(qc::selected_count(0.99, 48) == 48);    // at most K
    CHECK(qc::selected_count(0.5, 64, 32) == 32); // MXFP4 blocks
    CHECK_THROWS_AS((void)qc::selected_count(0.5, 100), std::invalid_argument);
    CHECK_THROWS_AS((void)qc::selected_count(-0.1, 64), std::invalid_argument);
    CHECK_THROWS_AS((void)qc::selected_count(1.5, 64), std::invalid_argument);
    CHECK_THROWS_AS((void)qc::selected_count(std::nan(""), 64), std::invalid_argument);
  }

  TEST_CASE("every permutation mode keeps S a union of whole blocks and the order a permutation") {
    auto g = quads_test::rng("selection.modes");
    for (int trial = 0; trial < 20; ++trial) {
      const int K = 16 * std::uniform_int_distribution<int>(1, 64)(g);
      const auto st = random_stats(K, g);
      const double ratio = std::uniform_real_distribution<double>(0.0, 1.0)(g);
      for (auto p :
           {qc::permutation::none, qc::permutation::selected_to_end, qc::permutation::sorted}) {
        const auto sel = qc::select_channels(qc::by_quant_error{}, st, ratio, p);
        CAPTURE(K);
        CAPTURE(ratio);
        CAPTURE(qc::to_string(p));
        REQUIRE_NOTHROW(sel.validate());
        CHECK(sel.selected == qc::selected_count(ratio, K));
        CHECK(sel.augmented_channels() == K + sel.selected);
        const auto chans = sel.selected_channels();
        CHECK(std::set<int>(chans.begin(), chans.end()).size() == chans.size());
        if (p != qc::permutation::none) {
          // S = the top |S| channels by score, at the end of the permuted axis.
          std::vector<double> sc = st.sq_error;
          std::vector<double> top;
          for (int c : chans)
            top.push_back(sc[static_cast<std::size_t>(c)]);
          const double lowest_selected = *std::min_element(top.begin(), top.end());
          for (int k = 0; k < K - sel.selected; ++k)
            CHECK(sc[static_cast<std::size_t>(sel.order[static_cast<std::size_t>(k)])] <=
                  lowest_selected);
          for (int j = 0; j < sel.selected_blocks(); ++j)
            CHECK(sel.blocks[static_cast<std::size_t>(j)] == K / 16 - sel.selected_blocks() + j);
        }
      }
    }
  }

  TEST_CASE("selected_to_end keeps both parts in their original order; sorted ascends by score") {
    auto g = quads_test::rng("selection.orders");
    const int K = 256;
    const auto st = random_stats(K, g);
    const auto a =
        qc::select_channels(qc::by_max_abs{}, st, 0.25, qc::permutation::selected_to_end);
    CHECK(std::is_sorted(a.order.begin(), a.order.end() - a.selected));
    CHECK(std::is_sorted(a.order.end() - a.selected, a.order.end()));
    const auto b = qc::select_channels(qc::by_max_abs{}, st, 0.25, qc::permutation::sorted);
    for (int k = 1; k < K; ++k)
      CHECK(st.max_abs[static_cast<std::size_t>(b.order[static_cast<std::size_t>(k - 1)])] <=
            st.max_abs[static_cast<std::size_t>(b.order[static_cast<std::size_t>(k)])]);
    // Same channel set either way.
    auto sa = a.selected_channels(), sb = b.selected_channels();
    std::sort(sa.begin(), sa.end());
    std::sort(sb.begin(), sb.end());
    CHECK(sa == sb);
  }

  TEST_CASE("without permutation the blocks with the highest folded scores are chosen") {
    qc::channel_statistics st(64); // 4 blocks
    // block sums of squared error: 1, 10, 5, 10 (tie between blocks 1 and 3)
    st.sq_error[0] = 1;
    st.sq_error[16] = 4;
    st.sq_error[17] = 6;
    st.sq_error[32] = 5;
    st.sq_error[63] = 10;
    // max_abs: block 2 has the largest single channel
    st.max_abs[5] = 3;
    st.max_abs[40] = 9;
    st.max_abs[50] = 2;
    auto sel = qc::select_channels(qc::by_quant_error{}, st, 0.25);
    CHECK(sel.blocks == std::vector<int>{1}); // tie 1 vs 3 -> lower index
    sel = qc::select_channels(qc::by_quant_error{}, st, 0.5);
    CHECK(sel.blocks == std::vector<int>{1, 3});
    sel = qc::select_channels(qc::by_max_abs{}, st, 0.25);
    CHECK(sel.blocks == std::vector<int>{2});
    sel = qc::select_channels(qc::by_quant_error{}, st, 1.0);
    CHECK(sel.blocks == std::vector<int>{0, 1, 2, 3});
    CHECK(sel.slot_table() == std::vector<int>{0, 1, 2, 3});
  }

  TEST_CASE("ties rank the lower channel first and NaN ranks as the largest score") {
    qc::channel_statistics st(32);
    st.sq_error[20] = std::numeric_limits<double>::quiet_NaN();
    st.sq_error[3] = 1.0;
    st.sq_error[30] = 1.0;
    const auto sel =
        qc::select_channels(qc::by_quant_error{}, st, 0.5, qc::permutation::selected_to_end);
    // top 16: NaN channel 20, then 3 and 30 (score 1), then the zero-score channels 0,1,2,4,...
    auto chans = sel.selected_channels();
    std::sort(chans.begin(), chans.end());
    std::vector<int> want = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 20, 30};
    want.insert(want.begin() + 13, 13);
    CHECK(chans == want);
  }

  TEST_CASE("larger ratios select supersets with the error and max selectors") {
    auto g = quads_test::rng("selection.nested");
    const auto st = random_stats(512, g);
    for (auto p : {qc::permutation::none, qc::permutation::sorted}) {
      std::set<int> prev;
      for (double ratio : {0.125, 0.25, 0.5, 1.0}) {
        const auto sel = qc::select_channels(qc::by_quant_error{}, st, ratio, p);
        const auto c = sel.selected_channels();
        const std::set<int> now(c.begin(), c.end());
        CHECK(std::includes(now.begin(), now.end(), prev.begin(), prev.end()));
        prev = now;
      }
    }
  }

  TEST_CASE("the random selector is reproducible from its seed and a user selector plugs in") {
    qc::channel_statistics st(128);
    const auto a = qc::select_channels(qc::random_channels{42}, st, 0.5);
    const auto b = qc::select_channels(qc::random_channels{42}, st, 0.5);
    const auto c = qc::select_channels(qc::random_channels{43}, st, 0.5);
    CHECK(a.blocks == b.blocks);
    CHECK(a.blocks.size() == 4u);
    CHECK((a.blocks != c.blocks || a.blocks.size() == 8u));
    const auto u = qc::select_channels(last_channels{}, st, 0.25, qc::permutation::none);
    CHECK(u.blocks == std::vector<int>{6, 7});
  }

  TEST_CASE("bad selections are rejected with a message") {
    qc::channel_statistics st(48);
    auto sel = qc::select_channels(qc::by_quant_error{}, st, 0.5, qc::permutation::sorted);
    sel.order[0] = sel.order[1];
    CHECK_THROWS_AS(sel.validate(), std::invalid_argument);
    CHECK_THROWS_AS((void)qc::select_blocks(48, {0, 3}), std::invalid_argument);
    CHECK_THROWS_AS((void)qc::select_blocks(48, {1, 1}), std::invalid_argument);
    CHECK_NOTHROW((void)qc::select_blocks(48, {2, 0}));
    CHECK_THROWS_AS((void)qc::select_channels(wrong_count{}, st, 0.5), std::invalid_argument);
  }

} // TEST_SUITE
