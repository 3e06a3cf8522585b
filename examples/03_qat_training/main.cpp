// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Example 03: quantization-aware training of a small MoE expert MLP under each trainer
//! fake-quant policy, on the CPU, and the trainer-rollout output mismatch each one leaves.
//!
//! Model: 4 SwiGLU experts (d = 64, I = 128), top-2 routing by a fixed router, fitted by Adam to
//! a synthetic teacher MoE on random tokens. The trainer runs each expert's two linear layers
//! with `quads::reference::linear_forward/backward<Policy, float>` (fp32 activations).
//! The "rollout engine" is an NVFP4 (or MXFP4) W4A4 engine: it loads the packed weights made by
//! `reference::sync_weights` from the trainer's master weights, computes in bf16 (inputs and
//! intermediates rounded to bf16, which is the engine mismatch), and quantizes its activations
//! per row before each GEMM. Printed per policy: the loss curve, the trainer's and rollout's
//! final loss, how many weights differ between what the trainer computed with and what the
//! rollout decodes, and the relative L2 mismatch of the two outputs on held-out tokens.
#include <quads/policy/policies.hpp>
#include <quads/policy/reference.hpp>
#include <quads/policy/weight_sync.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace ref = quads::reference;

namespace {

constexpr int d = 64;      // model dimension
constexpr int inter = 128; // expert intermediate size
constexpr int experts = 4;
constexpr int top_k = 2;
constexpr int batch = 32; // tokens per step
constexpr int steps = 300;

struct moe {
  std::vector<float> w1; // [E, 2I, d]: gate rows 0..I-1, up rows I..2I-1
  std::vector<float> w2; // [E, d, I]
};

moe random_moe(std::mt19937_64& g, float scale) {
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

routing route(const std::vector<float>& x, int tokens, const std::vector<float>& router) {
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

std::vector<float> gather(const std::vector<float>& x, const routing& r) {
  std::vector<float> out(r.token.size() * d);
  for (std::size_t p = 0; p < r.token.size(); ++p)
    std::copy_n(x.begin() + r.token[p] * d, d, out.begin() + p * d);
  return out;
}

float silu(float a) { return a / (1.0f + std::exp(-a)); }

//! Plain fp32 grouped matmul y = x W_e^T for the rollout engine (operands already decoded).
std::vector<float> grouped_matmul(const std::vector<float>& x, const std::vector<float>& w,
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

std::vector<float> bf16(std::vector<float> v) {
  for (float& x : v)
    x = ref::round_bf16(x);
  return v;
}

//! The trainer: forward (and, with `target`, backward + gradients) of the MoE under policy P.
template <class P>
struct trainer_pass {
  std::vector<float> out; // [tokens, d]
  std::vector<float> dw1, dw2;
  double loss = 0.0;
};

template <class P>
trainer_pass<P> run_trainer(const moe& m, const std::vector<float>& x, int tokens,
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
  trainer_pass<P> res;
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

  const std::vector<float> x = bf16(x_in);
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
      bf16(grouped_matmul(act_qdq(gather(x, r), d), w1, r.rows, 2 * inter, d));
  std::vector<float> h(pairs * inter);
  for (std::size_t p = 0; p < pairs; ++p)
    for (int i = 0; i < inter; ++i)
      h[p * inter + i] = silu(y1[p * 2 * inter + i]) * y1[p * 2 * inter + inter + i];
  const std::vector<float> y2 = bf16(grouped_matmul(act_qdq(bf16(h), inter), w2, r.rows, d, inter));
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

double mse(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return s / static_cast<double>(a.size());
}
double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
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

std::vector<float> teacher_out(const setup& s, const std::vector<float>& x, int tokens) {
  return run_trainer<quads::no_fake_quant>(s.teacher, x, tokens, s.router, nullptr).out;
}

template <class P, class RolloutFormat>
void train(const char* label, const setup& s) {
  std::mt19937_64 g(7); // the same token stream for every policy
  std::normal_distribution<float> n(0.0f, 1.0f);
  moe m = s.init;
  adam a1, a2;
  std::printf("%-26s", label);
  for (int step = 1; step <= steps; ++step) {
    std::vector<float> x(static_cast<std::size_t>(batch) * d);
    for (float& v : x)
      v = n(g);
    const std::vector<float> y = teacher_out(s, x, batch);
    const auto pass = run_trainer<P>(m, x, batch, s.router, &y);
    const float lr = step < 200 ? 3e-3f : 1e-3f;
    a1.step(m.w1, pass.dw1, lr);
    a2.step(m.w2, pass.dw2, lr);
    if (step == 1 || step % 75 == 0) std::printf(" %8.5f", pass.loss);
  }
  const int eval_tokens = static_cast<int>(s.eval_x.size() / d);
  const auto trainer_eval = run_trainer<P>(m, s.eval_x, eval_tokens, s.router, nullptr).out;
  std::vector<float> w1r, w2r;
  const auto rollout_eval =
      run_rollout<RolloutFormat>(m, s.eval_x, eval_tokens, s.router, &w1r, &w2r);
  // Weights the trainer computed with vs. weights the rollout decodes from the packed sync.
  const auto w1t = ref::fake_quant_weights<P>(m.w1, experts, 2 * inter, d).values;
  const auto w2t = ref::fake_quant_weights<P>(m.w2, experts, d, inter).values;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < w1t.size(); ++i)
    differ += std::bit_cast<std::uint32_t>(w1t[i]) != std::bit_cast<std::uint32_t>(w1r[i]);
  for (std::size_t i = 0; i < w2t.size(); ++i)
    differ += std::bit_cast<std::uint32_t>(w2t[i]) != std::bit_cast<std::uint32_t>(w2r[i]);
  std::printf(" | %9.6f %9.6f | %6zu | %.4f\n", mse(trainer_eval, s.eval_y),
              mse(rollout_eval, s.eval_y), differ, rel_l2(trainer_eval, rollout_eval));
}

} // namespace

int main() {
  const auto t0 = std::chrono::steady_clock::now();
  std::mt19937_64 g(2026);
  setup s;
  s.teacher = random_moe(g, 1.0f);
  // Start from a perturbed teacher, as RL fine-tuning starts from a pretrained model.
  const moe noise = random_moe(g, 0.5f);
  s.init = s.teacher;
  for (std::size_t i = 0; i < s.init.w1.size(); ++i)
    s.init.w1[i] += noise.w1[i];
  for (std::size_t i = 0; i < s.init.w2.size(); ++i)
    s.init.w2[i] += noise.w2[i];
  std::normal_distribution<float> n(0.0f, 1.0f);
  s.router.resize(static_cast<std::size_t>(experts) * d);
  for (float& v : s.router)
    v = n(g) / std::sqrt(static_cast<float>(d));
  const int eval_tokens = 256;
  s.eval_x.resize(static_cast<std::size_t>(eval_tokens) * d);
  for (float& v : s.eval_x)
    v = n(g);
  s.eval_y = teacher_out(s, s.eval_x, eval_tokens);

  std::printf(
      "QAT of a top-%d MoE with %d SwiGLU experts (d=%d, I=%d), %d steps of %d tokens, Adam.\n",
      top_k, experts, d, inter, steps, batch);
  std::printf(
      "Rollout engine: W4A4 (packed weights from sync_weights, per-row activation scales,\n"
      "bf16 inputs/intermediates). Loss = MSE to the teacher; eval on %d held-out tokens.\n\n",
      eval_tokens);
  std::printf("%-26s %8s %8s %8s %8s %8s | %9s %9s | %6s | %s\n", "policy (rollout format)",
              "step 1", "75", "150", "225", "300", "train", "rollout", "w diff", "out mismatch");
  constexpr quads::quant_options dflt{};
  train<quads::no_fake_quant, quads::nvfp4>("bf16 (nvfp4 rollout)", s);
  train<quads::weight_only<quads::nvfp4>, quads::nvfp4>("weight_only nvfp4", s);
  train<quads::weight_only<quads::nvfp4, dflt, quads::ste::clipped>, quads::nvfp4>(
      "weight_only nvfp4 clipped", s);
  train<quads::w4a4<quads::nvfp4>, quads::nvfp4>("w4a4 nvfp4", s);
  train<quads::weight_only<quads::mxfp4>, quads::mxfp4>("weight_only mxfp4", s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "\n'w diff': weights whose fp32 bits differ between the trainer's forward and the rollout's\n"
      "decoded packed weights (0 = aligned). 'out mismatch': relative L2 of trainer vs rollout "
      "output.\n"
      "%.1f s\n",
      secs);
  return 0;
}
