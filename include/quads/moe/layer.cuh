// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The fused MoE expert-MLP layer on the GPU (nvcc only): routing -> input quantization
//!        -> row gather -> grouped gate_up GEMM (alpha, SwiGLU, NVFP4 h [+ RAC residual]) ->
//!        grouped down GEMM (alpha, top-k weight) -> deterministic combine. No host
//!        synchronisation: `forward` can be captured in a CUDA graph.
//!
//! Stages, policies and numerics: quads/moe/layer.hpp; host reference: quads/moe/reference.hpp.
//! @code
//!   using namespace quads::moe;
//!   auto plan = plan_layer<layer_policy::quads_rac>(T, shape, routing_cfg, gu_selected,
//!   dn_selected);
//!   // workspace: plan.workspace_bytes of device memory (256-byte aligned)
//!   forward(plan, weights, numerics, io, workspace, stream);
//! @endcode
//! Kernels enqueued (W4A4): routing (1 kernel at decode sizes, else 3-5), gather + quantize x
//! (1), gate_up grouped GEMM (mainloop + epilogue), down grouped GEMM (mainloop + epilogue),
//! combine (1). The bf16 policy uses a plain warp-per-output reference GEMM kernel (fp32
//! accumulation, no tensor cores; for tests, not for speed) with the same epilogue chains.
#pragma once

#if !defined(__CUDACC__)
#  error "quads/moe/layer.cuh needs nvcc (CUDA C++)"
#endif

#include <quads/compensation/rac.cuh>
#include <quads/gemm/chunk_tiling.cuh>
#include <quads/gemm/decode.cuh>
#include <quads/gemm/grouped.cuh>
#include <quads/gemm/pair_coding.cuh>
#include <quads/kernels/common.cuh>
#include <quads/kernels/quantize.cuh>
#include <quads/moe/layer.hpp>
#include <quads/moe/routing.cuh>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace quads::moe {

//! The byte form of the NVFP4 expert stacks (`layer_weights_view::form`).
enum class expert_weight_form : std::uint8_t {
  row_major, //!< as quantized: codes `[E, N, K / 2]`, linear scales `[E, N, K / 16]`
  //! `gemm::chunk_tiled<gemm::pair_coded<nvfp4>>` (fp16 lanes; N % 16 == 0, K % 128 == 0 for
  //! both GEMMs), made by `make_tiled_pair_weights_async` once per weight sync: the faster
  //! decode form (H200, 07:15 UTC: grouped GEMMs 17-24 % faster at T = 1 and 16). The W4A4
  //! policies only (W4A16's bf16 activations need bf16 lanes).
  tiled_pair,
};

//! Expert weights in device memory. NVFP4 policies: `gate_up` `[E, 2I, H]` (gate/up rows
//! interleaved) and `down` `[E, H, I]` packed codes + scales in byte form `form` + one tensor
//! scale per expert. bf16 policy: `gate_up_bf16` / `down_bf16` of the same shapes.
struct layer_weights_view {
  const std::uint8_t* gate_up = nullptr;
  const std::uint8_t* gate_up_scales = nullptr;
  const tensor_scale* gate_up_ts = nullptr;
  const std::uint8_t* down = nullptr;
  const std::uint8_t* down_scales = nullptr;
  const tensor_scale* down_ts = nullptr;
  const __nv_bfloat16* gate_up_bf16 = nullptr;
  const __nv_bfloat16* down_bf16 = nullptr;
  expert_weight_form form = expert_weight_form::row_major;
};

//! Enqueues the `expert_weight_form::tiled_pair` copy of one row-major NVFP4 expert stack
//! (`experts` matrices `[N, K]`: codes and linear scales) into `codes_out` / `scales_out` (same
//! sizes, not overlapping the inputs, 16-byte aligned): chunk tiling, then pair coding in place
//! (they commute). Refusals (N % 16, K % 128, alignment) return cudaErrorInvalidValue with a
//! message, nothing enqueued; never synchronises.
inline cudaError_t make_tiled_pair_weights_async(const std::uint8_t* codes,
                                                 const std::uint8_t* scales,
                                                 std::uint8_t* codes_out, std::uint8_t* scales_out,
                                                 int N, int K, int experts, cudaStream_t stream) {
  if (const cudaError_t e =
          gemm::tile_chunks_async(codes, scales, codes_out, scales_out, N, K, experts, stream);
      e != cudaSuccess)
    return e;
  const std::size_t bytes = static_cast<std::size_t>(experts) * static_cast<std::size_t>(N) *
                            static_cast<std::size_t>(K) / 2;
  return gemm::encode_pair_coded_async(codes_out, codes_out, bytes, stream);
}

//! Calibrated scales and RAC channel sets in device memory. `h_scales`: one entry (`h_mode =
//! tensor`) or E (`expert`). QUADS: `gate_up_sel` (one set, K = H, unpermuted: `order` null),
//! `down_slots` `[E, I / B]` slot tables (each expert selects `down_selected / B` blocks).
struct layer_numerics_view {
  const tensor_scale* x_scale = nullptr;
  const tensor_scale* h_scales = nullptr;
  epilogue::scale_source h_mode = epilogue::scale_source::tensor;
  compensation::kernels::device_selection gate_up_sel{};
  const int* down_slots = nullptr;
};

//! Inputs and outputs. `x` `[T, H]` bf16 (16-byte aligned), `logits` `[T, E]` fp32, `out`
//! `[T, H]` bf16; optional: `out_f32` `[T, H]` fp32, `h_pre` `[T * k, I]` fp32 (the SwiGLU output
//! before quantization, for tests), `routing` (external routing buffers; by default they live in
//! the workspace, see `routing_in`).
struct layer_io {
  const __nv_bfloat16* x = nullptr;
  const float* logits = nullptr;
  __nv_bfloat16* out = nullptr;
  float* out_f32 = nullptr;
  float* h_pre = nullptr;
  //! Profiling hook (optional): 5 events recorded after routing, the input operand, gate_up,
  //! down and the combine, so a caller can time the stages of a direct (uncaptured) run.
  cudaEvent_t* stage_events = nullptr;
};

//! Grid choices of the two grouped GEMMs (split-K factor; 0 = the planner's choice, the
//! default). With the persistent decode-tile mainloop of e66311f, split-K 1 was the fastest at
//! every decode size of both models on the H200 (sweep in docs/history/moe.md, "4b. All
//! sizes"); the default stays with the planner, which belongs to the grouped GEMM and is being
//! reworked.
struct layer_tuning {
  gemm::decode_options gate_up{};
  gemm::decode_options down{};
  //! Kernel of both grouped GEMMs (`automatic`: the grouped launcher's rule; tests pick one).
  gemm::grouped_kernel kernel = gemm::grouped_kernel::automatic;
  //! Chain the W4A4 / W4A16 stages with programmatic dependent launch (sm_90) when the call has
  //! at least this many routed rows T * k (0: always; INT_MAX: never): each kernel's CTAs start
  //! while the previous stage finishes (the grouped GEMMs read the routing offsets and prefetch
  //! their first weight chunks before waiting). `QUADS_MOE_PDL` (a `layer_plan::programmatic`
  //! mask) overrides it in a whole process.
  int programmatic_min_rows = 0;
  //! Below this many routed rows the grouped GEMMs release the next kernel only after their
  //! first mainloop (`grouped_plan::late_release`), from it at entry. Measured on an H100
  //! (docs/history/moe.md, "Twenty-fifth session"): at 8 and 32 rows the down GEMM's CTAs
  //! placed while the gate_up grid (one wave) runs cost 3-8 us; placed as it ends they gain
  //! 0.2-2.7 us over no overlap. From 128 rows the entry release is 0.4-1.3 us faster.
  int early_release_min_rows = 64;
  //! The routing writes the grouped GEMMs' m-tile table (one 16-byte entry per m-tile slot) and
  //! both GEMMs read their m-tile from it, instead of every CTA reading the E + 1 offsets, scanning
  //! them and searching its m-tile (docs/moe.md, "The m-tile table"). `QUADS_MOE_TILE_TABLE` =
  //! 0 / 1 overrides it in a whole process (A/B runs).
  bool m_tile_table = true;
};

//! The launch plan of one layer call (host only). Workspace regions are 256-byte aligned offsets.
template <layer_policy P>
struct layer_plan {
  layer_shape shape{};
  int tokens = 0;
  int rows = 0;        //!< T * k grouped rows
  int gu_selected = 0; //!< QUADS: |S| of the gate_up set (channels of H)
  int dn_selected = 0; //!< QUADS: |S| per expert of the down sets (channels of I)
  routing_plan routing{};
  gemm::grouped_plan gu{}, dn{};
  std::size_t off_routing = 0, off_routing_ws = 0, off_a1 = 0, off_a1s = 0, off_h = 0, off_hs = 0,
              off_y = 0, off_gemm = 0, off_m_tiles = 0;
  //! The routing writes an m-tile table (at `off_m_tiles`, `gu.stream_m_tiles` entries) that
  //! both grouped GEMMs read (`layer_tuning::m_tile_table`; their plans share its m-tiles).
  bool m_tile_table = false;
  std::size_t workspace_bytes = 0;
  //! Kernels launched programmatically (`layer_tuning::programmatic_min_rows`, the environment):
  //! a mask of the `pdl_*` bits.
  unsigned programmatic = 0;
  static constexpr unsigned pdl_gather = 1, pdl_gate_up = 2, pdl_down = 4, pdl_combine = 8,
                            pdl_all = 15;
  bool valid = false;
};

namespace detail {

//! `QUADS_MOE_PDL` = a mask of `layer_plan::programmatic` bits (0: off, 15: all) replaces the
//! tuning's (A/B runs in one binary); -1 when unset.
inline int pdl_stages_from_env() {
  return gemm::detail::env_override(
      "QUADS_MOE_PDL", [](const char* v) { return v != nullptr ? std::atoi(v) & 15 : -1; });
}

//! `QUADS_MOE_TILE_TABLE` = 0 / 1 replaces `layer_tuning::m_tile_table`; -1 when unset.
inline int m_tile_table_from_env() {
  return gemm::detail::env_override("QUADS_MOE_TILE_TABLE", [](const char* v) {
    return v == nullptr ? -1 : (std::atoi(v) != 0 ? 1 : 0);
  });
}

inline std::size_t align_up(std::size_t b) { return (b + 255) / 256 * 256; }

//! Routing arrays carved from the workspace: topk_expert, topk_weight, row_of_pair, pair_of_row,
//! expert_of_row, weight_of_row (rows each), offsets (E + 1).
inline routing_view routing_at(std::uint8_t* base, int rows, int experts) {
  const std::size_t c = align_up(sizeof(int) * static_cast<std::size_t>(rows));
  routing_view v;
  v.topk_expert = reinterpret_cast<int*>(base);
  v.topk_weight = reinterpret_cast<float*>(base + c);
  v.row_of_pair = reinterpret_cast<int*>(base + 2 * c);
  v.pair_of_row = reinterpret_cast<int*>(base + 3 * c);
  v.expert_of_row = reinterpret_cast<int*>(base + 4 * c);
  v.weight_of_row = reinterpret_cast<float*>(base + 5 * c);
  v.offsets = reinterpret_cast<int*>(base + 6 * c);
  (void)experts;
  return v;
}
inline std::size_t routing_bytes(int rows, int experts) {
  return 6 * align_up(sizeof(int) * static_cast<std::size_t>(rows)) +
         align_up(sizeof(int) * static_cast<std::size_t>(experts + 1));
}

//! dst row r = src row pair_of_row[r] / k: `row_bytes` (multiple of 8) + `scale_bytes` bytes.
template <int = 0> // a template, so the header can be in several TUs
__global__ void __launch_bounds__(256)
    gather_rows_kernel(const std::uint8_t* __restrict__ src, const std::uint8_t* __restrict__ src_s,
                       std::uint8_t* __restrict__ dst, std::uint8_t* __restrict__ dst_s, int rows,
                       int k, int row_bytes, int scale_bytes, const int* __restrict__ pair_of_row) {
  ::quads::kernels::detail::pdl_enter(); // launched programmatically after the routing
  const int warps = static_cast<int>(blockDim.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int r = static_cast<int>(blockIdx.x) * warps + static_cast<int>(threadIdx.x / 32); r < rows;
       r += static_cast<int>(gridDim.x) * warps) {
    const std::size_t t = static_cast<std::size_t>(__ldg(pair_of_row + r) / k);
    if (row_bytes % 16 == 0) {
      const uint4* s = reinterpret_cast<const uint4*>(src + t * row_bytes);
      uint4* d = reinterpret_cast<uint4*>(dst + static_cast<std::size_t>(r) * row_bytes);
      for (int i = lane; i < row_bytes / 16; i += 32)
        d[i] = __ldg(s + i);
    } else {
      const uint2* s = reinterpret_cast<const uint2*>(src + t * row_bytes);
      uint2* d = reinterpret_cast<uint2*>(dst + static_cast<std::size_t>(r) * row_bytes);
      for (int i = lane; i < row_bytes / 8; i += 32)
        d[i] = __ldg(s + i);
    }
    if (src_s != nullptr)
      for (int i = lane; i < scale_bytes; i += 32)
        dst_s[static_cast<std::size_t>(r) * scale_bytes + i] = __ldg(src_s + t * scale_bytes + i);
  }
}

//! Gathered input quantization (NVFP4 policies): block `kb` of token `t` of x is quantized once
//! and written into each of the token's k grouped `[Q(x) | Q(r_S)]` rows (`row_of_pair[t k + j]`).
//! Bytes equal quantizing x per token (`kernels::quantize` / `rac_quantize`: `residual_quantizer`
//! with the shared residual scale, same stochastic block indices) and then gathering rows. The
//! kernels' turbo path (`rac_turbo_block`, bit-identical) does the work; a NaN block or an
//! unusable multiplier table takes the core functors, whose per-thread chain is long at decode
//! sizes (a single CTA quantizing 128 RAC blocks with them took ~8 us on the H200).
template <bool Rac>
__global__ void __launch_bounds__(256)
    gather_quantize_kernel(const __nv_bfloat16* __restrict__ x, int tokens, int H,
                           const int* __restrict__ row_of_pair, int k,
                           const int* __restrict__ slot, int nsel,
                           const tensor_scale* __restrict__ scale, std::uint8_t* __restrict__ out,
                           std::uint8_t* __restrict__ out_s, std::uint64_t seed) {
  namespace kd = ::quads::kernels::detail;
  using Q = activation_quantizer;
  using RQ = compensation::residual_quantizer<Q>;
  static_assert(kd::turbo_applies<Q, __nv_bfloat16>, "quads: the layer's activation recipe");
  __shared__ float turbo_tab[kd::turbo_table_floats];
  const int nkb = H / block, cols = H + nsel * block;
  const std::size_t row_bytes = static_cast<std::size_t>(cols / 2);
  const int scols = cols / block;
  const tensor_scale ts = *scale;
  const kd::turbo_ctx tc = kd::make_turbo_ctx<Q>(ts, turbo_tab); // every thread; synchronises
  const long long total = static_cast<long long>(tokens) * nkb;
  for (long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int t = static_cast<int>(idx / nkb), kb = static_cast<int>(idx % nkb);
    const uint4* src =
        reinterpret_cast<const uint4*>(x + static_cast<std::size_t>(t) * H + kb * block);
    const kd::raw_block<__nv_bfloat16, block> raw{{__ldg(src), __ldg(src + 1)}};
    const int j = Rac ? __ldg(slot + kb) : -1;
    const bool selected = Rac && j >= 0;
    const std::uint64_t r_index =
        selected ? compensation::residual_block_index(tokens, nkb, nsel, t, j) : 0;
    kd::block_words<block> qx{}, qr{};
    // literal pack multipliers: at decode sizes a cold constant-bank read sits on the critical
    // path (kd::pack_mul); at prefill sizes the integer-pipe cost is small beside the GEMMs
    if (!compensation::kernels::detail::rac_turbo_block<Q, __nv_bfloat16,
                                                        kd::pack_mul::immediate>(
            raw, selected, tc, ts, seed, r_index, qx, qr)) {
      float xv[block];
      kd::widen(raw, xv);
      packed_block<nvfp4> px{}, pr{};
      RQ::quantize_shared(xv, ts, selected, seed, static_cast<std::uint64_t>(t) * nkb + kb,
                          r_index, px, pr);
      std::memcpy(qx.w, px.codes, 8);
      std::memcpy(qr.w, pr.codes, 8);
      qx.scale = px.scale;
      qr.scale = pr.scale;
    }
    // x, its scale and the slot table are older than the routing (the stream's previous kernel,
    // which a programmatic launch overlaps); its rows are not
    kd::pdl_enter();
    for (int p = 0; p < k; ++p) {
      const std::size_t r = static_cast<std::size_t>(__ldg(row_of_pair + t * k + p));
      std::uint8_t* row = out + r * row_bytes;
      *reinterpret_cast<uint2*>(row + kb * block / 2) = make_uint2(qx.w[0], qx.w[1]);
      out_s[r * scols + kb] = qx.scale;
      if (selected) {
        *reinterpret_cast<uint2*>(row + (H + j * block) / 2) = make_uint2(qr.w[0], qr.w[1]);
        out_s[r * scols + static_cast<std::size_t>(nkb + j)] = qr.scale;
      }
    }
  }
}

//! `quantize_expert_output`'s blocks on the kernels' turbo path: the table-free
//! `turbo_block_f32` for Q(h) and the residual, `dequantize_block` for QDQ(h) (the bytes of the
//! core functors); a NaN block, or a scale the turbo path does not admit, takes the core
//! functors. Measured effect (H200, `quads_decode_trace --moe`, Qwen3-30B-A3B gate_up at T = 1):
//! the QUADS epilogue 4.6 -> 4.2 us, so most of its time is not the block quantizer.
struct turbo_expert_blocks {
  using Q = activation_quantizer;
  QUADS_DEVICE_API void operator()(const float (&x)[block], tensor_scale ts, bool selected,
                                   std::uint64_t seed, std::uint64_t x_index,
                                   std::uint64_t r_index, packed_block<nvfp4>& qx,
                                   packed_block<nvfp4>& qr) const {
    namespace kd = ::quads::kernels::detail;
    kd::block_words<block> wx, wr;
    if (!kd::turbo_block_f32<Q>(x, ts, wx)) {
      compensation::residual_quantizer<Q>::quantize_shared(x, ts, selected, seed, x_index,
                                                           r_index, qx, qr);
      return;
    }
    if (selected) {
      float dq[block], res[block];
      kd::dequantize_block<Q>(wx, ts, dq);
#pragma unroll
      for (int i = 0; i < block; ++i)
        res[i] = quads::detail::add_rn(x[i], -dq[i]);
      if (kd::turbo_block_f32<Q>(res, ts, wr)) {
        std::memcpy(qr.codes, wr.w, 8);
        qr.scale = wr.scale;
      } else {
        qr = Q::quantize(res, ts, Q::bits_for(seed, r_index));
      }
    }
    std::memcpy(qx.codes, wx.w, 8);
    qx.scale = wx.scale;
  }
};

//! out[t][c] = sum_j y[row_of_pair[t k + j]][c] (fp32, j ascending); bf16 and optional fp32.
template <int = 0> // a template, so the header can be in several TUs
__global__ void __launch_bounds__(256)
    combine_kernel(const float* __restrict__ y, const int* __restrict__ row_of_pair, int tokens,
                   int k, int H, __nv_bfloat16* __restrict__ out, float* __restrict__ out_f32) {
  ::quads::kernels::detail::pdl_enter(); // launched programmatically after the down GEMM
  const int per_row = H / 4;
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<long long>(tokens) * per_row) return;
  const int t = static_cast<int>(idx / per_row), c = static_cast<int>(idx % per_row) * 4;
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int j = 0; j < k; ++j) {
    const std::size_t row = static_cast<std::size_t>(__ldg(row_of_pair + t * k + j));
    const float4 v = __ldg(reinterpret_cast<const float4*>(y + row * H + c));
    s.x = __fadd_rn(s.x, v.x);
    s.y = __fadd_rn(s.y, v.y);
    s.z = __fadd_rn(s.z, v.z);
    s.w = __fadd_rn(s.w, v.w);
  }
  const std::size_t o = static_cast<std::size_t>(t) * H + c;
  if (out_f32 != nullptr) *reinterpret_cast<float4*>(out_f32 + o) = s;
  __nv_bfloat162 lo = __floats2bfloat162_rn(s.x, s.y), hi = __floats2bfloat162_rn(s.z, s.w);
  *reinterpret_cast<__nv_bfloat162*>(out + o) = lo;
  *reinterpret_cast<__nv_bfloat162*>(out + o + 2) = hi;
}

//! bf16 policy: acc[r][n] = sum_k a[r][k] * w[e(r)][n][k] in fp32, one warp per output (plain
//! reference kernel; lanes stride K, then a butterfly).
template <int = 0> // a template, so the header can be in several TUs
__global__ void __launch_bounds__(256)
    bf16_grouped_kernel(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ w,
                        const int* __restrict__ expert_of_row, int rows, int N, int K,
                        float* __restrict__ acc) {
  const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= static_cast<long long>(rows) * N) return;
  const int r = static_cast<int>(warp / N), n = static_cast<int>(warp % N);
  const int e = __ldg(expert_of_row + r);
  const __nv_bfloat16* ar = a + static_cast<std::size_t>(r) * K;
  const __nv_bfloat16* wr = w + (static_cast<std::size_t>(e) * N + n) * K;
  float s = 0.0f;
  for (int k = lane; k < K; k += 32)
    s = __fadd_rn(s, __fmul_rn(__bfloat162float(ar[k]), __bfloat162float(wr[k])));
#pragma unroll
  for (int off = 16; off >= 1; off /= 2)
    s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, off));
  if (lane == 0) acc[static_cast<std::size_t>(r) * N + n] = s;
}

//! The epilogue chain over fp32 accumulators `[rows, N]` (bf16 policy).
template <class Epi, int W>
__global__ void __launch_bounds__(128)
    rows_epilogue_kernel(const float* __restrict__ acc, int rows, int N,
                         const __grid_constant__ typename Epi::params ep) {
  const int per_row = (N + W - 1) / W;
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<long long>(rows) * per_row) return;
  epilogue::fragment<W> f;
  f.row = static_cast<int>(idx / per_row);
  f.col = static_cast<int>(idx % per_row) * W;
  f.count = min(W, N - f.col);
  for (int i = 0; i < W; ++i) {
    f.v[i] = i < f.count ? acc[static_cast<std::size_t>(f.row) * N + f.col + i] : 0.0f;
    f.r[i] = 0.0f;
  }
  (void)epilogue::apply_node<Epi>(f, ep);
}

template <class Epi>
cudaError_t bf16_grouped(const __nv_bfloat16* a, const __nv_bfloat16* w, const int* expert_of_row,
                         int rows, int N, int K, float* acc, const typename Epi::arguments& epi,
                         cudaStream_t stream) {
  namespace kd = ::quads::kernels::detail;
  if (const char* why = epilogue::check_arguments<Epi>(epi, rows, N)) return kd::fail(why);
  const long long warps = static_cast<long long>(rows) * N;
  bf16_grouped_kernel<><<<static_cast<unsigned>((warps * 32 + 255) / 256), 256, 0, stream>>>(
      a, w, expert_of_row, rows, N, K, acc);
  constexpr int W = gemm::epilogue_fragment_width<Epi>;
  const long long frags = static_cast<long long>(rows) * ((N + W - 1) / W);
  rows_epilogue_kernel<Epi, W><<<static_cast<unsigned>((frags + 127) / 128), 128, 0, stream>>>(
      acc, rows, N, Epi::to_params(epi));
  return kd::after_launch();
}

} // namespace detail

//! The gate_up epilogue's quantize node on the GPU: `quantize_expert_output` with its blocks on
//! the turbo path (`detail::turbo_expert_blocks`, the same bytes); the host keeps the core path.
struct quantize_expert_output_gpu : quantize_expert_output<activation_quantizer> {
  template <int W>
  QUADS_API static epilogue::fragment<W> apply(const epilogue::fragment<W>& f,
                                               const params& p) noexcept {
#if defined(__CUDA_ARCH__)
    return apply_with<W>(f, p, detail::turbo_expert_blocks{});
#else
    return quantize_expert_output<activation_quantizer>::apply<W>(f, p);
#endif
  }

  //! The group form (`epilogue::group_node`): the 16 lanes of `g` hold one block, one output
  //! column each, and write the bytes of `apply` (`kernels::detail::turbo_lane_f32` for Q(h) and
  //! the residual; a block the lane path refuses is gathered and quantized by the group's first
  //! lane with `apply`'s blocks). The streaming GEMM epilogue runs it: one thread's block was a
  //! serial chain of ~1,000 instructions behind three dependent global loads.
  template <int W, int G>
  QUADS_DEVICE_API static epilogue::fragment<W> apply_group(const epilogue::fragment<W>& f,
                                                            const params& p,
                                                            epilogue::lane_group<G> g) {
    static_assert(W == 1 && G == block, "quads: one column per lane, one block per group");
    namespace kd = ::quads::kernels::detail;
    using Q = activation_quantizer;
    const int e = expert_of(p, f.row);
    const tensor_scale ts = tensor_scale_of(p, e);
    const int kb = f.col / block;
    const int j = slot_of(p, e, kb);
    const float x = f.count > 0 ? f.v[0] : 0.0f;
    std::uint8_t bx, br = 0;
    std::uint32_t cx, cr = 0;
    float dq, unused;
    // every lane of the group takes the same branches (the block's values decide)
    bool ok = kd::turbo_lane_f32<Q, G>(x, ts, g.mask, bx, cx, dq);
    if (ok && j >= 0)
      ok = kd::turbo_lane_f32<Q, G>(quads::detail::add_rn(x, -dq), ts, g.mask, br, cr, unused);
    if (!ok) {
      float v[block];
      kd::lane_gather<G>(x, g.mask, v);
      if (g.rank == 0) {
        packed_block<nvfp4> qx{}, qr{};
        detail::turbo_expert_blocks{}(v, ts, j >= 0, p.seed, x_index(p, f.row, kb),
                                      r_index(p, f.row, j), qx, qr);
        store_block(p, f.row, kb, j, qx, qr);
      }
      return f;
    }
    // byte rank / 2 of the block's codes from each even lane (no alignment needed)
    const auto store = [&](int cb, std::uint32_t code, std::uint8_t scale) {
      const std::uint32_t word = kd::lane_code_word<G>(code, g.rank, g.mask);
      if (g.rank % 2 == 0)
        codes_at(p, f.row, cb)[g.rank / 2] = static_cast<std::uint8_t>(word >> (4 * (g.rank % 8)));
      if (g.rank == 0) *scale_at(p, f.row, cb) = scale;
    };
    store(kb, cx, bx);
    if (j >= 0) store(p.cols / block + j, cr, br);
    return f;
  }
};
//! `gate_up_fp4_epilogue` with `quantize_expert_output_gpu` (same arguments), the chain
//! `forward` runs.
using gate_up_fp4_epilogue_gpu = epilogue::chain<epilogue::scale_alpha, epilogue::swiglu<>,
                                                 tap<float>, quantize_expert_output_gpu>;

//! Plans a layer call for `tokens` tokens (host only; the CUB temp size is a host query).
//! `gu_selected` / `dn_selected`: QUADS |S| of the gate_up set and of each down set (multiples of
//! 16; ignored by the other policies). `sm_count` sizes the grouped GEMMs' grids.
template <layer_policy P>
layer_plan<P> plan_layer(int tokens, const layer_shape& shape, const routing_config& rc,
                         int gu_selected = 0, int dn_selected = 0, int sm_count = 132,
                         const layer_tuning& tune = {}) {
  layer_plan<P> p;
  p.shape = shape;
  p.tokens = tokens;
  p.rows = tokens * shape.top_k;
  p.gu_selected = P == layer_policy::quads_rac ? gu_selected : 0;
  p.dn_selected = P == layer_policy::quads_rac ? dn_selected : 0;
  p.routing = plan_routing(tokens, rc);
  if (tokens <= 0 || rc.experts != shape.experts || rc.top_k != shape.top_k || shape.hidden <= 0 ||
      shape.intermediate <= 0)
    return p;
  const int H = shape.hidden, I = shape.intermediate, n = p.rows;
  const std::size_t Hp = static_cast<std::size_t>(H + p.gu_selected);
  const std::size_t Ip = static_cast<std::size_t>(I + p.dn_selected);
  if constexpr (P != layer_policy::bf16) {
    p.gu = gemm::plan_grouped(n, 2 * I, H, shape.experts, false, tune.gate_up, sm_count);
    p.dn = gemm::plan_grouped(n, H, I, shape.experts, false, tune.down, sm_count);
    p.gu.kernel = tune.kernel;
    p.dn.kernel = tune.kernel;
  }
  const int env_stages = detail::pdl_stages_from_env();
  p.programmatic = env_stages >= 0                        ? static_cast<unsigned>(env_stages)
                   : p.rows >= tune.programmatic_min_rows ? p.pdl_all
                                                          : 0u;
  p.gu.programmatic = (p.programmatic & p.pdl_gate_up) != 0;
  p.dn.programmatic = (p.programmatic & p.pdl_down) != 0;
  p.gu.late_release = p.dn.late_release = p.rows < tune.early_release_min_rows;
  if constexpr (P != layer_policy::bf16) {
    const int env_table = detail::m_tile_table_from_env();
    p.m_tile_table = (env_table >= 0 ? env_table == 1 : tune.m_tile_table) &&
                     p.gu.stream_tile_rows == p.dn.stream_tile_rows &&
                     p.gu.stream_m_tiles == p.dn.stream_m_tiles && p.gu.stream_m_tiles > 0;
  }
  std::size_t off = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t o = off;
    off += detail::align_up(bytes);
    return o;
  };
  p.off_routing = take(detail::routing_bytes(n, shape.experts));
  p.off_routing_ws = take(p.routing.workspace_bytes);
  if constexpr (fp4_activations(P)) {
    p.off_a1 = take(static_cast<std::size_t>(n) * Hp / 2);
    p.off_a1s = take(static_cast<std::size_t>(n) * Hp / block);
    p.off_h = take(static_cast<std::size_t>(n) * Ip / 2);
    p.off_hs = take(static_cast<std::size_t>(n) * Ip / block);
  } else {
    p.off_a1 = take(static_cast<std::size_t>(n) * H * 2);
    p.off_h = take(static_cast<std::size_t>(n) * I * 2);
  }
  p.off_y = take(static_cast<std::size_t>(n) * H * sizeof(float));
  std::size_t gemm_ws = 0;
  if constexpr (P != layer_policy::bf16) {
    gemm_ws =
        p.gu.workspace_bytes > p.dn.workspace_bytes ? p.gu.workspace_bytes : p.dn.workspace_bytes;
  } else {
    const std::size_t a = static_cast<std::size_t>(n) * 2 * I, b = static_cast<std::size_t>(n) * H;
    gemm_ws = (a > b ? a : b) * sizeof(float);
  }
  p.off_gemm = take(gemm_ws);
  if (p.m_tile_table)
    p.off_m_tiles =
        take(sizeof(gemm::grouped_m_tile) * static_cast<std::size_t>(p.gu.stream_m_tiles));
  p.workspace_bytes = off;
  p.valid = true;
  return p;
}

//! The routing arrays of a layer call inside its workspace (valid after `forward`).
template <layer_policy P>
routing_view routing_in(const layer_plan<P>& plan, void* workspace) {
  auto* base = static_cast<std::uint8_t*>(workspace);
  routing_view v = detail::routing_at(base + plan.off_routing, plan.rows, plan.shape.experts);
  if (plan.m_tile_table)
    v.m_tiles = gemm::m_tile_table_for(
        plan.gu, reinterpret_cast<gemm::grouped_m_tile*>(base + plan.off_m_tiles));
  return v;
}

//! Runs the layer (see the file comment). Returns the first failing step's error (message in
//! `quads::kernels::last_error_message()`); enqueues nothing after it.
template <layer_policy P>
cudaError_t forward(const layer_plan<P>& plan, const layer_weights_view& w,
                    const layer_numerics_view& num, const layer_io& io, void* workspace,
                    cudaStream_t stream) {
  namespace kd = ::quads::kernels::detail;
  if (!plan.valid) return kd::fail("quads: moe::forward: invalid plan (see plan_layer)");
  if (workspace == nullptr || !kd::aligned(workspace, 256))
    return kd::fail("quads: moe::forward: workspace (plan.workspace_bytes, 256-byte aligned)");
  if (io.x == nullptr || io.logits == nullptr || io.out == nullptr || !kd::aligned(io.x, 16) ||
      !kd::aligned(io.out, 16))
    return kd::fail("quads: moe::forward: x, logits and out are required (x, out 16-byte "
                    "aligned)");
  const layer_shape& s = plan.shape;
  const int T = plan.tokens, n = plan.rows, H = s.hidden, I = s.intermediate, E = s.experts;
  // the layer's own kernels (256 threads, no dynamic shared memory), programmatic where the plan
  // says (the GEMMs carry theirs in gu / dn); a refused launch is reported like the GEMMs'
  auto launch = [&](unsigned stage, auto kernel, unsigned grid, auto&&... args) {
    const cudaError_t e = kd::launch_kernel((plan.programmatic & stage) != 0, kernel, dim3(grid),
                                            dim3(256), 0, stream, args...);
    return e == cudaSuccess ? e : kd::fail(cudaGetErrorString(e), e);
  };
  const int k = s.top_k;
  if (H % 32 != 0 || I % 32 != 0)
    return kd::fail("quads: moe::forward: H and I must be multiples of 32");
  if constexpr (fp4_weights(P)) {
    if (w.gate_up == nullptr || w.gate_up_scales == nullptr || w.gate_up_ts == nullptr ||
        w.down == nullptr || w.down_scales == nullptr || w.down_ts == nullptr)
      return kd::fail("quads: moe::forward: NVFP4 weights, scales and tensor scales needed");
  } else {
    if (w.gate_up_bf16 == nullptr || w.down_bf16 == nullptr)
      return kd::fail("quads: moe::forward: bf16 weights needed");
  }
  if (w.form != expert_weight_form::row_major) {
    if (w.form != expert_weight_form::tiled_pair)
      return kd::fail("quads: moe::forward: unknown expert_weight_form");
    if (!fp4_activations(P))
      return kd::fail("quads: moe::forward: expert_weight_form::tiled_pair needs a W4A4 policy "
                      "(naive_w4a4 or quads_rac; its fp16 lanes cannot take bf16 activations)");
    if (H % 128 != 0 || I % 128 != 0)
      return kd::fail("quads: moe::forward: expert_weight_form::tiled_pair needs H and I to be "
                      "multiples of 128 (chunk tiling)");
  }
  if constexpr (fp4_activations(P)) {
    if (num.x_scale == nullptr || num.h_scales == nullptr)
      return kd::fail("quads: moe::forward: NVFP4 activations need x_scale and h_scales");
  }
  if constexpr (P == layer_policy::quads_rac) {
    if (num.gate_up_sel.channels != H || num.gate_up_sel.order != nullptr ||
        num.gate_up_sel.selected_blocks * block != plan.gu_selected ||
        (plan.dn_selected > 0 && num.down_slots == nullptr))
      return kd::fail("quads: moe::forward: QUADS needs an unpermuted gate_up selection of K = H "
                      "with plan.gu_selected channels and the down slot tables");
  }
  auto* base = static_cast<std::uint8_t*>(workspace);
  const routing_view rv = routing_in(plan, workspace);
  if (cudaError_t e = route(plan.routing, io.logits, rv, base + plan.off_routing_ws, stream);
      e != cudaSuccess)
    return e;
  auto mark = [&](int i) {
    if (io.stage_events != nullptr) cudaEventRecord(io.stage_events[i], stream);
  };
  mark(0);

  float* y = reinterpret_cast<float*>(base + plan.off_y);
  void* gws = base + plan.off_gemm;
  const unsigned gather_grid = static_cast<unsigned>((n + 7) / 8);
  const epilogue::alpha_source gu_alpha = [&] {
    epilogue::alpha_source a{};
    if constexpr (fp4_activations(P)) {
      a.a = num.x_scale;
      a.a_mode = epilogue::scale_source::tensor;
    }
    if constexpr (fp4_weights(P)) {
      a.w = w.gate_up_ts;
      a.w_mode = epilogue::scale_source::expert;
    }
    a.expert_of_row = rv.expert_of_row;
    return a;
  }();
  const epilogue::alpha_source dn_alpha = [&] {
    epilogue::alpha_source a{};
    if constexpr (fp4_activations(P)) {
      a.a = num.h_scales;
      a.a_mode = num.h_mode;
    }
    if constexpr (fp4_weights(P)) {
      a.w = w.down_ts;
      a.w_mode = epilogue::scale_source::expert;
    }
    a.expert_of_row = rv.expert_of_row;
    return a;
  }();
  const down_epilogue::arguments dn_epi{dn_alpha, {rv.weight_of_row}, {y, H}};

  if constexpr (fp4_activations(P)) {
    constexpr bool rac = P == layer_policy::quads_rac;
    const int Hp = H + plan.gu_selected, Ip = I + plan.dn_selected;
    std::uint8_t* a1 = base + plan.off_a1;
    std::uint8_t* a1s = base + plan.off_a1s;
    std::uint8_t* h = base + plan.off_h;
    std::uint8_t* hs = base + plan.off_hs;
    {
      const long long blocks = static_cast<long long>(T) * (H / block); // one thread per block
      const unsigned grid =
          static_cast<unsigned>(blocks / 256 + 1 < 132LL * 16 ? blocks / 256 + 1 : 132LL * 16);
      if (const cudaError_t e = launch(
              plan.pdl_gather, detail::gather_quantize_kernel<rac>, grid, io.x, T, H,
              static_cast<const int*>(rv.row_of_pair), k,
              static_cast<const int*>(rac ? num.gate_up_sel.slot : nullptr),
              plan.gu_selected / block, num.x_scale, a1, a1s, std::uint64_t{0});
          e != cudaSuccess)
        return e;
    }
    mark(1);
    // the two grouped GEMMs on weights of format WF with MMA lanes Lane (the weight form)
    auto gemms = [&]<class Lane, class WF>() -> cudaError_t {
      const gemm::fp4_expert_weights<WF> wgu{w.gate_up, w.gate_up_scales, E};
      const gemm::fp4_expert_weights<WF> wdn{w.down, w.down_scales, E};
      const gate_up_fp4_epilogue_gpu::arguments gu_epi{
          gu_alpha,
          {},
          {io.h_pre, I},
          {h, hs, num.h_scales, num.h_mode, rv.expert_of_row, rac ? num.down_slots : nullptr,
           plan.dn_selected, n, I, 0}};
      if constexpr (rac) {
        gemm::rac_activations<nvfp4> a{};
        a.data = a1;
        a.scales = a1s;
        a.slot = num.gate_up_sel.slot;
        a.selected = plan.gu_selected;
        a.residual = compensation::residual_scale::shared;
        a.slot_expert_stride = 0;
        if (cudaError_t e = gemm::grouped_gemm<Lane, gate_up_fp4_epilogue_gpu>(
                plan.gu, wgu, a, rv.offsets, gu_epi, gws, stream, rv.m_tiles);
            e != cudaSuccess)
          return e;
        mark(2);
        gemm::rac_activations<nvfp4> b{};
        b.data = h;
        b.scales = hs;
        b.slot = num.down_slots;
        b.selected = plan.dn_selected;
        b.residual = compensation::residual_scale::shared;
        b.slot_expert_stride = I / block;
        if (plan.dn_selected > 0) {
          if (cudaError_t e = gemm::grouped_gemm<Lane, down_epilogue>(
                  plan.dn, wdn, b, rv.offsets, dn_epi, gws, stream, rv.m_tiles);
              e != cudaSuccess)
            return e;
          mark(3);
        } else {
          if (cudaError_t e = gemm::grouped_gemm<Lane, down_epilogue>(
                  plan.dn, wdn, gemm::fp4_activations<nvfp4>{h, hs}, rv.offsets, dn_epi, gws,
                  stream, rv.m_tiles);
              e != cudaSuccess)
            return e;
          mark(3);
        }
      } else {
        if (cudaError_t e = gemm::grouped_gemm<Lane, gate_up_fp4_epilogue_gpu>(
                plan.gu, wgu, gemm::fp4_activations<nvfp4>{a1, a1s}, rv.offsets, gu_epi, gws,
                stream, rv.m_tiles);
            e != cudaSuccess)
          return e;
        mark(2);
        if (cudaError_t e = gemm::grouped_gemm<Lane, down_epilogue>(
                plan.dn, wdn, gemm::fp4_activations<nvfp4>{h, hs}, rv.offsets, dn_epi, gws, stream,
                rv.m_tiles);
            e != cudaSuccess)
          return e;
        mark(3);
      }
      return cudaSuccess;
    };
    using tiled_pair_t = gemm::chunk_tiled<gemm::pair_coded<nvfp4>>;
    if (const cudaError_t e = w.form == expert_weight_form::tiled_pair
                                  ? gemms.template operator()<gemm::fp16_lane, tiled_pair_t>()
                                  : gemms.template operator()<gemm::bf16_lane, nvfp4>();
        e != cudaSuccess)
      return e;
    (void)Ip;
    (void)Hp;
  } else {
    auto* a1 = reinterpret_cast<__nv_bfloat16*>(base + plan.off_a1);
    auto* h = reinterpret_cast<__nv_bfloat16*>(base + plan.off_h);
    if (const cudaError_t e = launch(
            plan.pdl_gather, detail::gather_rows_kernel<>, gather_grid,
            reinterpret_cast<const std::uint8_t*>(io.x),
            static_cast<const std::uint8_t*>(nullptr), reinterpret_cast<std::uint8_t*>(a1),
            static_cast<std::uint8_t*>(nullptr), n, k, H * 2, 0,
            static_cast<const int*>(rv.pair_of_row));
        e != cudaSuccess)
      return e;
    mark(1);
    const gate_up_bf16_epilogue::arguments gu_epi{
        gu_alpha, {}, {io.h_pre, I}, {reinterpret_cast<bf16_t*>(h), I}};
    if constexpr (P == layer_policy::w4a16) {
      const gemm::fp4_expert_weights<nvfp4> wgu{w.gate_up, w.gate_up_scales, E};
      const gemm::fp4_expert_weights<nvfp4> wdn{w.down, w.down_scales, E};
      if (cudaError_t e = gemm::grouped_gemm<gemm::bf16_lane, gate_up_bf16_epilogue>(
              plan.gu, wgu, gemm::dense_activations<gemm::bf16_lane>{a1}, rv.offsets, gu_epi, gws,
              stream, rv.m_tiles);
          e != cudaSuccess)
        return e;
      mark(2);
      if (cudaError_t e = gemm::grouped_gemm<gemm::bf16_lane, down_epilogue>(
              plan.dn, wdn, gemm::dense_activations<gemm::bf16_lane>{h}, rv.offsets, dn_epi, gws,
              stream, rv.m_tiles);
          e != cudaSuccess)
        return e;
      mark(3);
    } else {
      float* acc = static_cast<float*>(gws);
      if (cudaError_t e = detail::bf16_grouped<gate_up_bf16_epilogue>(
              a1, w.gate_up_bf16, rv.expert_of_row, n, 2 * I, H, acc, gu_epi, stream);
          e != cudaSuccess)
        return e;
      mark(2);
      if (cudaError_t e = detail::bf16_grouped<down_epilogue>(h, w.down_bf16, rv.expert_of_row, n,
                                                              H, I, acc, dn_epi, stream);
          e != cudaSuccess)
        return e;
      mark(3);
    }
  }
  const long long quads4 = static_cast<long long>(T) * (H / 4);
  if (const cudaError_t e = launch(plan.pdl_combine, detail::combine_kernel<>,
                                   static_cast<unsigned>((quads4 + 255) / 256),
                                   static_cast<const float*>(y),
                                   static_cast<const int*>(rv.row_of_pair), T, k, H, io.out,
                                   io.out_f32);
      e != cudaSuccess)
    return e;
  mark(4);
  return kd::after_launch();
}

} // namespace quads::moe
