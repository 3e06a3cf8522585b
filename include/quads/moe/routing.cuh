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
//! - decode path, `tokens * k <= 2048` and T <= 256 (E <= 256; else T <= 64): ONE kernel, one
//!   CTA or a thread-block cluster of up to 8 (1024 threads when E <= 256 and T > 8, else 256), a
//!   warp per token computes the top-k (warp-order softmax sum, k rounds of a 64-bit key arg-max
//!   over keys held in registers); the pairs are grouped through per-expert 32-bit token masks
//!   read across the cluster (counts = popcounts, offsets by a block scan, rows by masked
//!   popcounts; `decode_route_kernel`; needs sm_90);
//! - `tokens * k <= 2048`: a top-k kernel (a warp per token) + a single-CTA kernel that sorts
//!   the pairs' expert ids with `cub::BlockRadixSort` (stable), offsets by binary search;
//! - larger: the top-k kernel + `cub::DeviceRadixSort::SortPairs` (stable; keys = expert ids,
//!   log2(E + 1) bits) + a finalize kernel (row maps and offsets).
#pragma once

#if !defined(__CUDACC__)
#  error "quads/moe/routing.cuh needs nvcc (CUDA C++)"
#endif

#include <quads/gemm/m_tile_table.cuh>
#include <quads/kernels/common.cuh>
#include <quads/moe/routing.hpp>

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace quads::moe {

//! Routing outputs in device memory (`T * k` entries each, `offsets` E + 1); the layout of
//! `routing_result`. `m_tiles` (optional): also the grouped GEMMs' m-tile table of the offsets
//! (`gemm::m_tile_table_for(plan, entries)` of a grouped plan over `T * k` rows; the decode path
//! writes it in its own kernel, the others with `gemm::write_m_tile_table` after grouping).
struct routing_view {
  int* topk_expert = nullptr;
  float* topk_weight = nullptr;
  int* offsets = nullptr;
  int* row_of_pair = nullptr;
  int* pair_of_row = nullptr;
  int* expert_of_row = nullptr;
  float* weight_of_row = nullptr;
  gemm::grouped_m_tile_table m_tiles{};
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
//! The decode path's largest cluster (portable size): T <= 8 * 32 tokens with E <= 256, else
//! T <= 8 * 8.
inline constexpr int route_cluster_ctas = 8;

namespace detail {

namespace kd = ::quads::kernels::detail;

//! The softmax max and sum of one token row in the fixed warp order of routing.hpp (lane L over
//! experts L, L + 32, ..., then a butterfly); `lg[i]` is lane L's logit of expert L + 32 i (only
//! those below E count). Every lane of the warp gets both.
struct softmax_stats {
  float max, sum;
};
template <int KeysPerLane>
QUADS_DEVICE_API softmax_stats warp_softmax_stats(const float (&lg)[KeysPerLane], int E, int lane) {
  float mx = ::quads::detail::from_bits(0xff800000u), s = 0.0f;
#pragma unroll
  for (int i = 0; i < KeysPerLane; ++i)
    if (lane + 32 * i < E) mx = ::quads::detail::max_num(mx, score_logit(lg[i]));
#pragma unroll
  for (int off = 16; off >= 1; off /= 2)
    mx = ::quads::detail::max_num(mx, __shfl_xor_sync(0xffffffffu, mx, off));
#pragma unroll
  for (int i = 0; i < KeysPerLane; ++i)
    if (lane + 32 * i < E) s = __fadd_rn(s, softmax_term(lg[i], mx));
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

//! The warp's largest 32-bit value (`redux.sync` from sm_80 on).
QUADS_DEVICE_API unsigned warp_max_u32(unsigned v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_max_sync(0xffffffffu, v);
#else
  for (int off = 16; off >= 1; off /= 2) {
    const unsigned o = __shfl_xor_sync(0xffffffffu, v, off);
    v = o > v ? o : v;
  }
  return v;
#endif
}

//! One token's top-k by one warp (all lanes call it; E <= 32 * KeysPerLane): `l` is the token's
//! E logits, `expert` / `weight` its k outputs in rank order. Lane L keeps the
//! selection keys of experts L, L + 32, ... in registers; each of the k rounds finds the warp's
//! largest key with two warp maxima (the logit word, then the expert word among the lanes whose
//! best key has that logit word) and clears it in its lane: no loads and no 64-bit shuffles
//! inside the rounds, which made the loop-and-reload version cost ~7 us per token at T = 16
//! (H200 stage breakdown, 2026-12-02 04:37 UTC). Lane j < k then scores rank j's expert and the
//! renormalisation sum is gathered left to right by shuffles: the operations and order of
//! `finish_weights`, so the weights are bit-identical to the host's.
template <int KeysPerLane>
QUADS_DEVICE_API void warp_topk_keys(const float* __restrict__ l, const routing_config& cfg,
                                     int* __restrict__ expert, float* __restrict__ weight) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int E = cfg.experts, k = cfg.top_k;
  float lg[KeysPerLane];
  std::uint64_t key[KeysPerLane]; // 0: no expert, or already selected (every real key is > 0)
#pragma unroll
  for (int i = 0; i < KeysPerLane; ++i) {
    const int e = lane + 32 * i;
    lg[i] = e < E ? __ldg(l + e) : 0.0f;
    key[i] = e < E ? selection_key(lg[i], e) : 0u;
  }
  softmax_stats st{0.0f, 0.0f};
  if (cfg.score == scoring::softmax) st = warp_softmax_stats(lg, E, lane);
  int mine = 0; // lane j: the expert of rank j
  for (int j = 0; j < k; ++j) {
    std::uint64_t b = key[0];
#pragma unroll
    for (int i = 1; i < KeysPerLane; ++i)
      b = key[i] > b ? key[i] : b;
    const unsigned hi = warp_max_u32(static_cast<unsigned>(b >> 32));
    const unsigned lo =
        warp_max_u32(static_cast<unsigned>(b >> 32) == hi ? static_cast<unsigned>(b) : 0u);
    const std::uint64_t win = (static_cast<std::uint64_t>(hi) << 32) | lo;
#pragma unroll
    for (int i = 0; i < KeysPerLane; ++i)
      key[i] = key[i] == win ? 0u : key[i];
    if (lane == j) mine = key_expert(win);
  }
  float w = lane < k ? selected_score(__ldg(l + mine), st, cfg) : 0.0f;
  if (cfg.renormalize) { // finish_weights: the sum left to right, then one division each
    float s = 0.0f;
    for (int j = 0; j < k; ++j)
      s = ::quads::detail::add_rn(s, __shfl_sync(0xffffffffu, w, j));
    w = s == 0.0f ? ::quads::detail::div_rn(1.0f, static_cast<float>(k))
                  : ::quads::detail::div_rn(w, s);
  }
  w = ::quads::detail::mul_rn(w, cfg.scale);
  if (lane < k) {
    expert[lane] = mine;
    weight[lane] = w;
  }
}

//! Calls `f(std::integral_constant<int, K>{})` with the fewest keys per lane K that hold E
//! experts (4, 8 or 32): each routing kernel is compiled for one K, so a launch fetches only the
//! code of its own key count (a kernel holding all three ran 6-9 us slower at T = 1 inside the
//! MoE layer, where other kernels evict it from the instruction caches; H200 06:48 UTC).
template <class F>
void with_keys_per_lane(int experts, F&& f) {
  if (experts <= 128)
    f(std::integral_constant<int, 4>{});
  else if (experts <= 256)
    f(std::integral_constant<int, 8>{});
  else
    f(std::integral_constant<int, 32>{});
}

template <int KeysPerLane>
__global__ void __launch_bounds__(128)
    topk_kernel(const float* __restrict__ logits, int tokens, const routing_config cfg,
                int* __restrict__ topk_expert, float* __restrict__ topk_weight) {
  const int t = static_cast<int>(blockIdx.x) * 4 + static_cast<int>(threadIdx.x) / 32;
  const std::size_t k = static_cast<std::size_t>(cfg.top_k);
  if (t < tokens)
    warp_topk_keys<KeysPerLane>(logits + static_cast<std::size_t>(t) * cfg.experts, cfg,
                                topk_expert + t * k, topk_weight + t * k);
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

//! Single-CTA stable grouping of `n <= routing_single_cta_pairs` pairs from `v.topk_expert` /
//! `v.topk_weight` (the top-k kernel's output): `cub::BlockRadixSort` over the expert ids.
template <int = 0> // a template, so the header can be in several TUs
__global__ void __launch_bounds__(routing_cta_threads)
    cta_group_kernel(int n, int E, const routing_view v) {
  constexpr int Items = routing_sort_items;
  const int* topk_expert = v.topk_expert;
  const float* topk_weight = v.topk_weight;
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

//! Decode-size routing (one CTA of `Threads / 32` tokens, or up to 8 of them in a thread-block
//! cluster when `Clustered`; T * k <= 2048 pairs) without a sort: a warp per token writes its top-k
//! pairs to its CTA's shared memory and sets bit t (the token's index in its CTA) of its experts'
//! masks; after a cluster barrier every CTA reads all masks (distributed shared memory): expert e's
//! count is the sum of the popcounts, the offsets their exclusive scan, and pair (t, j) of expert e
//! in CTA c goes to row `offsets[e] + popc(masks of e in CTAs < c) + popc(mask_c[e] & (2^t - 1))`:
//! its rank among the pairs of e in token order, the stable order a radix sort gives (a token
//! selects an expert at most once). Replaces a count over all pairs per pair (O(n^2)) up to 256
//! pairs and a top-k kernel + a single-CTA `cub::BlockRadixSort` above: route alone at T = 16 / 64
//! / 256 21.1 / 17.1 / 21.7 -> 8.5 / 11.2 / 11.8 us (Qwen3-30B-A3B shape, H200 06:41-07:30 UTC).
template <int KeysPerLane, int Threads, bool Clustered>
__global__ void __launch_bounds__(Threads)
    decode_route_kernel(const float* __restrict__ logits, int tokens, const routing_config cfg,
                        const routing_view v) {
  namespace cg = cooperative_groups;
  constexpr int cta_tokens = Threads / 32;
  constexpr int scan_items = 1024 / Threads; // E <= 1024 (routing_config::check)
  using scan_t = cub::BlockScan<int, Threads>;
  __shared__ int s_expert[cta_tokens * 32]; // k <= 32
  __shared__ float s_weight[cta_tokens * 32];
  __shared__ unsigned s_mask[1024];
  __shared__ int s_offset[1024], s_before[1024];
  __shared__ typename scan_t::TempStorage s_scan;
  // the MoE layer's next kernel (the input gather, launched programmatically) may place its CTAs
  // now; it waits for this grid before reading the routing
  ::quads::kernels::detail::pdl_release();
  const int c = Clustered ? static_cast<int>(cg::this_cluster().block_rank()) : 0;
  const int tid = static_cast<int>(threadIdx.x);
  const int E = cfg.experts, k = cfg.top_k;
  const int t0 = c * cta_tokens;
  const int mine = (tokens - t0 < cta_tokens ? tokens - t0 : cta_tokens) * k; // this CTA's pairs
  for (int e = tid; e < E; e += Threads)
    s_mask[e] = 0;
  const int warp = tid / 32;
  if (t0 + warp < tokens)
    warp_topk_keys<KeysPerLane>(logits + static_cast<std::size_t>(t0 + warp) * E, cfg,
                                s_expert + warp * k, s_weight + warp * k);
  __syncthreads();
  for (int p = tid; p < mine; p += Threads)
    atomicOr(&s_mask[s_expert[p]], 1u << (p / k));
  int count[scan_items];
  if constexpr (Clustered) {
    const cg::cluster_group cluster = cg::this_cluster();
    const int ctas = static_cast<int>(cluster.num_blocks());
    cluster.sync(); // every CTA's masks are complete
#pragma unroll
    for (int i = 0; i < scan_items; ++i) {
      const int e = tid * scan_items + i;
      int total = 0, before = 0;
      if (e < E)
        for (int q = 0; q < ctas; ++q) {
          const int pc = __popc(*cluster.map_shared_rank(s_mask + e, q));
          total += pc;
          before += q < c ? pc : 0;
        }
      count[i] = total;
      if (e < E) s_before[e] = before;
    }
    cluster.sync(); // no CTA leaves while another still reads its masks
  } else {
    __syncthreads();
#pragma unroll
    for (int i = 0; i < scan_items; ++i) {
      const int e = tid * scan_items + i;
      count[i] = e < E ? __popc(s_mask[e]) : 0;
    }
  }
  // with an m-tile table, each expert's m-tiles ride above its count (the counts sum to at most
  // 2048 pairs < 2^16): one scan gives the offsets and the table's first slots
  const gemm::grouped_m_tile_table& table = v.m_tiles;
  const bool tabled = c == 0 && table.entries != nullptr;
  int rows[scan_items];
#pragma unroll
  for (int i = 0; i < scan_items; ++i) {
    rows[i] = count[i];
    if (tabled) count[i] |= gemm::grouped_m_tiles(rows[i], table.tile_rows) << 16;
  }
  int total = 0;
  scan_t(s_scan).ExclusiveSum(count, count, total);
#pragma unroll
  for (int i = 0; i < scan_items; ++i) {
    const int e = tid * scan_items + i;
    if (e < E) {
      const int first = count[i] & 0xffff;
      s_offset[e] = first;
      if (c == 0) v.offsets[e] = first;
      if (tabled)
        gemm::detail::write_expert_m_tiles(table, e, first, first + rows[i], count[i] >> 16);
    }
  }
  if (c == 0 && tid == 0) v.offsets[E] = tokens * k;
  if (tabled) gemm::detail::write_empty_m_tiles(table, total >> 16, tid, Threads);
  __syncthreads();
  for (int p = tid; p < mine; p += Threads) {
    const int e = s_expert[p], gp = t0 * k + p;
    const int r =
        s_offset[e] + (Clustered ? s_before[e] : 0) + __popc(s_mask[e] & ((1u << (p / k)) - 1u));
    const float w = s_weight[p];
    v.topk_expert[gp] = e;
    v.topk_weight[gp] = w;
    v.pair_of_row[r] = gp;
    v.row_of_pair[gp] = r;
    v.expert_of_row[r] = e;
    v.weight_of_row[r] = w;
  }
}

//! Threads per CTA of the decode path: a warp per token, 1024 threads above 8 tokens where the
//! keys fit in few registers (E <= 256), else `routing_cta_threads`.
inline int decode_route_threads(int experts, int tokens) {
  return experts <= 256 && tokens > routing_cta_threads / 32 ? 1024 : routing_cta_threads;
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
  p.fused = p.single_cta &&
            tokens <= route_cluster_ctas * (detail::decode_route_threads(cfg.experts, tokens) / 32);
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
  if (v.m_tiles.entries != nullptr &&
      (v.m_tiles.tile_rows <= 0 || v.m_tiles.slots <= 0 || !kd::aligned(v.m_tiles.entries, 16)))
    return kd::fail("quads: moe::route: m_tiles needs positive tile_rows and slots and 16-byte "
                    "aligned entries (gemm::m_tile_table_for of a grouped plan)");
  if (plan.tokens == 0) {
    if (v.offsets == nullptr) return kd::fail("quads: moe::route: offsets is null");
    if (const cudaError_t e =
            cudaMemsetAsync(v.offsets, 0, sizeof(int) * (plan.cfg.experts + 1), stream);
        e != cudaSuccess)
      return kd::fail(cudaGetErrorString(e), e);
    if (v.m_tiles.entries != nullptr)
      return gemm::write_m_tile_table(v.offsets, plan.cfg.experts, 0, v.m_tiles, stream);
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
  if (plan.fused) {
    // one CTA where it holds every token (a plain launch: the cluster form costs ~1 us more),
    // else a cluster of them
    const int threads = detail::decode_route_threads(E, plan.tokens);
    const int ctas = (plan.tokens + threads / 32 - 1) / (threads / 32);
    cudaError_t e = cudaSuccess;
    detail::with_keys_per_lane(E, [&](auto keys) {
      constexpr int kpl = decltype(keys)::value;
      auto launch = [&](auto kernel) {
        e = kd::launch_clustered(kernel, ctas, 1, 1, threads, 0, stream, logits, plan.tokens,
                                 plan.cfg, v);
      };
      if constexpr (kpl <= 8) {
        if (threads == routing_cta_threads)
          launch(detail::decode_route_kernel<kpl, routing_cta_threads, false>);
        else if (ctas == 1)
          launch(detail::decode_route_kernel<kpl, 1024, false>);
        else
          launch(detail::decode_route_kernel<kpl, 1024, true>);
      } else {
        if (ctas == 1)
          launch(detail::decode_route_kernel<kpl, routing_cta_threads, false>);
        else
          launch(detail::decode_route_kernel<kpl, routing_cta_threads, true>);
      }
    });
    return e;
  }
  detail::with_keys_per_lane(E, [&](auto keys) {
    detail::topk_kernel<decltype(keys)::value><<<(plan.tokens + 3) / 4, 128, 0, stream>>>(
        logits, plan.tokens, plan.cfg, v.topk_expert, v.topk_weight);
  });
  // the m-tile table (when asked for) after the offsets of the paths below
  auto with_table = [&](cudaError_t e) {
    if (e != cudaSuccess || v.m_tiles.entries == nullptr) return e;
    return gemm::write_m_tile_table(v.offsets, E, n, v.m_tiles, stream);
  };
  if (plan.single_cta) {
    detail::cta_group_kernel<><<<1, routing_cta_threads, 0, stream>>>(n, E, v);
    return with_table(kd::after_launch());
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
  return with_table(kd::after_launch());
}

} // namespace quads::moe
