// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief MoE routing (host + device math, host reference): softmax / sigmoid top-k over router
//!        logits, optional renormalisation, and grouping of the (token, expert) pairs by expert.
//!
//! The rules below are the specification; `quads/moe/routing.cuh` implements them on the GPU and
//! `route()` here on the host, with bit-identical results (indices, offsets and weights):
//! - **Selection** ranks experts by their logit, not by the score, so the rounding of exp/sigmoid
//!   cannot create ties. Order: larger logit first; equal logits (+0 and -0 are equal): the
//!   **lower expert index** first; NaN ranks below every number, -inf included (NaNs among
//!   themselves by index). `selection_key` is the total order.
//! - **Scores**: softmax `p_e = exp(l_e - max) / sum`, or sigmoid `p_e = 1 / (1 + exp(-l_e))`,
//!   with `exp_rn` (a fixed fp32 polynomial, not the libm / CUDA `expf`, so host and device agree
//!   bit for bit). A NaN logit scores like -inf (p = 0), a +inf logit like FLT_MAX; if every
//!   logit is -inf or NaN, softmax gives every expert `1 / E`. The softmax sum has a fixed order,
//!   the one a warp computes: lane L sums experts L, L + 32, ... in order, then a butterfly over
//!   lanes (xor 16, 8, 4, 2, 1)
//!   (`warp_sum_order`).
//! - **Weights** of the k selected experts in rank order: `w_j = p_j`, or with `renormalize`
//!   `w_j = p_j / (p_0 + p_1 + ... + p_{k-1})` (sum left to right; a zero sum gives `1 / k`
//!   each), then `w_j * scale`. So weights are never NaN.
//! - **Grouping**: pair `p = t * k + j` (token t, rank j) goes to expert `e = experts[p]`. Grouped
//!   rows are sorted by expert, and within an expert by pair index (a stable sort), so expert e
//!   owns rows `[offsets[e], offsets[e + 1])`. `row_of_pair[p]` is p's row, `pair_of_row` its
//!   inverse, `expert_of_row` / `weight_of_row` the expert and weight of each row.
#pragma once

#include <quads/config.hpp>

#include <quads/detail/float_bits.hpp>

#include <cuda/std/cstdint>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <span>
#include <stdexcept>
#include <vector>

namespace quads::moe {

//! How router logits become scores.
enum class scoring : ::cuda::std::uint8_t {
  softmax, //!< over all E experts (Qwen3-MoE, Mixtral)
  sigmoid, //!< per expert (DeepSeek-V3 style, without its group limit and selection bias)
};

//! Routing settings. `scale`: a constant factor on the final weights (DeepSeek's
//! routed_scaling_factor; 1 by default).
struct routing_config {
  int experts = 0; //!< E
  int top_k = 0;   //!< k, 1 <= k <= E
  scoring score = scoring::softmax;
  bool renormalize = true;
  float scale = 1.0f;

  //! nullptr, or what is wrong.
  constexpr const char* check() const noexcept {
    if (experts <= 0 || experts > 1024) return "quads: moe routing: experts must lie in [1, 1024]";
    if (top_k <= 0 || top_k > experts || top_k > 32)
      return "quads: moe routing: top_k must lie in [1, min(E, 32)]";
    return nullptr;
  }
};

// ---------------------------------------------------------------------------------------------
// Deterministic fp32 math shared by host and device
// ---------------------------------------------------------------------------------------------

namespace detail {
using ::quads::detail::add_rn;
using ::quads::detail::from_bits;
using ::quads::detail::mul_rn;
using ::quads::detail::to_bits;

//! 2^n for n in [-126, 127] (exact).
QUADS_API constexpr float pow2(int n) noexcept {
  return from_bits(static_cast<::cuda::std::uint32_t>(n + 127) << 23);
}
} // namespace detail

//! e^x in fp32 from explicitly rounded operations only (host and device bit-identical; within
//! ~2 ulp of the true value): n = rne(x / ln 2) by the 1.5 * 2^23 trick, Cody-Waite reduction
//! with ln 2 split into 0x3f317200 + 0x35bfbe8e, degree-7 Taylor polynomial by Horner on
//! |r| <= 0.35, then two exact-power-of-two multiplies (so results down in the subnormal range
//! round once more, the same way on both sides). NaN -> NaN, x > 88.7228 -> inf, x < -104 -> 0.
QUADS_API constexpr float exp_rn(float x) noexcept {
  using namespace detail;
  if (::quads::detail::is_nan(x)) return x;
  if (x > 88.72283935546875f) return from_bits(0x7f800000u);
  if (x < -104.0f) return 0.0f;
  constexpr float log2e = 1.44269502162933349609375f;
  constexpr float shifter = 12582912.0f; // 1.5 * 2^23
  const float t = add_rn(mul_rn(x, log2e), shifter);
  const float nf = add_rn(t, -shifter);
  const int n = static_cast<int>(nf);
  constexpr float ln2_hi = 0.693145751953125f;        // 0x3f317200: n * ln2_hi is exact
  constexpr float ln2_lo = 1.428606765330187045e-06f; // 0x35bfbe8e
  float r = add_rn(x, -mul_rn(nf, ln2_hi));
  r = add_rn(r, -mul_rn(nf, ln2_lo));
  // 1 + r + r^2/2! + ... + r^7/7!
  float p = 1.98412698412698412698e-4f;
  p = add_rn(mul_rn(p, r), 1.38888888888888888889e-3f);
  p = add_rn(mul_rn(p, r), 8.33333333333333333333e-3f);
  p = add_rn(mul_rn(p, r), 4.16666666666666666667e-2f);
  p = add_rn(mul_rn(p, r), 1.66666666666666666667e-1f);
  p = add_rn(mul_rn(p, r), 0.5f);
  p = add_rn(mul_rn(p, r), 1.0f);
  p = add_rn(mul_rn(p, r), 1.0f);
  const int a = n / 2, b = n - a; // both in [-76, 64]: normal powers of two
  return mul_rn(mul_rn(p, pow2(a)), pow2(b));
}

//! 1 / (1 + e^-x) with `exp_rn` and one division (host and device bit-identical).
QUADS_API constexpr float sigmoid_rn(float x) noexcept {
  return ::quads::detail::div_rn(1.0f, detail::add_rn(1.0f, exp_rn(-x)));
}

//! The selection order as one 64-bit key (larger = ranked first): the logit's total order with
//! NaN lowest and -0 == +0 in the high word, the complement of the expert index in the low word
//! (equal logits: lower index first).
QUADS_API constexpr ::cuda::std::uint64_t selection_key(float logit, int expert) noexcept {
  ::cuda::std::uint32_t hi = 0; // NaN
  if (!::quads::detail::is_nan(logit)) {
    ::cuda::std::uint32_t u = detail::to_bits(logit);
    if ((u & 0x7fffffffu) == 0u) u = 0u; // -0 -> +0
    hi = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    // -inf (0xff800000) maps to 0x007fffff > 0, so every number ranks above NaN.
  }
  return (static_cast<::cuda::std::uint64_t>(hi) << 32) |
         static_cast<::cuda::std::uint64_t>(0xffffffffu -
                                            static_cast<::cuda::std::uint32_t>(expert));
}

//! The expert index stored in a `selection_key`.
QUADS_API constexpr int key_expert(::cuda::std::uint64_t key) noexcept {
  return static_cast<int>(0xffffffffu - static_cast<::cuda::std::uint32_t>(key & 0xffffffffu));
}

//! The logit as the scores see it: NaN -> -inf, +inf -> FLT_MAX (so a +inf logit takes the
//! whole softmax mass instead of making every weight NaN).
QUADS_API constexpr float score_logit(float logit) noexcept {
  if (::quads::detail::is_nan(logit)) return detail::from_bits(0xff800000u);
  return logit == detail::from_bits(0x7f800000u) ? ::quads::detail::flt_max : logit;
}

//! `exp(l - max)` of one softmax term (`max` over the score logits; -inf max: every term 1).
QUADS_API constexpr float softmax_term(float logit, float max) noexcept {
  const float l = score_logit(logit);
  if (max == detail::from_bits(0xff800000u)) return 1.0f;
  if (l == detail::from_bits(0xff800000u)) return 0.0f;
  return exp_rn(detail::add_rn(l, -max));
}

//! The score of a sigmoid-routed expert (NaN logit -> 0).
QUADS_API constexpr float sigmoid_term(float logit) noexcept {
  return sigmoid_rn(score_logit(logit));
}

//! `w_j * scale` after optional renormalisation over the k selected scores (rank order).
template <int MaxK>
QUADS_API constexpr void finish_weights(float (&w)[MaxK], int k, bool renormalize,
                                        float scale) noexcept {
  if (renormalize) {
    float s = 0.0f;
    for (int j = 0; j < k; ++j)
      s = detail::add_rn(s, w[j]);
    // all k scores 0 (e.g. sigmoid of -inf / NaN logits): 1/k each instead of 0/0
    for (int j = 0; j < k; ++j)
      w[j] = s == 0.0f ? ::quads::detail::div_rn(1.0f, static_cast<float>(k))
                       : ::quads::detail::div_rn(w[j], s);
  }
  for (int j = 0; j < k; ++j)
    w[j] = detail::mul_rn(w[j], scale);
}

// ---------------------------------------------------------------------------------------------
// Host reference
// ---------------------------------------------------------------------------------------------

//! The routing of T tokens (host vectors; the layout of the device `routing_view`).
struct routing_result {
  int tokens = 0;
  int experts = 0;
  int top_k = 0;
  std::vector<int> topk_expert;     //!< [T * k] expert of pair p = t * k + j (rank order)
  std::vector<float> topk_weight;   //!< [T * k] its weight
  std::vector<int> offsets;         //!< [E + 1]
  std::vector<int> row_of_pair;     //!< [T * k] grouped row of pair p
  std::vector<int> pair_of_row;     //!< [T * k] inverse
  std::vector<int> expert_of_row;   //!< [T * k]
  std::vector<float> weight_of_row; //!< [T * k]
  int pairs() const noexcept { return tokens * top_k; }
};

//! Sum of `v[0 .. n)` in the warp order of the file comment (lane partials, then butterfly).
inline float warp_sum_order(const float* v, int n) {
  float lane[32] = {};
  for (int i = 0; i < n; ++i)
    lane[i % 32] = detail::add_rn(lane[i % 32], v[i]);
  for (int off = 16; off >= 1; off /= 2) {
    float next[32];
    for (int l = 0; l < 32; ++l)
      next[l] = detail::add_rn(lane[l], lane[l ^ off]);
    std::copy(next, next + 32, lane);
  }
  return lane[0];
}

//! Groups pairs by expert (stable); fills offsets and the row maps of `r` from `topk_expert`.
inline void group_pairs(routing_result& r) {
  const int n = r.pairs(), E = r.experts;
  r.offsets.assign(static_cast<std::size_t>(E) + 1, 0);
  for (int p = 0; p < n; ++p)
    ++r.offsets[static_cast<std::size_t>(r.topk_expert[p]) + 1];
  for (int e = 0; e < E; ++e)
    r.offsets[e + 1] += r.offsets[e];
  std::vector<int> next(r.offsets.begin(), r.offsets.end() - 1);
  r.row_of_pair.assign(n, 0);
  r.pair_of_row.assign(n, 0);
  r.expert_of_row.assign(n, 0);
  r.weight_of_row.assign(n, 0.0f);
  for (int p = 0; p < n; ++p) { // pairs in index order: stable within an expert
    const int e = r.topk_expert[p];
    const int row = next[e]++;
    r.row_of_pair[p] = row;
    r.pair_of_row[row] = p;
    r.expert_of_row[row] = e;
    r.weight_of_row[row] = r.topk_weight[p];
  }
}

//! Routes `logits` (`[T, E]` row-major fp32). Throws `std::invalid_argument` on a bad config or
//! shape.
inline routing_result route(std::span<const float> logits, int tokens, const routing_config& cfg) {
  if (const char* why = cfg.check()) throw std::invalid_argument(why);
  const int E = cfg.experts, k = cfg.top_k;
  if (tokens < 0 || logits.size() != static_cast<std::size_t>(tokens) * E)
    throw std::invalid_argument("quads: moe::route: logits must hold tokens * experts values");
  routing_result r;
  r.tokens = tokens;
  r.experts = E;
  r.top_k = k;
  r.topk_expert.assign(static_cast<std::size_t>(tokens) * k, 0);
  r.topk_weight.assign(r.topk_expert.size(), 0.0f);
  std::vector<float> p(static_cast<std::size_t>(E));
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(E));
  for (int t = 0; t < tokens; ++t) {
    const float* l = logits.data() + static_cast<std::size_t>(t) * E;
    if (cfg.score == scoring::softmax) {
      float mx = detail::from_bits(0xff800000u);
      for (int e = 0; e < E; ++e)
        mx = ::quads::detail::max_num(mx, score_logit(l[e]));
      for (int e = 0; e < E; ++e)
        p[e] = softmax_term(l[e], mx);
      const float s = warp_sum_order(p.data(), E);
      for (int e = 0; e < E; ++e)
        p[e] = ::quads::detail::div_rn(p[e], s);
    } else {
      for (int e = 0; e < E; ++e)
        p[e] = sigmoid_term(l[e]);
    }
    for (int e = 0; e < E; ++e)
      keys[e] = selection_key(l[e], e);
    std::partial_sort(keys.begin(), keys.begin() + k, keys.end(), std::greater<>{});
    float w[32] = {};
    for (int j = 0; j < k; ++j)
      w[j] = p[static_cast<std::size_t>(key_expert(keys[j]))];
    finish_weights(w, k, cfg.renormalize, cfg.scale);
    for (int j = 0; j < k; ++j) {
      r.topk_expert[static_cast<std::size_t>(t) * k + j] = key_expert(keys[j]);
      r.topk_weight[static_cast<std::size_t>(t) * k + j] = w[j];
    }
  }
  group_pairs(r);
  return r;
}

} // namespace quads::moe
