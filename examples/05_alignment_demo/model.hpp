// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Example 05: the synthetic causal MoE transformer and its two engines (trainer, rollout).
//!
//! Model: `layers` pre-norm blocks of multi-head causal attention (bf16 weights, never quantized)
//! and an MoE MLP (softmax router, top-k renormalized, SwiGLU experts), a tied-free lm_head. Every
//! weight is drawn from a seeded SplitMix64/Box-Muller stream (portable, unlike
//! std::normal_distribution) and rounded to bf16 (the master precision).
//! LLM-like outliers, injected deterministically and identically in both engines:
//! - 4 massive residual channels (a constant +-20 added to the embedding), which the router and
//!   lm_head ignore (zero columns) and the experts mostly ignore (0.1x weight columns);
//! - RMSNorm gains lognormal(0, 0.3) with 1.5 % of channels x10 (channel-structured outliers at
//!   the expert inputs);
//! - token spikes: 0.2 % of (position, layer, channel) SwiGLU outputs x15 (the down-projection
//!   input; a hash of position, layer and channel decides).
//! Engines (the engine-drift floor, no quantization involved):
//! - trainer: layer-major over the whole sequence, fp32, dots with 16 strided accumulators;
//! - rollout: token-by-token with a KV cache, every op output rounded to bf16 (residual stream,
//!   norms, projections, router logits, expert outputs, logits), dots split-K in two halves of 8
//!   strided accumulators, experts summed in routing-rank order (the trainer: expert index order).
#pragma once

#include <quads/compensation/reference.hpp>
#include <quads/compensation/selection.hpp>
#include <quads/format/e4m3.hpp>
#include <quads/policy/policies.hpp>
#include <quads/policy/reference.hpp>

#include "gpu_experts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

namespace demo {

namespace ref = quads::reference;
namespace comp = quads::compensation;

using act_policy = quads::w4a4<quads::nvfp4>; //!< per-token NVFP4 activations (per_row scales)
using act_quantizer = act_policy::activation_quantizer;
inline constexpr quads::quant_options act_options = act_quantizer::options;
static_assert(std::is_same_v<act_quantizer, rollout_act_quantizer>);

struct model_config {
  int layers = 4;
  int d = 256;
  int heads = 4;
  int experts = 16;
  int top_k = 2;
  int ff = 256;
  int vocab = 2048;
  int max_len = 256;
  float logit_scale = 4.0f; //!< lm_head std times sqrt(d): sets the entropy (~3 nats)
  float router_scale = 1.5f;
  std::uint64_t seed = 1;
};

// ---- deterministic randomness ----------------------------------------------------------------
inline std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline double unit(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

struct rng {
  std::uint64_t s;
  double uniform() { return unit(s = splitmix(s)); }
  float normal() {
    const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
};

inline float bf16(float x) { return ref::round_bf16(x); }

// ---- weights ---------------------------------------------------------------------------------
struct expert_weights {
  std::vector<float> gate, up; //!< [E, ff, d]
  std::vector<float> down;     //!< [E, d, ff]
};

struct layer_weights {
  std::vector<float> attn_norm, mlp_norm; //!< [d]
  std::vector<float> wq, wk, wv, wo;      //!< [d, d]
  std::vector<float> router;              //!< [E, d]
  expert_weights master;                  //!< bf16 master expert weights
};

struct model {
  model_config cfg;
  std::vector<float> embed, pos, final_norm, lm_head; //!< [V,d], [max_len,d], [d], [V,d]
  std::vector<layer_weights> layers;
  std::vector<int> massive; //!< massive residual channels
};

inline std::vector<float> gaussian(rng& g, std::size_t n, float stddev) {
  std::vector<float> v(n);
  for (float& x : v)
    x = bf16(g.normal() * stddev);
  return v;
}

inline model build_model(const model_config& c) {
  model m;
  m.cfg = c;
  rng g{splitmix(c.seed ^ 0x6d6f64656cull)};
  const int d = c.d;
  const float sd = 1.0f / std::sqrt(static_cast<float>(d));
  m.massive = {7, 61, 130, 201};
  auto is_massive = [&](int k) {
    return std::find(m.massive.begin(), m.massive.end(), k) != m.massive.end();
  };
  m.embed = gaussian(g, static_cast<std::size_t>(c.vocab) * d, 1.0f);
  for (int t = 0; t < c.vocab; ++t)
    for (std::size_t i = 0; i < m.massive.size(); ++i)
      m.embed[static_cast<std::size_t>(t) * d + m.massive[i]] = (i % 2 ? -20.0f : 20.0f);
  m.pos.resize(static_cast<std::size_t>(c.max_len) * d);
  for (int p = 0; p < c.max_len; ++p)
    for (int k = 0; k < d; ++k)
      m.pos[static_cast<std::size_t>(p) * d + k] =
          is_massive(k) ? 0.0f
                        : bf16(0.5f * std::sin(p / std::pow(1000.0f, (k & ~1) / float(d)) +
                                               (k & 1) * 1.5707963f));
  auto gains = [&]() {
    std::vector<float> gv(static_cast<std::size_t>(d));
    for (int k = 0; k < d; ++k) {
      float v = std::exp(0.3f * g.normal());
      if (g.uniform() < 0.015) v *= 10.0f;
      gv[static_cast<std::size_t>(k)] = bf16(v);
    }
    return gv;
  };
  for (int l = 0; l < c.layers; ++l) {
    layer_weights L;
    L.attn_norm = gains();
    L.mlp_norm = gains();
    L.wq = gaussian(g, static_cast<std::size_t>(d) * d, sd);
    L.wk = gaussian(g, static_cast<std::size_t>(d) * d, sd);
    L.wv = gaussian(g, static_cast<std::size_t>(d) * d, sd);
    L.wo = gaussian(g, static_cast<std::size_t>(d) * d, 0.5f * sd);
    L.router = gaussian(g, static_cast<std::size_t>(c.experts) * d, c.router_scale * sd);
    const std::size_t ew = static_cast<std::size_t>(c.experts) * c.ff * d;
    L.master.gate = gaussian(g, ew, sd);
    L.master.up = gaussian(g, ew, sd);
    L.master.down = gaussian(g, ew, 0.5f / std::sqrt(static_cast<float>(c.ff)));
    for (int mc : m.massive) {
      for (int r = 0; r < c.experts; ++r)
        L.router[static_cast<std::size_t>(r) * d + mc] = 0.0f;
      for (int r = 0; r < c.experts * c.ff; ++r) {
        L.master.gate[static_cast<std::size_t>(r) * d + mc] *= 0.1f;
        L.master.up[static_cast<std::size_t>(r) * d + mc] *= 0.1f;
      }
    }
    m.layers.push_back(std::move(L));
  }
  m.final_norm = gains();
  m.lm_head = gaussian(g, static_cast<std::size_t>(c.vocab) * d, c.logit_scale * sd);
  for (int mc : m.massive)
    for (int t = 0; t < c.vocab; ++t)
      m.lm_head[static_cast<std::size_t>(t) * d + mc] = 0.0f;
  return m;
}

// ---- numerics of the two engines -------------------------------------------------------------
//! Trainer dot: 16 strided fp32 accumulators, pairwise tree (n % 16 == 0).
inline float dot_trainer(const float* a, const float* b, int n) {
  float acc[16] = {};
  for (int k = 0; k < n; k += 16)
    for (int l = 0; l < 16; ++l)
      acc[l] += a[k + l] * b[k + l];
  for (int w = 8; w > 0; w /= 2)
    for (int l = 0; l < w; ++l)
      acc[l] += acc[l + w];
  return acc[0];
}
//! Rollout dot: split-K in two halves, each 8 strided accumulators folded sequentially.
inline float dot_rollout(const float* a, const float* b, int n) {
  const int h = n / 2;
  float part[2];
  for (int s = 0; s < 2; ++s) {
    float acc[8] = {};
    const float* x = a + s * h;
    const float* y = b + s * h;
    for (int k = 0; k < h; k += 8)
      for (int l = 0; l < 8; ++l)
        acc[l] += x[k + l] * y[k + l];
    float t = 0.0f;
    for (int l = 0; l < 8; ++l)
      t += acc[l];
    part[s] = t;
  }
  return part[0] + part[1];
}

struct engine_numerics {
  bool rollout = false;
  float dot(const float* a, const float* b, int n) const {
    return rollout ? dot_rollout(a, b, n) : dot_trainer(a, b, n);
  }
  float cast(float x) const { return rollout ? bf16(x) : x; }
  //! y[n] = W[n,k] x (cast at the op boundary).
  void matvec(const float* w, const float* x, float* y, int n, int k) const {
    for (int i = 0; i < n; ++i)
      y[i] = cast(dot(w + static_cast<std::size_t>(i) * k, x, k));
  }
  void rmsnorm(const float* x, const float* g, float* y, int d) const {
    const float ms = dot(x, x, d) / static_cast<float>(d);
    const float inv = 1.0f / std::sqrt(ms + 1e-6f);
    for (int k = 0; k < d; ++k)
      y[k] = cast(x[k] * inv * g[k]);
  }
};

// ---- quantization sites ----------------------------------------------------------------------
enum class act_mode { none, fp4, fp4_rac, fp8 };

//! RAC selections of one layer: expert input (K = d) and down-projection input (K = ff).
struct rac_layer {
  comp::channel_selection in, down;
};

//! Per-token FP8 E4M3 QDQ (scale = amax / 448).
inline void qdq_fp8_row(std::vector<float>& x) {
  float amax = 0.0f;
  for (float v : x)
    amax = std::max(amax, std::fabs(v));
  if (amax == 0.0f) return;
  const float s = amax / quads::e4m3_max;
  for (float& v : x)
    v = quads::decode_e4m3(quads::encode_e4m3(v / s)) * s;
}

//! The activation operand a linear layer consumes under `mode` (one token, K values).
inline std::vector<float> quantize_act(act_mode mode, const float* x, int K,
                                       const comp::channel_selection* sel) {
  std::vector<float> v(x, x + K);
  switch (mode) {
  case act_mode::none:
    return v;
  case act_mode::fp4:
    return ref::fake_quant_activations<act_policy>(v, 0, 1, K).values;
  case act_mode::fp8:
    qdq_fp8_row(v);
    return v;
  case act_mode::fp4_rac: {
    // Composition (b) folded into x-space: Q(x) + Q(r_S) on the selected blocks, which equals
    // alpha_x Q(x)W^T + alpha_r Q(r_S)W_S^T up to summation order.
    comp::reference::rac_args args;
    args.residual = comp::residual_scale::own;
    const auto a =
        comp::reference::quantize_activation<quads::nvfp4, act_options>(v, 1, *sel, args);
    const std::vector<float> dq = comp::reference::dequantize_activation(a);
    std::vector<float> out(dq.begin(), dq.begin() + K);
    constexpr int B = quads::nvfp4::block_size;
    for (std::size_t j = 0; j < sel->blocks.size(); ++j)
      for (int i = 0; i < B; ++i)
        out[static_cast<std::size_t>(sel->blocks[j]) * B + i] +=
            dq[static_cast<std::size_t>(K) + j * B + i];
    return out;
  }
  }
  return v;
}

//! E2M1 codes (4 bits each) of the per-token NVFP4 quantization of x, one byte per value.
inline std::vector<std::uint8_t> fp4_codes(const float* x, int K) {
  const auto q = ref::quantize<quads::nvfp4, act_options>(std::span<const float>(x, K), 1, K);
  std::vector<std::uint8_t> c(static_cast<std::size_t>(K));
  for (int k = 0; k < K; ++k)
    c[k] = (q.data[k / 2] >> ((k & 1) * 4)) & 0xf;
  return c;
}

//! One engine side of an arm: the expert weights it computes with and its activation handling.
struct side {
  const std::vector<expert_weights>* experts = nullptr; //!< per layer
  act_mode act = act_mode::none;
  const std::vector<rac_layer>* rac = nullptr;
  //! Rollout sides with FP4 weights: run the expert linears on the GPU (gpu_experts.hpp).
  const gpu_experts* gpu = nullptr;
};

//! Spike decision for the SwiGLU output (position, layer, channel), identical in both engines.
inline bool spike(std::uint64_t seed, int pos, int layer, int ch) {
  const std::uint64_t h =
      splitmix(seed ^ (static_cast<std::uint64_t>(pos) << 32) ^
               (static_cast<std::uint64_t>(layer) << 20) ^ static_cast<unsigned>(ch));
  return unit(h) < 0.002;
}

//! Optional capture of the expert-side activations (for calibration).
struct capture {
  std::vector<std::vector<float>> in, down; //!< per layer, rows appended
};

//! MoE MLP of one token. Writes the top-k set to `chosen` (sorted).
inline void moe_token(const model& m, int l, const side& sd, const engine_numerics& nu,
                      const float* xn, float* out, int pos, int* chosen, capture* cap) {
  const model_config& c = m.cfg;
  const layer_weights& L = m.layers[static_cast<std::size_t>(l)];
  const expert_weights& W = (*sd.experts)[static_cast<std::size_t>(l)];
  std::vector<float> logits(static_cast<std::size_t>(c.experts));
  nu.matvec(L.router.data(), xn, logits.data(), c.experts, c.d);
  float mx = *std::max_element(logits.begin(), logits.end());
  std::vector<float> p(logits.size());
  float sum = 0.0f;
  for (std::size_t e = 0; e < p.size(); ++e)
    sum += (p[e] = std::exp(logits[e] - mx));
  std::vector<int> idx(static_cast<std::size_t>(c.experts));
  for (int e = 0; e < c.experts; ++e)
    idx[e] = e;
  std::partial_sort(idx.begin(), idx.begin() + c.top_k, idx.end(),
                    [&](int a, int b) { return p[a] != p[b] ? p[a] > p[b] : a < b; });
  float wsum = 0.0f;
  for (int j = 0; j < c.top_k; ++j)
    wsum += p[idx[j]] / sum;
  std::vector<int> order(idx.begin(), idx.begin() + c.top_k);
  for (int j = 0; j < c.top_k; ++j)
    chosen[j] = order[j];
  std::sort(chosen, chosen + c.top_k);
  if (!nu.rollout) order.assign(chosen, chosen + c.top_k); // trainer: expert index order

  const comp::channel_selection* sel_in = sd.rac ? &(*sd.rac)[l].in : nullptr;
  const comp::channel_selection* sel_dn = sd.rac ? &(*sd.rac)[l].down : nullptr;
  const bool on_gpu = sd.gpu != nullptr && nu.rollout && sd.act != act_mode::fp8;
  const gpu_act ga = sd.act == act_mode::fp4 ? gpu_act::fp4
                     : sd.act == act_mode::fp4_rac ? gpu_act::fp4_rac
                                                   : gpu_act::bf16;
  const std::vector<float> xa = on_gpu ? std::vector<float>() : quantize_act(sd.act, xn, c.d, sel_in);
  if (cap) cap->in[l].insert(cap->in[l].end(), xn, xn + c.d);
  std::vector<float> g(static_cast<std::size_t>(c.ff)), u(g.size()), h(g.size()),
      y(static_cast<std::size_t>(c.d));
  for (int k = 0; k < c.d; ++k)
    out[k] = 0.0f;
  for (int e : order) {
    const std::size_t off = static_cast<std::size_t>(e) * c.ff * c.d;
    if (on_gpu) {
      sd.gpu->gate_up(l, e, ga, xn, sel_in, g.data(), u.data());
      for (int i = 0; i < c.ff; ++i)
        g[i] = nu.cast(g[i]), u[i] = nu.cast(u[i]);
    } else {
      nu.matvec(W.gate.data() + off, xa.data(), g.data(), c.ff, c.d);
      nu.matvec(W.up.data() + off, xa.data(), u.data(), c.ff, c.d);
    }
    for (int i = 0; i < c.ff; ++i) {
      float v = g[i] / (1.0f + std::exp(-g[i])) * u[i];
      if (spike(c.seed, pos, l, i)) v *= 15.0f;
      h[i] = nu.cast(v);
    }
    if (cap) cap->down[l].insert(cap->down[l].end(), h.begin(), h.end());
    if (on_gpu) {
      sd.gpu->down(l, e, ga, h.data(), sel_dn, y.data());
      for (int k = 0; k < c.d; ++k)
        y[k] = nu.cast(y[k]);
    } else {
      const std::vector<float> ha = quantize_act(sd.act, h.data(), c.ff, sel_dn);
      nu.matvec(W.down.data() + off, ha.data(), y.data(), c.d, c.ff);
    }
    const float w = p[e] / sum / wsum;
    for (int k = 0; k < c.d; ++k)
      out[k] = nu.cast(out[k] + w * y[k]);
  }
}

//! What an engine reports per position: log-softmax over the vocabulary (positions that predict
//! the next token), top-k expert sets per layer and the expert-input activations per layer.
struct trace {
  std::vector<std::vector<float>> logp; //!< [positions][V] for scored positions
  std::vector<int> routes;              //!< [pos][layer][top_k]
  std::vector<float> expert_in;         //!< [pos][layer][d]
};

inline void log_softmax(const float* z, int n, float* out) {
  float mx = z[0];
  for (int i = 1; i < n; ++i)
    mx = std::max(mx, z[i]);
  double s = 0.0;
  for (int i = 0; i < n; ++i)
    s += std::exp(static_cast<double>(z[i] - mx));
  const float ls = static_cast<float>(std::log(s));
  for (int i = 0; i < n; ++i)
    out[i] = z[i] - mx - ls;
}

//! Per-head causal attention of query `t` over keys/values [0, t] (K, V rows of length d).
inline void attend(const model_config& c, const engine_numerics& nu, const float* q,
                   const std::vector<float>& K, const std::vector<float>& V, int t, float* o) {
  const int hd = c.d / c.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> s(static_cast<std::size_t>(t + 1));
  for (int h = 0; h < c.heads; ++h) {
    float mx = -INFINITY;
    for (int j = 0; j <= t; ++j) {
      s[j] = nu.dot(q + h * hd, K.data() + static_cast<std::size_t>(j) * c.d + h * hd, hd) * scale;
      mx = std::max(mx, s[j]);
    }
    float sum = 0.0f;
    for (int j = 0; j <= t; ++j)
      sum += (s[j] = std::exp(s[j] - mx));
    for (int i = 0; i < hd; ++i) {
      float acc = 0.0f;
      for (int j = 0; j <= t; ++j)
        acc += s[j] * V[static_cast<std::size_t>(j) * c.d + h * hd + i];
      o[h * hd + i] = nu.cast(acc / sum);
    }
  }
}

} // namespace demo

namespace demo {

//! Trainer: full-sequence, layer-major forward in fp32 over `tokens`; log-softmax for positions
//! [first_scored, tokens.size()).
inline trace trainer_forward(const model& m, const side& sd, const std::vector<int>& tokens,
                             int first_scored, capture* cap = nullptr) {
  const model_config& c = m.cfg;
  const engine_numerics nu{false};
  const int T = static_cast<int>(tokens.size()), d = c.d;
  std::vector<float> x(static_cast<std::size_t>(T) * d), xn(x.size()), Q(x.size()), K(x.size()),
      V(x.size()), o(static_cast<std::size_t>(d)), y(o.size());
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < d; ++k)
      x[static_cast<std::size_t>(t) * d + k] =
          m.embed[static_cast<std::size_t>(tokens[t]) * d + k] +
          m.pos[static_cast<std::size_t>(t) * d + k];
  trace tr;
  tr.routes.assign(static_cast<std::size_t>(T) * c.layers * c.top_k, 0);
  tr.expert_in.assign(static_cast<std::size_t>(T) * c.layers * d, 0.0f);
  for (int l = 0; l < c.layers; ++l) {
    const layer_weights& L = m.layers[static_cast<std::size_t>(l)];
    for (int t = 0; t < T; ++t) {
      float* xt = x.data() + static_cast<std::size_t>(t) * d;
      float* nt = xn.data() + static_cast<std::size_t>(t) * d;
      nu.rmsnorm(xt, L.attn_norm.data(), nt, d);
      nu.matvec(L.wq.data(), nt, Q.data() + static_cast<std::size_t>(t) * d, d, d);
      nu.matvec(L.wk.data(), nt, K.data() + static_cast<std::size_t>(t) * d, d, d);
      nu.matvec(L.wv.data(), nt, V.data() + static_cast<std::size_t>(t) * d, d, d);
    }
    for (int t = 0; t < T; ++t) {
      attend(c, nu, Q.data() + static_cast<std::size_t>(t) * d, K, V, t, o.data());
      nu.matvec(L.wo.data(), o.data(), y.data(), d, d);
      for (int k = 0; k < d; ++k)
        x[static_cast<std::size_t>(t) * d + k] += y[k];
    }
    for (int t = 0; t < T; ++t) {
      float* xt = x.data() + static_cast<std::size_t>(t) * d;
      float* nt = xn.data() + static_cast<std::size_t>(t) * d;
      nu.rmsnorm(xt, L.mlp_norm.data(), nt, d);
      std::copy(nt, nt + d, tr.expert_in.data() + (static_cast<std::size_t>(t) * c.layers + l) * d);
      moe_token(m, l, sd, nu, nt, y.data(), t,
                tr.routes.data() + (static_cast<std::size_t>(t) * c.layers + l) * c.top_k, cap);
      for (int k = 0; k < d; ++k)
        xt[k] += y[k];
    }
  }
  std::vector<float> logits(static_cast<std::size_t>(c.vocab));
  for (int t = first_scored; t < T; ++t) {
    nu.rmsnorm(x.data() + static_cast<std::size_t>(t) * d, m.final_norm.data(), o.data(), d);
    nu.matvec(m.lm_head.data(), o.data(), logits.data(), c.vocab, d);
    tr.logp.emplace_back(static_cast<std::size_t>(c.vocab));
    log_softmax(logits.data(), c.vocab, tr.logp.back().data());
  }
  return tr;
}

//! Rollout: decodes token by token with a KV cache (bf16 casts, split-K dots). The prompt is fed
//! one token at a time; from position `prompt - 1` on, the next token is sampled at temperature 1
//! with uniforms from `sample_seed` (common random numbers across arms). Returns the trace of the
//! scored positions and appends the sampled tokens to `tokens`.
inline trace rollout_generate(const model& m, const side& sd, std::vector<int>& tokens, int gen,
                              std::uint64_t sample_seed) {
  const model_config& c = m.cfg;
  const engine_numerics nu{true};
  const int d = c.d, prompt = static_cast<int>(tokens.size()), T = prompt + gen - 1;
  std::vector<std::vector<float>> Kc(static_cast<std::size_t>(c.layers)), Vc(Kc.size());
  std::vector<float> x(static_cast<std::size_t>(d)), xn(x.size()), q(x.size()), kk(x.size()),
      vv(x.size()), o(x.size()), y(x.size()), logits(static_cast<std::size_t>(c.vocab));
  trace tr;
  tr.routes.assign(static_cast<std::size_t>(T) * c.layers * c.top_k, 0);
  tr.expert_in.assign(static_cast<std::size_t>(T) * c.layers * d, 0.0f);
  for (int t = 0; t < T; ++t) {
    for (int k = 0; k < d; ++k)
      x[k] = bf16(m.embed[static_cast<std::size_t>(tokens[t]) * d + k] +
                  m.pos[static_cast<std::size_t>(t) * d + k]);
    for (int l = 0; l < c.layers; ++l) {
      const layer_weights& L = m.layers[static_cast<std::size_t>(l)];
      nu.rmsnorm(x.data(), L.attn_norm.data(), xn.data(), d);
      nu.matvec(L.wq.data(), xn.data(), q.data(), d, d);
      nu.matvec(L.wk.data(), xn.data(), kk.data(), d, d);
      nu.matvec(L.wv.data(), xn.data(), vv.data(), d, d);
      Kc[l].insert(Kc[l].end(), kk.begin(), kk.end());
      Vc[l].insert(Vc[l].end(), vv.begin(), vv.end());
      attend(c, nu, q.data(), Kc[l], Vc[l], t, o.data());
      nu.matvec(L.wo.data(), o.data(), y.data(), d, d);
      for (int k = 0; k < d; ++k)
        x[k] = bf16(x[k] + y[k]);
      nu.rmsnorm(x.data(), L.mlp_norm.data(), xn.data(), d);
      std::copy(xn.begin(), xn.end(),
                tr.expert_in.data() + (static_cast<std::size_t>(t) * c.layers + l) * d);
      moe_token(m, l, sd, nu, xn.data(), y.data(), t,
                tr.routes.data() + (static_cast<std::size_t>(t) * c.layers + l) * c.top_k, nullptr);
      for (int k = 0; k < d; ++k)
        x[k] = bf16(x[k] + y[k]);
    }
    if (t < prompt - 1) continue;
    nu.rmsnorm(x.data(), m.final_norm.data(), o.data(), d);
    nu.matvec(m.lm_head.data(), o.data(), logits.data(), c.vocab, d);
    tr.logp.emplace_back(static_cast<std::size_t>(c.vocab));
    std::vector<float>& lp = tr.logp.back();
    log_softmax(logits.data(), c.vocab, lp.data());
    const double u = unit(splitmix(sample_seed ^ (static_cast<std::uint64_t>(t) * 0x9e37ull)));
    double acc = 0.0;
    int next = c.vocab - 1;
    for (int v = 0; v < c.vocab; ++v) {
      acc += std::exp(static_cast<double>(lp[v]));
      if (u < acc) {
        next = v;
        break;
      }
    }
    tokens.push_back(next);
  }
  return tr;
}

} // namespace demo
