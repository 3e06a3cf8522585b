// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Test problems of the MoE layer (host-only): random router logits, LLM-like activations
//!        (per-channel lognormal scales, a few outlier channels), expert weights quantized per
//!        expert, calibrated activation scales and random RAC channel sets.
#pragma once

#include <quads/compensation/selection.hpp>
#include <quads/gemm/weight_layout.hpp>
#include <quads/moe/reference.hpp>
#include <quads/quant/tensor_scale.hpp>
#include <quads/reference/tensor.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace moe_test {

namespace qm = quads::moe;
namespace qr = quads::moe::reference;

struct problem {
  qm::layer_shape shape{};
  qm::routing_config rc{};
  int tokens = 0;
  std::vector<float> x;      //!< [T, H], bf16 values
  std::vector<float> logits; //!< [T, E]
  qr::layer_weights w;
  qr::layer_numerics num;
};

//! `[E, 2I, H]` halves order -> gate/up interleaved, for plain float stacks.
inline std::vector<float> interleave_rows(const std::vector<float>& w, int E, int I, int H) {
  std::vector<float> out(w.size());
  for (int e = 0; e < E; ++e)
    for (int r = 0; r < 2 * I; ++r) {
      const int src = (r % 2 == 0) ? r / 2 : I + r / 2;
      std::copy_n(w.begin() + (static_cast<std::size_t>(e) * 2 * I + src) * H, H,
                  out.begin() + (static_cast<std::size_t>(e) * 2 * I + r) * H);
    }
  return out;
}

//! Random selection of `selected` channels (whole blocks) of K.
inline quads::compensation::channel_selection random_blocks(int K, int selected,
                                                            std::mt19937_64& g) {
  std::vector<int> b(static_cast<std::size_t>(K / 16));
  std::iota(b.begin(), b.end(), 0);
  std::shuffle(b.begin(), b.end(), g);
  b.resize(static_cast<std::size_t>(selected / 16));
  return quads::compensation::select_blocks(K, b);
}

//! Builds a problem. `h_per_expert`: one h tensor scale per expert (else one per layer).
//! `ratio`: RAC ratio of both GEMMs' channel sets (QUADS policy).
inline problem make_problem(const qm::layer_shape& s, int T, std::uint64_t seed,
                            bool h_per_expert = false, double ratio = 0.5,
                            qm::scoring score = qm::scoring::softmax, bool renorm = true) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  problem p;
  p.shape = s;
  p.tokens = T;
  p.rc = {s.experts, s.top_k, score, renorm, 1.0f};
  const int E = s.experts, H = s.hidden, I = s.intermediate;
  // activations: per-channel lognormal scales, ~1% outlier channels x 30
  std::vector<float> chan(static_cast<std::size_t>(H));
  for (auto& c : chan)
    c = std::exp(0.6f * nd(g));
  for (int i = 0; i < std::max(1, H / 100); ++i)
    chan[g() % H] *= 30.0f;
  p.x.resize(static_cast<std::size_t>(T) * H);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h)
      p.x[static_cast<std::size_t>(t) * H + h] =
          qr::round_bf16(nd(g) * chan[static_cast<std::size_t>(h)]);
  p.logits.resize(static_cast<std::size_t>(T) * E);
  for (auto& l : p.logits)
    l = 2.0f * nd(g);
  // weights ~ N(0, 1/sqrt(K)) with per-expert magnitude spread (distinct tensor scales)
  auto weights = [&](int rows, int cols) {
    std::vector<float> w(static_cast<std::size_t>(E) * rows * cols);
    for (int e = 0; e < E; ++e) {
      const float m = std::exp(0.3f * nd(g)) / std::sqrt(static_cast<float>(cols));
      for (std::size_t i = 0; i < static_cast<std::size_t>(rows) * cols; ++i)
        w[static_cast<std::size_t>(e) * rows * cols + i] = qr::round_bf16(m * nd(g));
    }
    return w;
  };
  const std::vector<float> gu = weights(2 * I, H), dn = weights(H, I);
  p.w.shape = s;
  p.w.gate_up = quads::gemm::interleave_gate_up(
      quads::reference::quantize<quads::nvfp4>(gu, 2 * I, H, {E, {}, 0}));
  p.w.down = quads::reference::quantize<quads::nvfp4>(dn, H, I, {E, {}, 0});
  p.w.gate_up_bf16 = interleave_rows(gu, E, I, H);
  p.w.down_bf16 = dn;
  // calibrated scales: x from its amax; h from the W4A16 h_pre (per layer or per expert)
  p.num.x_scale = quads::make_tensor_scale<quads::nvfp4>(quads::reference::amax(p.x));
  const int gsel = qm::rac_selected_channels(ratio, H), dsel = qm::rac_selected_channels(ratio, I);
  p.num.gate_up_sel = random_blocks(H, gsel, g);
  for (int e = 0; e < E; ++e)
    p.num.down_sel.push_back(random_blocks(I, dsel, g));
  p.num.h_scales.assign(1, quads::tensor_scale{});
  const auto r = qm::route(p.logits, T, p.rc);
  const auto a1 = qr::gather(qr::quantize_input(qm::layer_policy::w4a16, p.x, T, H, p.num), r);
  const auto gu_res = qr::gate_up(qm::layer_policy::w4a16, a1, r, p.w, p.num);
  std::vector<float> am(static_cast<std::size_t>(E), 0.0f);
  for (int row = 0; row < r.pairs(); ++row)
    for (int c = 0; c < I; ++c)
      am[static_cast<std::size_t>(r.expert_of_row[row])] =
          std::max(am[static_cast<std::size_t>(r.expert_of_row[row])],
                   std::fabs(gu_res.h_pre[static_cast<std::size_t>(row) * I + c]));
  if (h_per_expert) {
    p.num.h_scales.clear();
    for (int e = 0; e < E; ++e)
      p.num.h_scales.push_back(quads::make_tensor_scale<quads::nvfp4>(am[e]));
  } else {
    p.num.h_scales.assign(
        1, quads::make_tensor_scale<quads::nvfp4>(*std::max_element(am.begin(), am.end())));
  }
  return p;
}

} // namespace moe_test
