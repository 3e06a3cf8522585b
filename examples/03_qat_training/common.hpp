// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Example 03, shared part: the MoE expert MLP, its routing, the host (CPU) trainer pass,
//! the W4A4 rollout engine, Adam, and the training loop, which takes the trainer pass as an
//! argument so that the CPU (`main.cpp`) and the GPU path (`gpu_path.cu`) run the same loop.
//!
//! Model: 4 SwiGLU experts (d = 64, I = 128), top-2 routing by a fixed router, fitted by Adam to
//! a synthetic teacher MoE on random tokens. The CPU trainer runs each expert's two linear layers
//! with `quads::reference::linear_forward/backward<Policy, float>` (fp32 activations).
//! The "rollout engine" is an NVFP4 (or MXFP4) W4A4 engine: it loads the packed weights made by
//! `reference::sync_weights` from the trainer's master weights, computes in bf16 (inputs and
//! intermediates rounded to bf16, which is the engine mismatch), and quantizes its activations
//! per row before each GEMM.
#pragma once

#include <quads/policy/policies.hpp>
#include <quads/policy/reference.hpp>
#include <quads/policy/weight_sync.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ex03 {

namespace ref = quads::reference;

inline constexpr int d = 64;      // model dimension
inline constexpr int inter = 128; // expert intermediate size
inline constexpr int experts = 4;
inline constexpr int top_k = 2;
inline constexpr int batch = 32; // tokens per step
inline constexpr int steps = 300;

struct moe {
  std::vector<float> w1; // [E, 2I, d]: gate rows 0..I-1, up rows I..2I-1
  std::vector<float> w2; // [E, d, I]
};

inline moe random_moe(std::mt19937_64& g, float scale) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  moe m;
  m.w1.resize(static_cast<std::size_t>(experts) * 2 * inter * d);
  m.w2.resize(static_cast<std::size_t>(experts) * d * inter);
  for (float& v : m.w1)
    v = n(g) * scale / std::sqrt(static_cast<float>(d));
  for (float& v : m.w2)
    v = n(g) * scale / std::sqrt(static_cast<float>(inter));
  return m;
}

//! Tokens routed to experts: pairs grouped by expert (the grouped-GEMM layout).
struct routing {
  std::vector<int> rows;  // pairs per expert
  std::vector<int> token; // token of each pair
  std::vector<float> gate;
};

inline routing route(const std::vector<float>& x, int tokens, const std::vector<float>& router) {
  std::vector<std::vector<std::pair<int, float>>> per(experts);
  for (int t = 0; t < tokens; ++t) {
    float logit[experts];
    for (int e = 0; e < experts; ++e) {
      float s = 0.0f;
      for (int c = 0; c < d; ++c)
        s += router[e * d + c] * x[t * d + c];
      logit[e] = s;
    }
    int a = 0, b = 1;
    if (logit[b] > logit[a]) std::swap(a, b);
    for (int e = 2; e < experts; ++e) {
      if (logit[e] > logit[a]) {
        b = a;
        a = e;
      } else if (logit[e] > logit[b])
        b = e;
    }
    const float ga = 1.0f / (1.0f + std::exp(logit[b] - logit[a])); // softmax over the top 2
    per[a].push_back({t, ga});
    per[b].push_back({t, 1.0f - ga});
  }
  routing r;
  for (int e = 0; e < experts; ++e) {
    r.rows.push_back(static_cast<int>(per[e].size()));
    for (auto [t, gt] : per[e]) {
      r.token.push_back(t);
      r.gate.push_back(gt);
    }
  }
  return r;
}

inline std::vector<float> gather(const std::vector<float>& x, const routing& r) {
  std::vector<float> out(r.token.size() * d);
  for (std::size_t p = 0; p < r.token.size(); ++p)
    std::copy_n(x.begin() + r.token[p] * d, d, out.begin() + p * d);
  return out;
}

inline float silu(float a) { return a / (1.0f + std::exp(-a)); }

//! Plain fp32 grouped matmul y = x W_e^T for the rollout engine (operands already decoded).
inline std::vector<float> grouped_matmul(const std::vector<float>& x, const std::vector<float>& w,
                                         const std::vector<int>& rows, int n, int k) {
  std::vector<float> y;
  std::size_t r0 = 0;
  for (int e = 0; e < experts; ++e) {
    for (int i = 0; i < rows[e]; ++i)
      for (int j = 0; j < n; ++j) {
        float s = 0.0f;
        for (int c = 0; c < k; ++c)
          s += x[(r0 + i) * k + c] * w[(static_cast<std::size_t>(e) * n + j) * k + c];
        y.push_back(s);
      }
    r0 += static_cast<std::size_t>(rows[e]);
  }
  return y;
}

inline std::vector<float> round_all_bf16(std::vector<float> v) {
  for (float& x : v)
    x = ref::round_bf16(x);
  return v;
}

//! The trainer: forward (and, with `target`, backward + gradients) of the MoE under policy P.
struct trainer_pass {
  std::vector<float> out; // [tokens, d]
  std::vector<float> dw1, dw2;
  double loss = 0.0;
};

template <class P>
trainer_pass run_trainer(const moe& m, const std::vector<float>& x, int tokens,
                         const std::vector<float>& router, const std::vector<float>* target) {
  const routing r = route(x, tokens, router);
  const std::vector<float> xg = gather(x, r);
  const auto s1 = quads::linear_shape::grouped(2 * inter, d, r.rows);
  const auto s2 = quads::linear_shape::grouped(d, inter, r.rows);
  const std::size_t pairs = r.token.size();
  const auto f1 = ref::linear_forward<P, float>(xg, m.w1, {}, s1);
  std::vector<float> h(pairs * inter);
  for (std::size_t p = 0; p < pairs; ++p)
    for (int i = 0; i < inter; ++i)
      h[p * inter + i] = silu(f1.y[p * 2 * inter + i]) * f1.y[p * 2 * inter + inter + i];
  const auto f2 = ref::linear_forward<P, float>(h, m.w2, {}, s2);
  trainer_pass res;
  res.out.assign(static_cast<std::size_t>(tokens) * d, 0.0f);
  for (std::size_t p = 0; p < pairs; ++p)
    for (int c = 0; c < d; ++c)
      res.out[r.token[p] * d + c] += r.gate[p] * f2.y[p * d + c];
  if (target == nullptr) return res;

  std::vector<float> dout(res.out.size());
  for (std::size_t i = 0; i < dout.size(); ++i) {
    const float diff = res.out[i] - (*target)[i];
    res.loss += static_cast<double>(diff) * diff;
    dout[i] = 2.0f * diff / static_cast<float>(dout.size());
  }
  res.loss /= static_cast<double>(dout.size());
  std::vector<float> dy2(pairs * d);
  for (std::size_t p = 0; p < pairs; ++p)
    for (int c = 0; c < d; ++c)
      dy2[p * d + c] = r.gate[p] * dout[r.token[p] * d + c];
  const auto g2 = ref::linear_backward<P, float>(dy2, h, m.w2, s2, f2.saved);
  std::vector<float> dy1(pairs * 2 * inter);
  for (std::size_t p = 0; p < pairs; ++p)
    for (int i = 0; i < inter; ++i) {
      const float a = f1.y[p * 2 * inter + i], u = f1.y[p * 2 * inter + inter + i];
      const float sg = 1.0f / (1.0f + std::exp(-a));
      const float dh = g2.dx[p * inter + i];
      dy1[p * 2 * inter + i] = dh * u * sg * (1.0f + a * (1.0f - sg));
      dy1[p * 2 * inter + inter + i] = dh * a * sg;
    }
  const auto g1 = ref::linear_backward<P, float>(dy1, xg, m.w1, s1, f1.saved);
  res.dw1 = g1.dw;
  res.dw2 = g2.dw;
  return res;
}

//! The rollout engine: W4A4 in `Format`, weights from the weight-sync function, bf16 compute.
template <class Format>
std::vector<float> run_rollout(const moe& m, const std::vector<float>& x_in, int tokens,
                               const std::vector<float>& router, std::vector<float>* w1_used,
                               std::vector<float>* w2_used) {
  using sync_policy = quads::weight_only<Format>; // the engine's weight quantizer
  const auto p1 =
      ref::sync_weights<sync_policy, quads::swizzled_128x4>(m.w1, experts, 2 * inter, d);
  const auto p2 = ref::sync_weights<sync_policy, quads::swizzled_128x4>(m.w2, experts, d, inter);
  const std::vector<float> w1 = ref::rollout_weights<sync_policy>(p1);
  const std::vector<float> w2 = ref::rollout_weights<sync_policy>(p2);
  if (w1_used) *w1_used = w1;
  if (w2_used) *w2_used = w2;

  const std::vector<float> x = round_all_bf16(x_in);
  const routing r = route(x, tokens, router);
  const std::size_t pairs = r.token.size();
  auto act_qdq = [&](const std::vector<float>& a, int k) { // per expert group, per-row scales
    std::vector<float> out;
    std::size_t r0 = 0;
    for (int e = 0; e < experts; ++e) {
      const std::size_t len = static_cast<std::size_t>(r.rows[e]) * k;
      const auto q = ref::qdq<Format, quads::per_row_options>(
          std::span<const float>(a).subspan(r0, len), r.rows[e], k);
      out.insert(out.end(), q.begin(), q.end());
      r0 += len;
    }
    return out;
  };
  const std::vector<float> y1 =
      round_all_bf16(grouped_matmul(act_qdq(gather(x, r), d), w1, r.rows, 2 * inter, d));
  std::vector<float> h(pairs * inter);
  for (std::size_t p = 0; p < pairs; ++p)
    for (int i = 0; i < inter; ++i)
      h[p * inter + i] = silu(y1[p * 2 * inter + i]) * y1[p * 2 * inter + inter + i];
  const std::vector<float> y2 =
      round_all_bf16(grouped_matmul(act_qdq(round_all_bf16(h), inter), w2, r.rows, d, inter));
  std::vector<float> out(static_cast<std::size_t>(tokens) * d, 0.0f);
  for (std::size_t p = 0; p < pairs; ++p)
    for (int c = 0; c < d; ++c)
      out[r.token[p] * d + c] += r.gate[p] * y2[p * d + c];
  return out;
}

struct adam {
  std::vector<float> m, v;
  int t = 0;
  void step(std::vector<float>& w, const std::vector<float>& g, float lr) {
    if (m.empty()) m.assign(w.size(), 0.0f), v.assign(w.size(), 0.0f);
    ++t;
    const float b1 = 0.9f, b2 = 0.999f;
    const float c1 = 1.0f - std::pow(b1, static_cast<float>(t)),
                c2 = 1.0f - std::pow(b2, static_cast<float>(t));
    for (std::size_t i = 0; i < w.size(); ++i) {
      m[i] = b1 * m[i] + (1.0f - b1) * g[i];
      v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
      w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + 1e-8f);
    }
  }
};

inline double mse(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return s / static_cast<double>(a.size());
}
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

struct setup {
  moe teacher, init;
  std::vector<float> router;
  std::vector<float> eval_x, eval_y;
};

inline std::vector<float> teacher_out(const setup& s, const std::vector<float>& x, int tokens) {
  return run_trainer<quads::no_fake_quant>(s.teacher, x, tokens, s.router, nullptr).out;
}

//! What one policy's run ends with (the numbers of its table row).
struct train_result {
  double last_step_loss = 0.0; // training loss of the last step
  double train_eval = 0.0;     // trainer output vs teacher, held-out tokens
  double rollout_eval = 0.0;   // rollout output vs teacher, held-out tokens
  std::size_t w_diff = 0;      // weights whose bits differ, trainer vs rollout
  double mismatch = 0.0;       // relative L2, trainer vs rollout output
};

//! The training loop and the evaluation of one policy; prints one table row.
//! `pass(m, x, tokens, target)`: the trainer's forward (and backward when `target` is not null),
//! a `trainer_pass`. `trainer_weights(m, w1, w2)`: the weights the trainer's forward computes
//! with (fp32 values), written to `w1`, `w2`.
template <class P, class RolloutFormat, class Pass, class TrainerWeights>
train_result train(const char* label, const setup& s, Pass&& pass_fn,
                   TrainerWeights&& trainer_weights) {
  std::mt19937_64 g(7); // the same token stream for every policy
  std::normal_distribution<float> n(0.0f, 1.0f);
  moe m = s.init;
  adam a1, a2;
  train_result res;
  std::printf("%-26s", label);
  for (int step = 1; step <= steps; ++step) {
    std::vector<float> x(static_cast<std::size_t>(batch) * d);
    for (float& v : x)
      v = n(g);
    const std::vector<float> y = teacher_out(s, x, batch);
    const trainer_pass pass = pass_fn(m, x, batch, &y);
    const float lr = step < 200 ? 3e-3f : 1e-3f;
    a1.step(m.w1, pass.dw1, lr);
    a2.step(m.w2, pass.dw2, lr);
    if (step == 1 || step % 75 == 0) std::printf(" %8.5f", pass.loss);
    res.last_step_loss = pass.loss;
  }
  const int eval_tokens = static_cast<int>(s.eval_x.size() / d);
  const auto trainer_eval = pass_fn(m, s.eval_x, eval_tokens, nullptr).out;
  std::vector<float> w1r, w2r;
  const auto rollout_eval =
      run_rollout<RolloutFormat>(m, s.eval_x, eval_tokens, s.router, &w1r, &w2r);
  // Weights the trainer computed with vs. weights the rollout decodes from the packed sync.
  std::vector<float> w1t, w2t;
  trainer_weights(m, w1t, w2t);
  for (std::size_t i = 0; i < w1t.size(); ++i)
    res.w_diff += std::bit_cast<std::uint32_t>(w1t[i]) != std::bit_cast<std::uint32_t>(w1r[i]);
  for (std::size_t i = 0; i < w2t.size(); ++i)
    res.w_diff += std::bit_cast<std::uint32_t>(w2t[i]) != std::bit_cast<std::uint32_t>(w2r[i]);
  res.train_eval = mse(trainer_eval, s.eval_y);
  res.rollout_eval = mse(rollout_eval, s.eval_y);
  res.mismatch = rel_l2(trainer_eval, rollout_eval);
  std::printf(" | %9.6f %9.6f | %6zu | %.4f\n", res.train_eval, res.rollout_eval, res.w_diff,
              res.mismatch);
  return res;
}

//! The policies of the table, in order: calls `f.template operator()<Policy,
//! RolloutFormat>(label)`.
inline constexpr int policy_count = 5;
template <class F>
void for_each_policy(F&& f) {
  constexpr quads::quant_options dflt{};
  f.template operator()<quads::no_fake_quant, quads::nvfp4>("bf16 (nvfp4 rollout)");
  f.template operator()<quads::weight_only<quads::nvfp4>, quads::nvfp4>("weight_only nvfp4");
  f.template operator()<quads::weight_only<quads::nvfp4, dflt, quads::ste::clipped>, quads::nvfp4>(
      "weight_only nvfp4 clipped");
  f.template operator()<quads::w4a4<quads::nvfp4>, quads::nvfp4>("w4a4 nvfp4");
  f.template operator()<quads::weight_only<quads::mxfp4>, quads::mxfp4>("weight_only mxfp4");
}

//! Prints the table header.
inline void print_table_header() {
  std::printf("%-26s %8s %8s %8s %8s %8s | %9s %9s | %6s | %s\n", "policy (rollout format)",
              "step 1", "75", "150", "225", "300", "train", "rollout", "w diff", "out mismatch");
}

} // namespace ex03
