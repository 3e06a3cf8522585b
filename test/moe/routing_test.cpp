// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host tests of MoE routing: exp_rn accuracy, top-k against an independent float64
//!        sort, tie / NaN / -inf / -0 rules, grouping invariants, empty experts.
#include <doctest/doctest.h>

#include <quads/moe/routing.hpp>

#include <test_support/seed.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace qm = quads::moe;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();
const float nan_v = std::numeric_limits<float>::quiet_NaN();

//! Independent top-k: stable sort of expert indices by (NaN last, logit descending), using
//! float comparisons only (stable sort keeps lower indices first among equal logits).
std::vector<int> brute_topk(const float* l, int E, int k) {
  std::vector<int> idx(static_cast<std::size_t>(E));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
    const bool na = std::isnan(l[a]), nb = std::isnan(l[b]);
    if (na != nb) return nb; // numbers before NaN
    if (na) return false;
    return l[a] > l[b];
  });
  idx.resize(static_cast<std::size_t>(k));
  return idx;
}

//! Checks every invariant of a routing result against the logits.
void check_routing(const qm::routing_result& r, const std::vector<float>& logits,
                   const qm::routing_config& cfg) {
  const int T = r.tokens, E = cfg.experts, k = cfg.top_k, n = T * k;
  REQUIRE(r.offsets.size() == static_cast<std::size_t>(E) + 1);
  CHECK(r.offsets[0] == 0);
  CHECK(r.offsets[E] == n);
  for (int e = 0; e < E; ++e)
    REQUIRE(r.offsets[e] <= r.offsets[e + 1]);
  for (int t = 0; t < T; ++t) {
    const float* l = logits.data() + static_cast<std::size_t>(t) * E;
    const std::vector<int> want = brute_topk(l, E, k);
    double wsum = 0;
    for (int j = 0; j < k; ++j) {
      CHECK(r.topk_expert[t * k + j] == want[j]);
      wsum += r.topk_weight[t * k + j];
    }
    // weights against float64 scores
    std::vector<double> p(static_cast<std::size_t>(E));
    double mx = -INFINITY;
    for (int e = 0; e < E; ++e)
      if (!std::isnan(l[e])) mx = std::max(mx, static_cast<double>(l[e]));
    double s = 0;
    for (int e = 0; e < E; ++e) {
      const double le = std::isnan(l[e]) ? -INFINITY : l[e];
      p[e] = cfg.score == qm::scoring::softmax
                 ? (std::isinf(mx) && mx < 0 ? 1.0 : std::exp(le - mx))
                 : 1.0 / (1.0 + std::exp(-le));
      s += p[e];
    }
    if (cfg.score == qm::scoring::softmax)
      for (auto& v : p)
        v /= s;
    double ssel = 0;
    for (int j = 0; j < k; ++j)
      ssel += p[want[j]];
    for (int j = 0; j < k; ++j) {
      const double ref = (cfg.renormalize ? p[want[j]] / ssel : p[want[j]]) * cfg.scale;
      const double got = r.topk_weight[t * k + j];
      CHECK(std::fabs(got - ref) <= 1e-6 * std::fabs(ref) + 1e-30);
    }
    if (cfg.renormalize && ssel > 0) CHECK(std::fabs(wsum - cfg.scale) < 1e-5);
  }
  std::vector<int> seen(static_cast<std::size_t>(n), 0);
  for (int p = 0; p < n; ++p) {
    const int row = r.row_of_pair[p];
    REQUIRE(row >= 0);
    REQUIRE(row < n);
    CHECK(r.pair_of_row[row] == p);
    ++seen[row];
    const int e = r.topk_expert[p];
    CHECK(r.expert_of_row[row] == e);
    CHECK(row >= r.offsets[e]);
    CHECK(row < r.offsets[e + 1]);
    CHECK(r.weight_of_row[row] == r.topk_weight[p]);
  }
  for (int row = 0; row < n; ++row)
    CHECK(seen[row] == 1);
  for (int row = 1; row < n; ++row) // stable: pair index ascending within an expert
    if (r.expert_of_row[row] == r.expert_of_row[row - 1])
      CHECK(r.pair_of_row[row] > r.pair_of_row[row - 1]);
}

} // namespace

TEST_SUITE("moe.routing") {

  TEST_CASE("exp_rn is within 2 ulp of exp over the whole finite range and handles specials") {
    float worst = 0;
    for (float x = -103.0f; x < 88.7f; x += 0.0137f) {
      const double ref = std::exp(static_cast<double>(x));
      const float got = qm::exp_rn(x);
      if (ref < 1.2e-38) continue; // subnormal results: checked loosely below
      const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(ref)) - 23);
      worst = std::max(worst, static_cast<float>(std::fabs(got - ref) / ulp));
    }
    INFO("worst error in ulp: " << worst);
    CHECK(worst <= 2.0f);
    CHECK(qm::exp_rn(0.0f) == 1.0f);
    CHECK(qm::exp_rn(-inf) == 0.0f);
    CHECK(std::isinf(qm::exp_rn(inf)));
    CHECK(std::isinf(qm::exp_rn(89.0f)));
    CHECK(std::isnan(qm::exp_rn(nan_v)));
    CHECK(qm::exp_rn(-105.0f) == 0.0f);
    CHECK(std::fabs(qm::exp_rn(-100.0f) - std::exp(-100.0)) < 3e-45);
    CHECK(std::fabs(qm::sigmoid_rn(0.0f) - 0.5f) == 0.0f);
  }

  TEST_CASE("random logits: top-k equals an independent sort, weights equal float64 scores") {
    auto g = quads_test::rng("moe.routing.random");
    std::normal_distribution<float> nd(0.0f, 2.0f);
    for (int E : {8, 16, 64, 128, 256}) {
      for (int k : {1, 2, 8}) {
        if (k > E) continue;
        for (auto score : {qm::scoring::softmax, qm::scoring::sigmoid}) {
          for (bool renorm : {true, false}) {
            const int T = 1 + static_cast<int>(g() % 40);
            std::vector<float> l(static_cast<std::size_t>(T) * E);
            for (auto& v : l)
              v = nd(g);
            const qm::routing_config cfg{E, k, score, renorm, renorm ? 1.0f : 2.5f};
            CAPTURE(E);
            CAPTURE(k);
            CAPTURE(T);
            check_routing(qm::route(l, T, cfg), l, cfg);
          }
        }
      }
    }
  }

  TEST_CASE("ties go to the lower expert index; -0 equals +0; all-equal logits pick 0..k-1") {
    const qm::routing_config cfg{8, 3, qm::scoring::softmax, true, 1.0f};
    std::vector<float> l = {1, 2, 2, 0, 2, -0.0f, 0.0f, 2};
    auto r = qm::route(l, 1, cfg);
    CHECK(r.topk_expert == std::vector<int>{1, 2, 4});
    CHECK(r.topk_weight[0] == r.topk_weight[1]);
    check_routing(r, l, cfg);
    std::vector<float> z = {3, 3, 3, -0.0f, 0.0f, -0.0f, 3, 3};
    const qm::routing_config c5{8, 5, qm::scoring::softmax, true, 1.0f};
    r = qm::route(z, 1, c5);
    CHECK(r.topk_expert == std::vector<int>{0, 1, 2, 6, 7});
    std::vector<float> same(16 * 8, 0.5f);
    r = qm::route(same, 16, cfg);
    for (int t = 0; t < 16; ++t) {
      CHECK(r.topk_expert[t * 3] == 0);
      CHECK(r.topk_expert[t * 3 + 2] == 2);
      CHECK(r.topk_weight[t * 3] == r.topk_weight[t * 3 + 1]);
    }
    CHECK(r.offsets == std::vector<int>{0, 16, 32, 48, 48, 48, 48, 48, 48}); // 5 empty experts
    check_routing(r, same, cfg);
  }

  TEST_CASE("NaN logits rank last with weight 0; -inf above NaN; all -inf uniform; +inf dominant") {
    const qm::routing_config cfg{6, 3, qm::scoring::softmax, false, 1.0f};
    std::vector<float> l = {nan_v, 1.0f, nan_v, -inf, 0.5f, nan_v};
    auto r = qm::route(l, 1, cfg);
    CHECK(r.topk_expert == std::vector<int>{1, 4, 3});
    CHECK(r.topk_weight[2] == 0.0f); // -inf
    l = {nan_v, nan_v, nan_v, nan_v, 1.0f, nan_v};
    r = qm::route(l, 1, cfg);
    CHECK(r.topk_expert == std::vector<int>{4, 0, 1});
    CHECK(r.topk_weight[0] == 1.0f);
    CHECK(r.topk_weight[1] == 0.0f);
    l.assign(6, -inf);
    r = qm::route(l, 1, cfg);
    CHECK(r.topk_expert == std::vector<int>{0, 1, 2});
    for (int j = 0; j < 3; ++j)
      CHECK(std::fabs(r.topk_weight[j] - 1.0f / 6.0f) < 1e-7f);
    // +inf takes the whole softmax mass; sigmoid + renormalisation of zero scores gives 1/k
    l = {1.0f, inf, 3.0f, inf, nan_v, -inf};
    r = qm::route(l, 1, cfg);
    CHECK(r.topk_expert == std::vector<int>{1, 3, 2});
    CHECK(r.topk_weight[0] == 0.5f);
    CHECK(r.topk_weight[1] == 0.5f);
    CHECK(r.topk_weight[2] == 0.0f);
    const qm::routing_config sig_renorm{6, 4, qm::scoring::sigmoid, true, 1.0f};
    l = {nan_v, -inf, -inf, nan_v, -inf, -inf};
    r = qm::route(l, 1, sig_renorm);
    CHECK(r.topk_expert == std::vector<int>{1, 2, 4, 5});
    for (int j = 0; j < 4; ++j)
      CHECK(r.topk_weight[j] == 0.25f);
    const qm::routing_config sig{6, 2, qm::scoring::sigmoid, false, 1.0f};
    l = {nan_v, -inf, 0.0f, nan_v, nan_v, nan_v};
    r = qm::route(l, 1, sig);
    CHECK(r.topk_expert == std::vector<int>{2, 1});
    CHECK(r.topk_weight[0] == 0.5f);
    CHECK(r.topk_weight[1] == 0.0f);
  }

  TEST_CASE("T = 0, T = 1 and T * k not a multiple of anything group correctly") {
    const qm::routing_config cfg{13, 3, qm::scoring::softmax, true, 1.0f};
    auto r = qm::route({}, 0, cfg);
    CHECK(r.offsets == std::vector<int>(14, 0));
    auto g = quads_test::rng("moe.routing.odd");
    std::normal_distribution<float> nd;
    for (int T : {1, 7, 37}) {
      std::vector<float> l(static_cast<std::size_t>(T) * 13);
      for (auto& v : l)
        v = nd(g);
      check_routing(qm::route(l, T, cfg), l, cfg);
    }
  }

  TEST_CASE("bad configurations are refused") {
    CHECK_THROWS_AS(qm::route({}, 0, {0, 1}), std::invalid_argument);
    CHECK_THROWS_AS(qm::route({}, 0, {4, 5}), std::invalid_argument);
    CHECK_THROWS_AS(qm::route({}, 0, {64, 33}), std::invalid_argument);
    std::vector<float> l(7);
    CHECK_THROWS_AS(qm::route(l, 1, {8, 2}), std::invalid_argument);
  }

} // TEST_SUITE
