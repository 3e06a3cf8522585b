// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief MoE routing on the GPU (nvcc only): top-k + grouping by expert, bit-identical to the
//!        host reference `quads::moe::route` (rules in quads/moe/routing.hpp).
//!
//! Launcher (error scheme of quads/kernels/common.cuh: returns `cudaError_t`, refuses bad
//! arguments without enqueuing, never synchronises, so it can be captured in a CUDA graph):
//! @code
//!   auto plan = quads::moe::plan_routing(tokens, cfg);   // host only; sizes the workspace
//!   quads::moe::route(plan, logits, view, workspace, stream);
//! @endcode
//! Paths (chosen on the host from `tokens`, so a captured graph keeps its path):
//! - fused decode path, `tokens <= fused_max_tokens` and `tokens * k <= 2048`: ONE kernel, one
//!   CTA of 256 threads: a warp per token computes the top-k (warp-order softmax sum, k rounds of
//!   a 64-bit key arg-max), or, up to `small_route_cta_topk_tokens` tokens with E <= 256, the
//!   whole CTA ranks one token's keys at a time (`cta_topk`); up to 256 pairs the pairs stay in
//!   shared memory and each one's row is its stable rank (counted), offsets by counting; above,
//!   `cub::BlockRadixSort` (stable, 8 keys per thread) over the pairs' expert ids, offsets by
//!   binary search over the sorted ids;
//! - `tokens * k <= 2048`: a top-k kernel (a warp per token) + the same single-CTA sort kernel;
//! - larger: the top-k kernel + `cub::DeviceRadixSort::SortPairs` (stable; keys = expert ids,
//!   log2(E + 1) bits) + a finalize kernel (row maps) and an offsets kernel.
#pragma once

#if !defined(__CUDACC__)
#  error "quads/moe/routing.cuh needs nvcc (CUDA C++)"
#endif

#include <quads/kernels/common.cuh>
#include <quads/moe/routing.hpp>

#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace quads::moe {

//! Routing outputs in device memory (`T * k` entries each, `offsets` E + 1); the layout of
//! `routing_result`.
struct routing_view {
  int* topk_expert = nullptr;
  float* topk_weight = nullptr;
  int* offsets = nullptr;
  int* row_of_pair = nullptr;
  int* pair_of_row = nullptr;
  int* expert_of_row = nullptr;
  float* weight_of_row = nullptr;
};

//! Sizes and path of one routing launch.
struct routing_plan {
  routing_config cfg{};
  int tokens = 0;
  int pairs = 0;
  bool fused = false;      //!< one kernel (decode sizes)
  bool single_cta = false; //!< single-CTA sort
  std::size_t sort_bytes = 0;
  std::size_t workspace_bytes = 0; //!< device bytes `route` needs (0 on the single-CTA paths)
};

inline constexpr int routing_cta_threads = 256;
inline constexpr int routing_sort_items = 8;
inline constexpr int routing_single_cta_pairs = routing_cta_threads * routing_sort_items; // 2048
inline constexpr int fused_max_tokens = 32;
//! Up to this many tokens the single-CTA decode path ranks each token's keys with the whole CTA
//! (one token after the other) instead of a warp per token (k arg-max rounds each, 8 tokens at a
//! time). Measured at T = 1 only (route stage 11.6 -> 7.2 us, Qwen3-30B-A3B shape, H200); the
//! bound is where 8 serial CTA passes are expected to cost about one warp's k rounds.
inline constexpr int small_route_cta_topk_tokens = 8;

namespace detail {

namespace kd = ::quads::kernels::detail;

QUADS_DEVICE_API std::uint64_t shfl_xor_u64(std::uint64_t v, int off) {
  const unsigned lo = __shfl_xor_sync(0xffffffffu, static_cast<unsigned>(v), off);
  const unsigned hi = __shfl_xor_sync(0xffffffffu, static_cast<unsigned>(v >> 32), off);
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

//! The softmax max and sum of token row `l` (E logits) in the fixed warp order of routing.hpp
//! (lane L over experts L, L + 32, ..., then a butterfly); every lane of the warp gets both.
struct softmax_stats {
  float max, sum;
};
QUADS_DEVICE_API softmax_stats warp_softmax_stats(const float* __restrict__ l, int E, int lane) {
  float mx = ::quads::detail::from_bits(0xff800000u), s = 0.0f;
  for (int e = lane; e < E; e += 32)
    mx = ::quads::detail::max_num(mx, score_logit(__ldg(l + e)));
#pragma unroll
  for (int off = 16; off >= 1; off /= 2)
    mx = ::quads::detail::max_num(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  for (int e = lane; e < E; e += 32)
    s = __fadd_rn(s, softmax_term(__ldg(l + e), mx));
#pragma unroll
  for (int off = 16; off >= 1; off /= 2)
    s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, off));
  return {mx, s};
}

//! The score of logit `le` before `finish_weights`: softmax with the token's max / sum, or
//! sigmoid.
QUADS_DEVICE_API float selected_score(float le, const softmax_stats& st,
                                      const routing_config& cfg) {
  return cfg.score == scoring::softmax ? ::quads::detail::div_rn(softmax_term(le, st.max), st.sum)
                                       : sigmoid_term(le);
}

//! One token's top-k by one warp (all lanes call it); lane 0 writes the pairs.
QUADS_DEVICE_API void warp_topk(const float* __restrict__ logits, int t, const routing_config& cfg,
                                int* __restrict__ topk_expert, float* __restrict__ topk_weight) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int E = cfg.experts, k = cfg.top_k;
  const float* l = logits + static_cast<std::size_t>(t) * E;
  softmax_stats st{0.0f, 0.0f};
  if (cfg.score == scoring::softmax) st = warp_softmax_stats(l, E, lane);
  std::uint32_t taken = 0; // bit i: expert lane + 32 i already selected
  float w[32];
  int sel[32];
  for (int j = 0; j < k; ++j) {
    std::uint64_t best = 0;
    int i = 0;
    for (int e = lane; e < E; e += 32, ++i) {
      if (taken & (1u << i)) continue;
      const std::uint64_t key = selection_key(__ldg(l + e), e);
      best = key > best ? key : best;
    }
#pragma unroll
    for (int off = 16; off >= 1; off /= 2) {
      const std::uint64_t o = shfl_xor_u64(best, off);
      best = o > best ? o : best;
    }
    const int e = key_expert(best);
    if (e % 32 == lane) taken |= 1u << (e / 32);
    const float le = __ldg(l + e);
    sel[j] = e;
    w[j] = selected_score(le, st, cfg);
  }
  if (lane == 0) {
    finish_weights(w, k, cfg.renormalize, cfg.scale);
    for (int j = 0; j < k; ++j) {
      topk_expert[static_cast<std::size_t>(t) * k + j] = sel[j];
      topk_weight[static_cast<std::size_t>(t) * k + j] = w[j];
    }
  }
}

//! One token's top-k by the whole CTA (every thread calls it; E <= blockDim.x): thread e ranks
//! its selection key among the E keys (keys are distinct), so the k winners are known after one
//! counting pass instead of k warp-wide arg-max rounds, which took ~17k cycles of one warp at
//! T = 1, E = 128 while the other warps waited (H200 ncu, 07:22 UTC). Scores (`selected_score`,
//! the same max / sum order) and `finish_weights` as `warp_topk`: the results are bit-identical.
//! Shared scratch: `s_key[E]`, `s_sel[k]`, `s_p[k]`, `s_stat[2]`.
QUADS_DEVICE_API void cta_topk(const float* __restrict__ logits, int t, const routing_config& cfg,
                               std::uint64_t* s_key, int* s_sel, float* s_p, float* s_stat,
                               int* __restrict__ topk_expert, float* __restrict__ topk_weight) {
  const int tid = static_cast<int>(threadIdx.x);
  const int E = cfg.experts, k = cfg.top_k;
  const float* l = logits + static_cast<std::size_t>(t) * E;
  float le = 0.0f;
  std::uint64_t key = 0;
  if (tid < E) {
    le = __ldg(l + tid);
    key = selection_key(le, tid);
    s_key[tid] = key;
  }
  if (tid < 32 && cfg.score == scoring::softmax) {
    const softmax_stats st = warp_softmax_stats(l, E, tid);
    if (tid == 0) {
      s_stat[0] = st.max;
      s_stat[1] = st.sum;
    }
  }
  __syncthreads();
  if (tid < E) {
    int rank = 0;
    for (int q = 0; q < E; ++q)
      rank += s_key[q] > key ? 1 : 0;
    if (rank < k) {
      s_sel[rank] = tid;
      s_p[rank] = selected_score(le, {s_stat[0], s_stat[1]}, cfg);
    }
  }
  __syncthreads();
  if (tid < k) { // each of the k threads finishes the k weights and keeps its rank's
    float w[32];
    for (int j = 0; j < k; ++j)
      w[j] = s_p[j];
    finish_weights(w, k, cfg.renormalize, cfg.scale);
    topk_expert[static_cast<std::size_t>(t) * k + tid] = s_sel[tid];
    topk_weight[static_cast<std::size_t>(t) * k + tid] = w[tid];
  }
  __syncthreads(); // the scratch is reused by the next token
}

template <int = 0> // a template, so the header can be in several TUs
__global__ void __launch_bounds__(128)
    topk_kernel(const float* __restrict__ logits, int tokens, const routing_config cfg,
                int* __restrict__ topk_expert, float* __restrict__ topk_weight) {
  const int t = static_cast<int>(blockIdx.x) * 4 + static_cast<int>(threadIdx.x) / 32;
  if (t < tokens) warp_topk(logits, t, cfg, topk_expert, topk_weight);
}

QUADS_DEVICE_API int lower_bound(const int* keys, int n, int value) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (keys[mid] < value)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

QUADS_API constexpr int key_bits(int experts) {
  int b = 0;
  while ((1 << b) <= experts)
    ++b; // room for the sentinel E
  return b;
}

//! Single-CTA stable grouping of `n <= 256 * Items` pairs (all 256 threads call it). Decode
//! sizes (n <= 256) use one item per thread, so the sort does not pay for 2048 empty slots.
template <int Items>
QUADS_DEVICE_API void cta_group(int n, int E, const int* topk_expert, const float* topk_weight,
                                const routing_view& v) {
  using sort_t = cub::BlockRadixSort<int, routing_cta_threads, Items, int>;
  __shared__ union {
    typename sort_t::TempStorage sort;
    int keys[routing_cta_threads * Items];
  } smem;
  const int tid = static_cast<int>(threadIdx.x);
  int keys[Items], vals[Items];
#pragma unroll
  for (int j = 0; j < Items; ++j) {
    const int idx = tid * Items + j;
    keys[j] = idx < n ? topk_expert[idx] : E;
    vals[j] = idx;
  }
  sort_t(smem.sort).Sort(keys, vals, 0, key_bits(E));
  __syncthreads();
#pragma unroll
  for (int j = 0; j < Items; ++j) {
    const int r = tid * Items + j;
    smem.keys[r] = keys[j];
    if (r < n) {
      const int p = vals[j];
      v.pair_of_row[r] = p;
      v.row_of_pair[p] = r;
      v.expert_of_row[r] = keys[j];
      v.weight_of_row[r] = topk_weight[p];
    }
  }
  __syncthreads();
  for (int e = tid; e <= E; e += routing_cta_threads)
    v.offsets[e] = lower_bound(smem.keys, n, e);
}

template <int Items>
__global__ void __launch_bounds__(routing_cta_threads)
    fused_route_kernel(const float* __restrict__ logits, int tokens, const routing_config cfg,
                       const routing_view v) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  for (int t = warp; t < tokens; t += routing_cta_threads / 32)
    warp_topk(logits, t, cfg, v.topk_expert, v.topk_weight);
  __syncthreads(); // the pairs (global memory, written by lane 0 of each warp) are visible
  cta_group<Items>(tokens * cfg.top_k, cfg.experts, v.topk_expert, v.topk_weight, v);
}

//! Decode-size routing (T * k <= 256 pairs, T <= fused_max_tokens) in one CTA without a sort:
//! the warps' top-k pairs stay in shared memory and each pair's row is its stable rank (pairs of
//! a lower expert, then pairs of the same expert with a lower index), the order the radix sort
//! gives. The CUB path it replaces cost ~13 us per call at T = 1 (H200 02:51 UTC stage timing,
//! launch gap included).
template <int = 0> // a template, so the header can be in several TUs
__global__ void __launch_bounds__(routing_cta_threads)
    small_route_kernel(const float* __restrict__ logits, int tokens, const routing_config cfg,
                       const routing_view v) {
  __shared__ int s_expert[routing_cta_threads];
  __shared__ float s_weight[routing_cta_threads];
  if (cfg.experts <= routing_cta_threads && tokens <= small_route_cta_topk_tokens) {
    __shared__ std::uint64_t s_key[routing_cta_threads];
    __shared__ int s_sel[32];
    __shared__ float s_p[32], s_stat[2];
    for (int t = 0; t < tokens; ++t)
      cta_topk(logits, t, cfg, s_key, s_sel, s_p, s_stat, s_expert, s_weight);
  } else {
    const int warp = static_cast<int>(threadIdx.x) / 32;
    for (int t = warp; t < tokens; t += routing_cta_threads / 32)
      warp_topk(logits, t, cfg, s_expert, s_weight);
    __syncthreads();
  }
  const int n = tokens * cfg.top_k, E = cfg.experts;
  const int p = static_cast<int>(threadIdx.x);
  if (p < n) {
    const int e = s_expert[p];
    int r = 0;
    for (int q = 0; q < n; ++q) {
      const int eq = s_expert[q];
      r += (eq < e || (eq == e && q < p)) ? 1 : 0;
    }
    const float w = s_weight[p];
    v.topk_expert[p] = e;
    v.topk_weight[p] = w;
    v.pair_of_row[r] = p;
    v.row_of_pair[p] = r;
    v.expert_of_row[r] = e;
    v.weight_of_row[r] = w;
  }
  for (int e = p; e <= E; e += routing_cta_threads) {
    int below = 0;
    for (int q = 0; q < n; ++q) below += s_expert[q] < e ? 1 : 0;
    v.offsets[e] = below;
  }
}

template <int Items>
__global__ void __launch_bounds__(routing_cta_threads)
    cta_group_kernel(int n, int E, const routing_view v) {
  cta_group<Items>(n, E, v.topk_expert, v.topk_weight, v);
}

template <int = 0> // a template, so the header can be in several TUs
__global__ void iota_kernel(int* out, int n) {
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n;
       i += static_cast<int>(gridDim.x * blockDim.x))
    out[i] = i;
}

template <int = 0> // a template, so the header can be in several TUs
__global__ void finalize_kernel(const int* __restrict__ sorted_keys,
                                const int* __restrict__ sorted_pairs, int n, int E,
                                const routing_view v) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    const int p = sorted_pairs[i];
    v.pair_of_row[i] = p;
    v.row_of_pair[p] = i;
    v.expert_of_row[i] = sorted_keys[i];
    v.weight_of_row[i] = v.topk_weight[p];
  }
  if (i <= E) v.offsets[i] = lower_bound(sorted_keys, n, i);
}

inline std::size_t align256(std::size_t b) { return (b + 255) / 256 * 256; }

} // namespace detail

//! Plans routing `tokens` tokens (host only, no device work; the CUB temp size is a host query).
//! An invalid config gives a plan that `route` refuses.
inline routing_plan plan_routing(int tokens, const routing_config& cfg) {
  routing_plan p;
  p.cfg = cfg;
  p.tokens = tokens;
  if (cfg.check() != nullptr || tokens < 0) return p;
  p.pairs = tokens * cfg.top_k;
  p.single_cta = p.pairs <= routing_single_cta_pairs;
  p.fused = p.single_cta && tokens <= fused_max_tokens;
  if (!p.single_cta) {
    std::size_t bytes = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int*>(nullptr),
                                    static_cast<int*>(nullptr), static_cast<const int*>(nullptr),
                                    static_cast<int*>(nullptr), p.pairs, 0,
                                    detail::key_bits(cfg.experts));
    p.sort_bytes = bytes;
    p.workspace_bytes = 3 * detail::align256(sizeof(int) * p.pairs) + detail::align256(bytes);
  }
  return p;
}

//! Routes `plan.tokens` tokens of `logits` (`[T, E]` fp32, device) into `v` (see the file
//! comment). `workspace`: `plan.workspace_bytes` bytes (may be null when 0), 256-byte aligned.
inline cudaError_t route(const routing_plan& plan, const float* logits, const routing_view& v,
                         void* workspace, cudaStream_t stream) {
  namespace kd = ::quads::kernels::detail;
  if (const char* why = plan.cfg.check()) return kd::fail(why);
  if (plan.tokens < 0 || plan.pairs != plan.tokens * plan.cfg.top_k)
    return kd::fail("quads: moe::route: the plan is inconsistent; make it with plan_routing");
  if (plan.tokens == 0) {
    if (v.offsets == nullptr) return kd::fail("quads: moe::route: offsets is null");
    if (const cudaError_t e =
            cudaMemsetAsync(v.offsets, 0, sizeof(int) * (plan.cfg.experts + 1), stream);
        e != cudaSuccess)
      return kd::fail(cudaGetErrorString(e), e);
    return kd::ok();
  }
  if (logits == nullptr || v.topk_expert == nullptr || v.topk_weight == nullptr ||
      v.offsets == nullptr || v.row_of_pair == nullptr || v.pair_of_row == nullptr ||
      v.expert_of_row == nullptr || v.weight_of_row == nullptr)
    return kd::fail("quads: moe::route: logits and every routing_view pointer must be non-null");
  if (plan.workspace_bytes > 0 && (workspace == nullptr || !kd::aligned(workspace, 256)))
    return kd::fail("quads: moe::route: workspace (plan.workspace_bytes, 256-byte aligned) "
                    "needed");
  const int n = plan.pairs, E = plan.cfg.experts;
  const bool small = n <= routing_cta_threads;
  if (plan.fused) {
    if (small)
      detail::small_route_kernel<>
          <<<1, routing_cta_threads, 0, stream>>>(logits, plan.tokens, plan.cfg, v);
    else
      detail::fused_route_kernel<routing_sort_items>
          <<<1, routing_cta_threads, 0, stream>>>(logits, plan.tokens, plan.cfg, v);
    return kd::after_launch();
  }
  detail::topk_kernel<><<<(plan.tokens + 3) / 4, 128, 0, stream>>>(logits, plan.tokens, plan.cfg,
                                                                   v.topk_expert, v.topk_weight);
  if (plan.single_cta) {
    if (small)
      detail::cta_group_kernel<1><<<1, routing_cta_threads, 0, stream>>>(n, E, v);
    else
      detail::cta_group_kernel<routing_sort_items><<<1, routing_cta_threads, 0, stream>>>(n, E, v);
    return kd::after_launch();
  }
  auto* base = static_cast<std::uint8_t*>(workspace);
  const std::size_t chunk = detail::align256(sizeof(int) * n);
  int* keys_out = reinterpret_cast<int*>(base);
  int* vals_in = reinterpret_cast<int*>(base + chunk);
  int* vals_out = reinterpret_cast<int*>(base + 2 * chunk);
  void* temp = base + 3 * chunk;
  detail::iota_kernel<><<<(n + 255) / 256, 256, 0, stream>>>(vals_in, n);
  std::size_t temp_bytes = plan.sort_bytes;
  if (const cudaError_t e =
          cub::DeviceRadixSort::SortPairs(temp, temp_bytes, v.topk_expert, keys_out, vals_in,
                                          vals_out, n, 0, detail::key_bits(E), stream);
      e != cudaSuccess)
    return kd::fail(cudaGetErrorString(e), e);
  const int m = (n > E + 1 ? n : E + 1);
  detail::finalize_kernel<><<<(m + 255) / 256, 256, 0, stream>>>(keys_out, vals_out, n, E, v);
  return kd::after_launch();
}

} // namespace quads::moe
