// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Decode GEMM (nvcc only): FP4 weights dequantized in registers, `mma.sync.m16n8k16`
//!        with weights on M and tokens on N, fp32 accumulation, split-K, composable epilogue.
//!
//! Support matrix (first slice; see docs/gemm.md for what has and has not run on a GPU):
//! | weights              | activations                               | MMA        | arch        |
//! |----------------------|-------------------------------------------|------------|-------------|
//! | nvfp4 (UE4M3, 16)    | dense bf16 / fp16 (W4A16)                 | bf16/fp16  | sm_90 (a)   |
//! | nvfp4                | nvfp4 packed (emulated W4A4)              | bf16/fp16  | sm_90 (a)   |
//! | nvfp4                | nvfp4 + RAC residual (composition (b))    | bf16/fp16  | sm_90 (a)   |
//! | mxfp4 (UE8M0, 32)    | dense bf16, mxfp4 or nvfp4 packed         | bf16 only  | sm_90 (a)   |
//! | pair_coded<nvfp4>    | as nvfp4 (fp16 activations for W4A16)     | fp16 only  | sm_90 (a)   |
//! | chunk_tiled<nvfp4>, chunk_tiled<pair_coded<nvfp4>> | as the base format (streaming kernel only; N % 16, K % 128) | as the base | sm_90 (a) |
//! Scales: linear layout (`linear_scales`, row-major `[rows, K / B]`) for every operand (the
//! chunk-tiled formats keep their scales in the tile order of `quads/gemm/chunk_tiling.hpp`).
//! Fastest decode form (H200, docs/gemm.md): `chunk_tiled<pair_coded<nvfp4>>` with fp16 lanes.
//!
//! `y = epilogue(A W^T)`: `A` `[M, K]` (tokens), `W` `[N, K]` (packed E2M1, row-major, element 2i
//! in the low nibble), the layout of `quads::reference::quantized_tensor` and of the quantize
//! kernels. Both FP4 operands are dequantized to 16-bit values *without* their FP32 tensor
//! scales (exact, `quads/gemm/dequant.hpp`); the tensor scales are applied by the epilogue
//! (`epilogue::scale_alpha`). Tiling: `quads/gemm/decode_layout.hpp`.
//!
//! Launcher (error scheme of `quads/kernels/common.cuh`: returns `cudaError_t`, enqueues nothing
//! on a refused argument and `quads::kernels::last_error_message()` says why, never synchronises):
//! @code
//!   auto plan = quads::gemm::plan_decode(M, N, K, /*residual=*/false);
//!   // workspace: plan.workspace_bytes of device memory
//!   quads::gemm::decode_gemm<quads::gemm::bf16_lane, epi>(
//!       plan, quads::gemm::fp4_weights<quads::nvfp4>{w, w_scales},
//!       quads::gemm::fp4_activations<quads::nvfp4>{x, x_scales}, epi_args, workspace, stream);
//! @endcode
//! Enqueued work: with `reduction::atomic` a `cudaMemsetAsync` of the workspace, then the
//! mainloop kernel, then the epilogue kernel.
#pragma once

#if !defined(__CUDACC__)
#  error "quads/gemm/decode.cuh needs nvcc (CUDA C++)"
#endif

#include <quads/kernels/common.cuh>

#include <quads/config.hpp>

#include <quads/compensation/residual.hpp>
#include <quads/epilogue/chain.hpp>
#include <quads/epilogue/fragment.hpp>
#include <quads/epilogue/node.hpp>
#include <quads/epilogue/nodes.hpp>
#include <quads/gemm/chunk_tiling.hpp>
#include <quads/gemm/decode_layout.hpp>
#include <quads/gemm/dequant.hpp>
#include <quads/gemm/grouped_layout.hpp>
#include <quads/gemm/pair_coding.hpp>
#include <quads/scheme/schemes.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <vector>

namespace quads {

//! Epilogue element access for the CUDA 16-bit types (bit-identical to bf16_t / fp16_t).
template <>
struct element_traits<__nv_bfloat16> {
  QUADS_API static float to_float(__nv_bfloat16 x) noexcept {
    return detail::bf16_bits_to_float(__nv_bfloat16_raw(x).x);
  }
  QUADS_API static __nv_bfloat16 from_float(float x) noexcept {
    __nv_bfloat16_raw r;
    r.x = detail::float_to_bf16_bits(x);
    return __nv_bfloat16(r);
  }
};
template <>
struct element_traits<__half> {
  QUADS_API static float to_float(__half x) noexcept {
    return detail::fp16_bits_to_float(__half_raw(x).x);
  }
  QUADS_API static __half from_float(float x) noexcept {
    __half_raw r;
    r.x = detail::float_to_fp16_bits(x);
    return __half(r);
  }
};

namespace gemm {

// ---------------------------------------------------------------------------------------------
// Operands
// ---------------------------------------------------------------------------------------------

//! FP4 weights `[N, K]`: `data` N * K / 2 bytes (row-major packed codes), `scales` `[N, K / B]`
//! bytes (linear). Alignment: `data` 16 bytes (8 bytes suffice when K % 32 != 0).
template <block_scaled_format Format>
struct fp4_weights {
  using format = Format;
  const std::uint8_t* data = nullptr;
  const std::uint8_t* scales = nullptr;
};

//! Dense 16-bit activations `[M, K]` row-major (W4A16; or an emulated-W4A4 input that was
//! fake-quantized to bf16 without its tensor scale). `T` is `__nv_bfloat16` for bf16 lanes and
//! `__half` for fp16 lanes. Alignment: 16 bytes.
template <mma_lane Lane>
struct dense_activations {
  using element = std::conditional_t<std::is_same_v<Lane, bf16_lane>, __nv_bfloat16, __half>;
  const element* data = nullptr;
};

//! Packed FP4 activations `[M, K]` (the output of `quads::kernels::quantize`, linear scales):
//! `data` M * K / 2 bytes (4-byte aligned), `scales` `[M, K / B]`.
template <block_scaled_format Format>
struct fp4_activations {
  using format = Format;
  const std::uint8_t* data = nullptr;
  const std::uint8_t* scales = nullptr;
};

//! The RAC operand `[Q(x) | Q(r_S)]` `[M, K']`, K' = K + selected (the output of
//! `quads::compensation::kernels::rac_quantize`, linear scales `[M, K' / B]`), plus the slot table
//! (K / B ints: residual index of each block or -1; `make_selection_tables(sel).slot`) in device
//! memory. The residual products use the weight blocks already in registers (composition (b)).
//! `residual_scale::own` fills the second accumulator (add it with `epilogue::rac_residual`);
//! `shared` adds the residual products to the main accumulator.
template <block_scaled_format Format>
struct rac_activations {
  using format = Format;
  const std::uint8_t* data = nullptr;
  const std::uint8_t* scales = nullptr;
  const int* slot = nullptr;
  int selected = 0;  //!< |S| (a multiple of the block size)
  compensation::residual_scale residual = compensation::residual_scale::shared;
  //! Grouped GEMM only (`quads/gemm/grouped.cuh`; ignored by `decode_gemm`): ints between the
  //! slot tables of consecutive experts. 0: one table shared by all experts (gate_up: one
  //! channel set per layer); K / B: one table per expert (down), indexed by the row's expert.
  int slot_expert_stride = 0;
};

namespace detail {

template <class A>
struct activation_traits;
template <mma_lane Lane>
struct activation_traits<dense_activations<Lane>> {
  static constexpr bool fp4 = false, rac = false;
  static constexpr int block_size = 16;
  static constexpr int fold_log2 = 0;
};
template <block_scaled_format F>
struct activation_traits<fp4_activations<F>> {
  static constexpr bool fp4 = true, rac = false;
  static constexpr int block_size = F::block_size;
  using format = F;
};
template <block_scaled_format F>
struct activation_traits<rac_activations<F>> {
  static constexpr bool fp4 = true, rac = true;
  static constexpr int block_size = F::block_size;
  using format = F;
};

//! Everything the mainloop reads (trivially copyable).
struct decode_params {
  int M, N, K;
  int chunks, chunks_per_split;
  const std::uint8_t* w_data;
  const std::uint8_t* w_scales;
  const void* a_data;
  const std::uint8_t* a_scales;
  int a_row_bytes;   //!< FP4 activations: bytes per row (K/2, or K'/2 with RAC)
  int a_scale_cols;  //!< FP4 activations: scale bytes per row
  const int* slot;
  bool own;          //!< RAC: residual products to the second accumulator
  bool w_vec16;      //!< K % 32 == 0: 16-byte weight loads
  reduction mode;
  float fold;        //!< 2^(c_w + c_a)
  float* ws;
  float* ws_r;
  bool resident;     //!< streaming kernel: the CTA's whole K range of activations staged once
};

//! One `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}` with fp32 accumulation in place.
template <mma_lane Lane>
QUADS_DEVICE_API void mma_16816(float (&d)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  if constexpr (std::is_same_v<Lane, bf16_lane>) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

QUADS_DEVICE_API std::uint32_t word_of(const uint4& v, int w) {
  return w == 0 ? v.x : (w == 1 ? v.y : (w == 2 ? v.z : v.w));
}

//! The 16-byte smem slot of one staged activation octet (token m, logical k .. k + 8).
template <mma_lane Lane, class Act>
QUADS_DEVICE_API uint4 stage_octet(const decode_params& p, int m, int k) {
  using T = activation_traits<Act>;
  std::uint32_t out[4];
  if constexpr (!T::fp4) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(
        static_cast<const std::uint16_t*>(p.a_data) + static_cast<std::size_t>(m) * p.K + k));
    const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
    pair_octet_words(w, out);
  } else {
    using L = fp4_loader<typename T::format, Lane>;
    const std::uint8_t* row = static_cast<const std::uint8_t*>(p.a_data) +
                              static_cast<std::size_t>(m) * p.a_row_bytes;
    const std::uint32_t q = __ldg(reinterpret_cast<const std::uint32_t*>(row + k / 2));
    const std::uint8_t s = __ldg(p.a_scales + static_cast<std::size_t>(m) * p.a_scale_cols +
                                 k / T::block_size);
    L::dequant_word(q, L::multiplier2(s), out);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

//! The residual octet for logical k of token m (zero when k's block is not selected).
template <mma_lane Lane, class Act>
QUADS_DEVICE_API uint4 stage_residual(const decode_params& p, const int* slot, int m, int k) {
  using T = activation_traits<Act>;
  constexpr int B = T::block_size;
  const int j = __ldg(slot + k / B);
  if (j < 0) return make_uint4(0u, 0u, 0u, 0u);
  using L = fp4_loader<typename T::format, Lane>;
  const std::uint8_t* row = static_cast<const std::uint8_t*>(p.a_data) +
                            static_cast<std::size_t>(m) * p.a_row_bytes;
  const int kr = p.K + j * B + k % B;
  const std::uint32_t q = __ldg(reinterpret_cast<const std::uint32_t*>(row + kr / 2));
  const std::uint8_t s =
      __ldg(p.a_scales + static_cast<std::size_t>(m) * p.a_scale_cols + p.K / B + j);
  std::uint32_t out[4];
  L::dequant_word(q, L::multiplier2(s), out);
  return make_uint4(out[0], out[1], out[2], out[3]);
}

//! One work item of the mainloop: a CTA's 64 weight rows x up to 16 A rows x a chunk range.
struct decode_tile {
  int n_cta;        //!< first weight row of the CTA
  int m0, m_end;    //!< A rows [m0, m_end), at most tokens_per_cta of them
  int chunk_begin, chunk_end;
  int split;        //!< partial index in the workspace (deterministic reduction)
  const std::uint8_t* w_data;    //!< this item's weight matrix [N, K] (an expert's, if grouped)
  const std::uint8_t* w_scales;
  const int* slot;               //!< RAC slot table of this item's rows
};

//! Runs one work item (decode_layout.hpp); `act` / `res` are the CTA's shared staging slots.
//! Called by every thread of the CTA (it synchronises); `p.M` is the row count of the workspace.
template <mma_lane Lane, block_scaled_format WF, class Act>
__device__ __forceinline__ void run_decode_tile(const decode_params& p, const decode_tile& tile,
                                                uint4* act, uint4* res) {
  using DL = decode_layout;
  using T = activation_traits<Act>;
  using WL = weight_loader_t<WF, Lane>;
  constexpr int WB = WF::block_size;
  constexpr int blocks_per_lane = 32 / WB;  // weight blocks in one lane's 32 codes of a row

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int n0 = tile.n_cta + warp * DL::rows_per_warp;
  const int m0 = tile.m0;
  const int split = tile.split;
  const int chunk_begin = tile.chunk_begin;
  const int chunk_end = tile.chunk_end;
  const int tokens = min(DL::tokens_per_cta, tile.m_end - m0);
  const int ntiles = tokens > 8 ? 2 : 1;
  const bool warp_active = n0 < p.N;
  const std::size_t row_bytes = static_cast<std::size_t>(p.K / 2);
  const int w_scale_cols = p.K / WB;

  float acc[2][4] = {};
  float acc_r[2][4] = {};

  for (int slab = chunk_begin; slab < chunk_end; slab += DL::slab_chunks) {
    const int nch = min(DL::slab_chunks, chunk_end - slab);

    // Weights of the slab first (streamed, evict-first), so their latency overlaps the staging.
    uint4 wq[DL::slab_chunks][2];
    std::uint8_t sc[DL::slab_chunks][2][blocks_per_lane];
#pragma unroll
    for (int c = 0; c < DL::slab_chunks; ++c)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        wq[c][r] = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int b = 0; b < blocks_per_lane; ++b) sc[c][r][b] = 0;
        const int n = n0 + g + 8 * r;
        const int kseg = DL::word_k(slab + c, t, 0);
        if (c < nch && n < p.N && kseg < p.K) {
          const std::uint8_t* ptr = tile.w_data + static_cast<std::size_t>(n) * row_bytes + kseg / 2;
          if (p.w_vec16) {
            wq[c][r] = __ldcs(reinterpret_cast<const uint4*>(ptr));
          } else {
            const uint2 lo = __ldcs(reinterpret_cast<const uint2*>(ptr));
            const uint2 hi = kseg + 16 < p.K ? __ldcs(reinterpret_cast<const uint2*>(ptr + 8))
                                             : make_uint2(0u, 0u);
            wq[c][r] = make_uint4(lo.x, lo.y, hi.x, hi.y);
          }
          const std::uint8_t* srow = tile.w_scales + static_cast<std::size_t>(n) * w_scale_cols;
#pragma unroll
          for (int b = 0; b < blocks_per_lane; ++b)
            if (kseg + b * WB < p.K) sc[c][r][b] = __ldg(srow + (kseg + b * WB) / WB);
        }
      }

    __syncthreads();  // the previous slab's shared memory is consumed
    const int units = DL::tokens_per_cta * nch * 16;
    for (int u = static_cast<int>(threadIdx.x); u < units; u += DL::threads) {
      const int n = u / (nch * 16), oc = u % (nch * 16);
      const int c = oc / 16, o = oc % 16;
      const int m = m0 + n, k = (slab + c) * DL::chunk_k + 8 * o;
      uint4 v = make_uint4(0u, 0u, 0u, 0u), rv = v;
      if (m < tile.m_end && k < p.K) {
        v = stage_octet<Lane, Act>(p, m, k);
        if constexpr (T::rac) rv = stage_residual<Lane, Act>(p, tile.slot, m, k);
      }
      act[DL::stage_slot(c, n, o)] = v;
      if constexpr (T::rac) res[DL::stage_slot(c, n, o)] = rv;
    }
    __syncthreads();

    if (!warp_active) continue;
#pragma unroll
    for (int c = 0; c < DL::slab_chunks; ++c) {
      if (c >= nch) break;
      bool any_residual = false;
      if constexpr (T::rac) {
        const int kb0 = (slab + c) * DL::chunk_k / T::block_size;
        const int nkb = p.K / T::block_size;
        for (int b = 0; b < DL::chunk_k / T::block_size; ++b)
          if (kb0 + b < nkb && __ldg(tile.slot + kb0 + b) >= 0) any_residual = true;
      }
#pragma unroll
      for (int w = 0; w < DL::words_per_lane; ++w) {
        const int b = (w * 8) / WB;  // weight block of word w inside the lane's 32 codes
        std::uint32_t ag[4], ag8[4];
        WL::dequant_word(word_of(wq[c][0], w), WL::multiplier2(sc[c][0][b]), ag);
        WL::dequant_word(word_of(wq[c][1], w), WL::multiplier2(sc[c][1][b]), ag8);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          if (j >= ntiles) break;
          const uint4 bv = act[DL::act_slot(c, j, w, lane)];
          mma_16816<Lane>(acc[j], ag[0], ag8[0], ag[1], ag8[1], bv.x, bv.y);
          mma_16816<Lane>(acc[j], ag[2], ag8[2], ag[3], ag8[3], bv.z, bv.w);
          if constexpr (T::rac) {
            if (any_residual) {
              const uint4 br = res[DL::act_slot(c, j, w, lane)];
              if (p.own) {  // uniform branch; keeps both accumulators in registers
                mma_16816<Lane>(acc_r[j], ag[0], ag8[0], ag[1], ag8[1], br.x, br.y);
                mma_16816<Lane>(acc_r[j], ag[2], ag8[2], ag[3], ag8[3], br.z, br.w);
              } else {
                mma_16816<Lane>(acc[j], ag[0], ag8[0], ag[1], ag8[1], br.x, br.y);
                mma_16816<Lane>(acc[j], ag[2], ag8[2], ag[3], ag8[3], br.z, br.w);
              }
            }
          }
        }
      }
    }
  }

  if (!warp_active) return;
  // C fragment: c0, c1 at (row g, cols 2t, 2t+1), c2, c3 at row g + 8: rows are weight rows n,
  // cols are tokens m.
  const std::size_t MN = static_cast<std::size_t>(p.M) * static_cast<std::size_t>(p.N);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    if (j >= ntiles) break;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int n = n0 + g + (e >= 2 ? 8 : 0);
      const int m = m0 + 8 * j + 2 * t + (e & 1);
      if (n >= p.N || m >= tile.m_end) continue;
      const std::size_t o = static_cast<std::size_t>(m) * p.N + n;
      const float v = acc[j][e] * p.fold;  // exact: a power of two
      const float vr = acc_r[j][e] * p.fold;
      if (p.mode == reduction::deterministic) {
        p.ws[static_cast<std::size_t>(split) * MN + o] = v;
        if (T::rac && p.own) p.ws_r[static_cast<std::size_t>(split) * MN + o] = vr;
      } else {
        atomicAdd(p.ws + o, v);
        if (T::rac && p.own) atomicAdd(p.ws_r + o, vr);
      }
    }
  }
}

//! The dense mainloop: one CTA = 64 weight rows x 16 tokens x one split's chunks.
template <mma_lane Lane, block_scaled_format WF, class Act>
__global__ void __launch_bounds__(decode_layout::threads)
    decode_mainloop(const __grid_constant__ decode_params p) {
  using DL = decode_layout;
  __shared__ uint4 act[DL::slab_slots];
  __shared__ uint4 res[activation_traits<Act>::rac ? DL::slab_slots : 1];
  decode_tile tile;
  tile.n_cta = static_cast<int>(blockIdx.x) * DL::rows_per_cta;
  tile.m0 = static_cast<int>(blockIdx.y) * DL::tokens_per_cta;
  tile.m_end = min(tile.m0 + DL::tokens_per_cta, p.M);
  tile.split = static_cast<int>(blockIdx.z);
  tile.chunk_begin = tile.split * p.chunks_per_split;
  tile.chunk_end = min(tile.chunk_begin + p.chunks_per_split, p.chunks);
  tile.w_data = p.w_data;
  tile.w_scales = p.w_scales;
  tile.slot = p.slot;
  run_decode_tile<Lane, WF, Act>(p, tile, act, res);
}

//! The epilogue pass: sums the split partials in split order and runs the chain on fragments of
//! `W` consecutive columns of one row (one thread per fragment).
template <class Epi, int W>
__device__ __forceinline__ void epilogue_fragment_at(const float* ws, const float* ws_r, int M,
                                                     int N, int partials,
                                                     const typename Epi::params& ep, int m,
                                                     int col) {
  const std::size_t MN = static_cast<std::size_t>(M) * static_cast<std::size_t>(N);
  epilogue::fragment<W> f;
  f.row = m;
  f.col = col;
  f.count = min(W, N - col);
  const float* base = ws + static_cast<std::size_t>(m) * N + col;
#pragma unroll
  for (int i = 0; i < W; ++i) {
    f.v[i] = 0.0f;
    f.r[i] = 0.0f;
    if (i < f.count) {
      float s = base[i];
      for (int q = 1; q < partials; ++q) s = __fadd_rn(s, base[static_cast<std::size_t>(q) * MN + i]);
      f.v[i] = s;
      if constexpr (Epi::reads_residual) {
        const float* rb = ws_r + static_cast<std::size_t>(m) * N + col;
        float r = rb[i];
        for (int q = 1; q < partials; ++q) r = __fadd_rn(r, rb[static_cast<std::size_t>(q) * MN + i]);
        f.r[i] = r;
      }
    }
  }
  (void)epilogue::apply_node<Epi>(f, ep);
}

template <class Epi, int W>
__global__ void __launch_bounds__(128)
    decode_epilogue(const float* ws, const float* ws_r, int M, int N, int partials,
                    const __grid_constant__ typename Epi::params ep) {
  const int per_row = (N + W - 1) / W;
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<long long>(M) * per_row) return;
  const int m = static_cast<int>(idx / per_row);
  const int col = static_cast<int>(idx % per_row) * W;
  epilogue_fragment_at<Epi, W>(ws, ws_r, M, N, partials, ep, m, col);
}

//! The power of two the activation lanes are scaled down by (0 for dense activations).
template <class Act, mma_lane Lane>
consteval int activation_fold() {
  if constexpr (activation_traits<Act>::fp4)
    return fp4_loader<typename activation_traits<Act>::format, Lane>::fold_log2;
  else
    return 0;
}

template <class E>
struct reads_residual_of : std::bool_constant<epilogue::detail::reads_residual_of<E>()> {};

} // namespace detail

//! Width (columns) of one epilogue fragment for chain `Epi` (`epilogue::fragment_width`): 1 for
//! element-wise chains, so that a small-M decode epilogue spreads over many threads (with 16
//! columns the M = 1 epilogue of a CTA ran in 8 threads, ~1,000 SASS instructions deep: H200,
//! 02:40 UTC), else lcm(input width, 16).
template <class Epi>
inline constexpr int epilogue_fragment_width = epilogue::fragment_width<Epi>;

namespace detail {

// ---------------------------------------------------------------------------------------------
// The streaming decode mainloop (stream_layout): cp.async weight ring per warp, activation slabs,
// cluster split-K reduced through distributed shared memory, fused epilogue.
// ---------------------------------------------------------------------------------------------

QUADS_DEVICE_API std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
//! 16 bytes global -> shared, L1 bypassed, `src_bytes` (0 or 16) read and the rest zero-filled.
QUADS_DEVICE_API void cp_async16(std::uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}
QUADS_DEVICE_API void cp_async8(std::uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}
QUADS_DEVICE_API void cp_async4(std::uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}
QUADS_DEVICE_API void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
QUADS_DEVICE_API void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

#if defined(QUADS_DECODE_TRACE)
//! Diagnostic only (bench/gemm/decode_trace.cu defines QUADS_DECODE_TRACE): lane 0 of a warp
//! stores %globaltimer (ns) at `point` (< 32) and clock64 at `point + 32` into the CTA's 64
//! slots.
//! A CTA that streams several n-tiles (`MultiN`) stamps the phases of its first one only (the
//! later passes used to overwrite them, so "prologue" spanned the whole first pass).
static __device__ unsigned long long* decode_trace_buffer;
//! Trace slots per CTA: %globaltimer at `point`, clock64 at `point + decode_trace_points`.
inline constexpr int decode_trace_points = 32;
inline constexpr int decode_trace_slot_count = 2 * decode_trace_points;
//! The CTA's trace slots.
QUADS_DEVICE_API unsigned long long* decode_trace_slots() {
  const unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  return decode_trace_buffer + static_cast<unsigned long long>(decode_trace_slot_count) * cta;
}
QUADS_DEVICE_API void decode_trace(int point) {
  if (decode_trace_buffer == nullptr || threadIdx.x % 32 != 0) return;
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  unsigned long long* slots = decode_trace_slots();
  slots[point] = t;
  slots[decode_trace_points + point] = static_cast<unsigned long long>(clock64());
}
//! Stores the launch mode (resident, threads) into slots 13 and 14 of the CTA (thread 0).
QUADS_DEVICE_API void decode_trace_mode(bool resident) {
  if (decode_trace_buffer == nullptr || threadIdx.x != 0) return;
  unsigned long long* slots = decode_trace_slots();
  slots[13] = resident ? 1 : 0;
  slots[14] = blockDim.x;
}
#  define QUADS_DECODE_TRACE_MODE(resident) ::quads::gemm::detail::decode_trace_mode(resident)
#  define QUADS_DECODE_TRACE_POINT(point, cond) \
    do {                                        \
      if (cond) ::quads::gemm::detail::decode_trace(point); \
    } while (0)
#else
#  define QUADS_DECODE_TRACE_POINT(point, cond) ((void)0)
#  define QUADS_DECODE_TRACE_MODE(resident) ((void)0)
#endif

//! One staging unit's raw global data (loaded a slab ahead, dequantized when stored).
template <class Act>
struct staged_unit;
template <mma_lane Lane>
struct staged_unit<dense_activations<Lane>> {
  uint4 v;
};
template <block_scaled_format F>
struct staged_unit<fp4_activations<F>> {
  std::uint32_t q;
  std::uint8_t s;
};
template <block_scaled_format F>
struct staged_unit<rac_activations<F>> {
  std::uint32_t q, rq;
  std::uint8_t s, rs;
  bool sel;
};

template <mma_lane Lane, class Act>
QUADS_DEVICE_API staged_unit<Act> stage_load(const decode_params& p, const int* slot, int m,
                                             int k, bool valid) {
  using T = activation_traits<Act>;
  staged_unit<Act> u{};
  if (!valid) return u;
  if constexpr (!T::fp4) {
    u.v = __ldg(reinterpret_cast<const uint4*>(
        static_cast<const std::uint16_t*>(p.a_data) + static_cast<std::size_t>(m) * p.K + k));
  } else {
    constexpr int B = T::block_size;
    const std::uint8_t* row = static_cast<const std::uint8_t*>(p.a_data) +
                              static_cast<std::size_t>(m) * p.a_row_bytes;
    const std::uint8_t* srow = p.a_scales + static_cast<std::size_t>(m) * p.a_scale_cols;
    u.q = __ldg(reinterpret_cast<const std::uint32_t*>(row + k / 2));
    u.s = __ldg(srow + k / B);
    if constexpr (T::rac) {
      const int j = __ldg(slot + k / B);
      u.sel = j >= 0;
      if (u.sel) {
        const int kr = p.K + j * B + k % B;
        u.rq = __ldg(reinterpret_cast<const std::uint32_t*>(row + kr / 2));
        u.rs = __ldg(srow + p.K / B + j);
      }
    }
  }
  return u;
}

template <mma_lane Lane, class Act>
QUADS_DEVICE_API void stage_store(const staged_unit<Act>& u, uint4* act, uint4* res, int slot) {
  using T = activation_traits<Act>;
  std::uint32_t out[4];
  if constexpr (!T::fp4) {
    const std::uint32_t w[4] = {u.v.x, u.v.y, u.v.z, u.v.w};
    pair_octet_words(w, out);
  } else {
    using L = fp4_loader<typename T::format, Lane>;
    L::dequant_word(u.q, L::multiplier2(u.s), out);
  }
  act[slot] = make_uint4(out[0], out[1], out[2], out[3]);
  if constexpr (T::rac) {
    uint4 r = make_uint4(0u, 0u, 0u, 0u);
    if (u.sel) {
      using L = fp4_loader<typename T::format, Lane>;
      L::dequant_word(u.rq, L::multiplier2(u.rs), out);
      r = make_uint4(out[0], out[1], out[2], out[3]);
    }
    res[slot] = r;
  }
}

//! One piece of the streaming kernel's first activation fill: `octets` consecutive octets (8 k
//! each) of one token. Packed FP4 without RAC loads 32 k (four code words, their scale bytes)
//! per piece, so a resident fill needs few loads per thread; other operands reuse the unit of
//! `stage_load` / `stage_store` (one octet).
template <mma_lane Lane, class Act>
struct stage_piece {
  static constexpr int octets = 1;
  static constexpr int batch = 8;
  using raw = staged_unit<Act>;
  QUADS_DEVICE_API static raw load(const decode_params& p, const int* slot, int m, int k,
                                   bool valid) {
    return stage_load<Lane, Act>(p, slot, m, k, valid && k < p.K);
  }
  QUADS_DEVICE_API static void store(const raw& u, uint4* act, uint4* res, int chunk_base, int nt,
                                     int n, int piece) {
    stage_store<Lane, Act>(u, act, res, chunk_base + stream_layout::stage_slot(nt, 0, n, piece));
  }
};
template <mma_lane Lane, block_scaled_format F>
struct stage_piece<Lane, fp4_activations<F>> {
  static constexpr int octets = 4;
  static constexpr int batch = 4;
  struct raw {
    std::uint32_t q[4];
    std::uint8_t s[4];
  };
  QUADS_DEVICE_API static raw load(const decode_params& p, const int*, int m, int k, bool valid) {
    raw u{};
    if (!valid) return u;
    const std::uint8_t* row = static_cast<const std::uint8_t*>(p.a_data) +
                              static_cast<std::size_t>(m) * p.a_row_bytes;
    const std::uint8_t* srow = p.a_scales + static_cast<std::size_t>(m) * p.a_scale_cols;
#pragma unroll
    for (int o = 0; o < 4; ++o) {
      const int ko = k + 8 * o;
      if (ko < p.K) {  // K is a multiple of 16: an octet is wholly in or out
        u.q[o] = __ldg(reinterpret_cast<const std::uint32_t*>(row + ko / 2));
        if ((8 * o) % F::block_size == 0) u.s[o] = __ldg(srow + ko / F::block_size);
      }
    }
    return u;
  }
  QUADS_DEVICE_API static void store(const raw& u, uint4* act, uint4*, int chunk_base, int nt,
                                     int n, int piece) {
    using L = fp4_loader<F, Lane>;
    constexpr int per_scale = F::block_size / 8;  // octets sharing a scale byte
#pragma unroll
    for (int o = 0; o < 4; ++o) {
      std::uint32_t out[4];
      L::dequant_word(u.q[o], L::multiplier2(u.s[o / per_scale * per_scale]), out);
      act[chunk_base + stream_layout::stage_slot(nt, 0, n, 4 * piece + o)] =
          make_uint4(out[0], out[1], out[2], out[3]);
    }
  }
};

//! RAC: also four octets per piece, so a piece looks its one or two scale blocks' residual slots
//! up once (the one-octet unit looked each block's slot up twice, once per octet) and amortises
//! its index arithmetic over 32 k. The values and their placement are `stage_load` /
//! `stage_store`'s.
template <mma_lane Lane, block_scaled_format F>
struct stage_piece<Lane, rac_activations<F>> {
  static constexpr int octets = 4;
  static constexpr int batch = 4;
  static constexpr int B = F::block_size;
  static constexpr int blocks = 32 / B;  // scale blocks of a piece (k of a piece is 32-aligned)
  struct raw {
    std::uint32_t q[4], rq[4];
    std::uint8_t s[blocks], rs[blocks];
    bool sel[blocks];
  };
  QUADS_DEVICE_API static raw load(const decode_params& p, const int* slot, int m, int k,
                                   bool valid) {
    raw u{};
    if (!valid) return u;
    const std::uint8_t* row = static_cast<const std::uint8_t*>(p.a_data) +
                              static_cast<std::size_t>(m) * p.a_row_bytes;
    const std::uint8_t* srow = p.a_scales + static_cast<std::size_t>(m) * p.a_scale_cols;
    int j[blocks];
#pragma unroll
    for (int b = 0; b < blocks; ++b) {  // K is a multiple of B: a block is wholly in or out
      const int kb = k + b * B;
      j[b] = kb < p.K ? __ldg(slot + kb / B) : -1;
      if (kb < p.K) u.s[b] = __ldg(srow + kb / B);
    }
#pragma unroll
    for (int o = 0; o < 4; ++o) {
      const int ko = k + 8 * o;
      if (ko < p.K) u.q[o] = __ldg(reinterpret_cast<const std::uint32_t*>(row + ko / 2));
    }
#pragma unroll
    for (int b = 0; b < blocks; ++b) {
      u.sel[b] = j[b] >= 0;
      if (u.sel[b]) u.rs[b] = __ldg(srow + p.K / B + j[b]);
    }
#pragma unroll
    for (int o = 0; o < 4; ++o) {
      const int b = 8 * o / B;
      if (u.sel[b])
        u.rq[o] = __ldg(
            reinterpret_cast<const std::uint32_t*>(row + (p.K + j[b] * B + (8 * o) % B) / 2));
    }
    return u;
  }
  QUADS_DEVICE_API static void store(const raw& u, uint4* act, uint4* res, int chunk_base, int nt,
                                     int n, int piece) {
    using L = fp4_loader<F, Lane>;
#pragma unroll
    for (int o = 0; o < 4; ++o) {
      const int b = 8 * o / B;
      const int at = chunk_base + stream_layout::stage_slot(nt, 0, n, 4 * piece + o);
      std::uint32_t out[4];
      L::dequant_word(u.q[o], L::multiplier2(u.s[b]), out);
      act[at] = make_uint4(out[0], out[1], out[2], out[3]);
      uint4 r = make_uint4(0u, 0u, 0u, 0u);
      if (u.sel[b]) {
        L::dequant_word(u.rq[o], L::multiplier2(u.rs[b]), out);
        r = make_uint4(out[0], out[1], out[2], out[3]);
      }
      res[at] = r;
    }
  }
};

//! What the grouped scheduler reads (trivially copyable).
struct grouped_sched {
  const int* offsets;
  int experts;
  int max_rows;
  int splits;
  int n_tiles;
  std::size_t w_expert_bytes;        //!< N * K / 2
  std::size_t w_expert_scale_bytes;  //!< N * K / B
  int slot_stride;                   //!< ints between experts' RAC slot tables (0: shared)
  int tile_rows;                     //!< rows of one m-tile (16; the streaming kernel: 4, 8, 16)
};

//! Fills `off[0..E]` (offsets clamped to [0, max_rows]) and `prefix[0..E]` (m-tiles of the
//! experts before e) in shared memory; every thread of the CTA calls it.
__device__ __forceinline__ void grouped_prefix(const grouped_sched& s, int* off, int* prefix,
                                               int* warp_total) {
  const int tid = static_cast<int>(threadIdx.x);
  const int nthreads = static_cast<int>(blockDim.x);
  const int E = s.experts;
  const int per = (E + nthreads - 1) / nthreads;
  auto clamp_row = [&](int v) { return v < 0 ? 0 : (v > s.max_rows ? s.max_rows : v); };
  auto m_tiles = [&](int rows) { return rows > 0 ? (rows + s.tile_rows - 1) / s.tile_rows : 0; };
  int local = 0;
  for (int i = 0; i < per; ++i) {
    const int e = tid * per + i;
    if (e < E) {
      // L2 loads: a programmatic launch reads the offsets before `pdl_wait` (see stream_mainloop)
      const int lo = clamp_row(__ldcg(s.offsets + e));
      const int hi = clamp_row(__ldcg(s.offsets + e + 1));
      off[e] = lo;
      if (e == E - 1) off[E] = hi;
      local += m_tiles(hi - lo);
    }
  }
  // block-wide exclusive scan of `local`
  const int lane = tid % 32, warp = tid / 32;
  int inc = local;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int v = __shfl_up_sync(0xffffffffu, inc, d);
    if (lane >= d) inc += v;
  }
  if (lane == 31) warp_total[warp] = inc;
  __syncthreads();
  int before = inc - local;
  for (int w = 0; w < warp; ++w) before += warp_total[w];
  for (int i = 0; i < per; ++i) {
    const int e = tid * per + i;
    if (e < E) {
      prefix[e] = before;
      before += m_tiles(off[e + 1] - off[e]);  // written before the scan's barrier
      if (e == E - 1) prefix[E] = before;
    }
  }
  __syncthreads();
}

//! The grouped form of the streaming kernel: the schedule and where its tables live in the
//! dynamic shared memory (after the ring). Unused by the dense form.
struct stream_groups {
  grouped_sched sched;
  //! The routing's m-tile table (`stream_m_tiles` entries of `sched.tile_rows` rows), or null:
  //! each CTA then builds the offsets' prefix table in shared memory (`grouped_prefix`).
  const grouped_m_tile* m_tiles;
  int experts;
  int table_offset;  //!< bytes (of the prefix table; unused with `m_tiles`)
  //! 128-row n-tiles per CTA (>= 1; grid y = ceil(n_tiles / n_per_cta)): a CTA streams them one
  //! after the other with its activations staged once (resident activations only).
  int n_per_cta;
  //! 128-row n-tiles of the weights, `ceil(p.N / 128)` (kept as a field: computing it in the
  //! kernel changed the `MultiN` kernels' SASS and spills, 2026-12-01, not measured on the H200)
  int n_tiles;
  bool late_release;  //!< `grouped_plan::late_release` (dense calls pass `stream_groups{}`)
};

//! The streaming mainloop + fused epilogue: CTA (split, n-tile, m-tile) of stream_layout; with
//! `splits > 1` the grid's x dimension is one cluster of `splits` CTAs. `Aligned`: K % 128 == 0
//! (every chunk whole, 16-byte code and 4-byte scale copies); `S` ring stages per warp.
//! `p.resident`: the activations of the CTA's whole K range are staged once (one barrier), so the
//! warps stream their weights without meeting again until the epilogue; otherwise slabs of
//! `stream_layout::slab_chunks(nt)` chunks in two alternating buffers (one barrier per slab).
//! `KGroups` = 2 (resident activations only): the CTA holds two groups of 8 warps on the same 128
//! rows, each streaming half of the CTA's chunks, summed with the split partials in source order
//! (split-major, then group): 16 warps per SM for grids of at most one CTA per SM.
//! `MultiN` (grouped, resident activations only): the CTA streams `gs.n_per_cta` n-tiles of its
//! m-tile one after the other, staging the activations once (grid y = n-tile groups).
template <mma_lane Lane, block_scaled_format WF, class Act, class Epi, int W, bool Aligned, int S,
          int MinBlocks, bool Grouped = false, int FixedTiles = 1, bool DualAcc = false,
          int KGroups = 1, bool MultiN = false, bool ResidualColumns = false>
__global__ void __launch_bounds__(stream_layout::threads * KGroups, KGroups == 1 ? MinBlocks : 1)
    stream_mainloop(const __grid_constant__ decode_params p,
                    const __grid_constant__ typename Epi::params ep,
                    const __grid_constant__ stream_groups gs) {
  using SL = stream_layout;
  using DL = decode_layout;
  using T = activation_traits<Act>;
  using WL = weight_loader_t<WF, Lane>;
  constexpr int WB = WF::block_size;
  constexpr int scale_per_chunk = DL::chunk_k / WB;  // scale bytes per row and chunk (8 or 4)
  static_assert(SL::rows_per_cta % W == 0, "quads: fused epilogue fragments must tile a CTA");
  static_assert(KGroups == 1 || (KGroups == 2 && !Grouped), "quads: KGroups is 1, or 2 (dense)");
  static_assert(!MultiN || Grouped, "quads: several n-tiles per CTA are a grouped-kernel form");
  static_assert(!ResidualColumns || activation_traits<Act>::rac,
                "quads: ResidualColumns is a form of RAC launches");
  static_assert(FixedTiles == 1 || FixedTiles == 2, "quads: one or two n8 token tiles");
  constexpr int NT = SL::threads * KGroups;  // threads of the CTA
  extern __shared__ __align__(16) unsigned char smem_raw[];

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const int kg = warp / SL::warps, row_warp = warp % SL::warps;  // k-group, row-warp
  const int g = lane / 4, t = lane % 4;
  QUADS_DECODE_TRACE_POINT(0, warp == 0);
  // Programmatic launches (`grouped_plan::programmatic`): the next kernel of the stream may place
  // its CTAs once every CTA of this grid released them, here or after the first mainloop
  // (`late_release`). Before `pdl_wait` (after the first ring fill) the kernel reads only what
  // the previous kernel of the stream cannot write: weights and expert offsets.
  if (!gs.late_release) ::quads::kernels::detail::pdl_release();
  const int split = static_cast<int>(blockIdx.x);
  const int splits = static_cast<int>(gridDim.x);
  // the CTA's 128-row n-tiles [n_first, n_first + n_items): one unless `MultiN` (its own
  // instantiation: the pass loop cost the one-tile kernels registers and 5-16 % of the MoE
  // layer's time on the H200, 2026-12-01 05:44 UTC)
  const int n_first = static_cast<int>(blockIdx.y) * (MultiN ? gs.n_per_cta : 1);
  const int n_items = MultiN ? min(gs.n_per_cta, gs.n_tiles - n_first) : 1;
  const int tile_rows = Grouped ? gs.sched.tile_rows : SL::tokens_per_cta;
  constexpr int nt = FixedTiles;  // n8 token tiles
  // m-tile blockIdx.z of the experts' rows: its entry in the routing's m-tile table (an L2 load,
  // as the offsets: a programmatic launch reads it before `pdl_wait`), else from the offsets
  // (read here, on the device); the CTAs of a cluster share blockIdx.z, so they leave together
  // when the tile does not exist
  auto table_entry = [&] {
    return __ldcg(reinterpret_cast<const int4*>(gs.m_tiles) + blockIdx.z);
  };
  if constexpr (Grouped) {
    if (gs.m_tiles != nullptr) {
      if (table_entry().x < 0) return;
    } else {
      int* g_off = reinterpret_cast<int*>(smem_raw + gs.table_offset);
      int* g_prefix = g_off + gs.experts + 1;
      grouped_prefix(gs.sched, g_off, g_prefix, g_prefix + gs.experts + 1);
      if (static_cast<int>(blockIdx.z) >= g_prefix[gs.experts]) return;
    }
    QUADS_DECODE_TRACE_POINT(20, warp == 0);
  }
  // One pass per n-tile; the activations are staged in the first only (resident mode: the
  // launcher gives a CTA several n-tiles only then), so a later n-tile's prologue is its ring
  // fill. The split-K receive area is the drained rings, so the passes do not overlap. Each pass
  // looks its m-tile up again in the shared tables (behind a barrier, so the compiler cannot
  // hoist it): little stays live across a pass's epilogue, which would spill otherwise.
  for (int item = 0; item < n_items; ++item) {
    int m0 = static_cast<int>(blockIdx.z) * SL::tokens_per_cta;
    int m_end = min(m0 + SL::tokens_per_cta, p.M);
    const std::uint8_t* w_data = p.w_data;
    const std::uint8_t* w_scales = p.w_scales;
    const int* slot_table = p.slot;
    if constexpr (Grouped) {
      // the m-tile's entry again (the table: an L2 hit; the offsets: the scheduler's item
      // lookup with one item per m-tile, splits and n-tiles being grid axes)
      grouped_item it{};
      if (gs.m_tiles != nullptr) {
        const int4 entry = table_entry();
        it.expert = entry.x;
        it.m0 = entry.y;
        it.m_end = entry.z;
      } else {
        const int* g_off = reinterpret_cast<const int*>(smem_raw + gs.table_offset);
        it = grouped_item_at(static_cast<int>(blockIdx.z), g_off + gs.experts + 1, g_off,
                             gs.experts, 1, 1, tile_rows);
      }
      m0 = it.m0;
      m_end = it.m_end;
      w_data += static_cast<std::size_t>(it.expert) * gs.sched.w_expert_bytes;
      w_scales += static_cast<std::size_t>(it.expert) * gs.sched.w_expert_scale_bytes;
      if (slot_table != nullptr)
        slot_table += static_cast<std::size_t>(it.expert) * gs.sched.slot_stride;
    }
    const int tokens = m_end - m0;
    // the CTA's chunks [cta_begin, cta_begin + cta_chunks) (staged), this warp's k-group's part
    // [chunk_begin, chunk_begin + nchunks) (streamed), which starts at act chunk `group_off`
    const int cta_begin = split * p.chunks_per_split;
    const int cta_chunks = max(min(cta_begin + p.chunks_per_split, p.chunks) - cta_begin, 0);
    const int group_len = (cta_chunks + KGroups - 1) / KGroups;
    const int group_off = min(kg * group_len, cta_chunks);
    const int chunk_begin = cta_begin + group_off;
    const int nchunks = min(group_len, cta_chunks - group_off);
    const int n_cta = (n_first + item) * SL::rows_per_cta;
    const int n0 = n_cta + row_warp * SL::rows_per_warp;
    const bool warp_active = n0 < p.N;
    // MultiN kernels run resident only (the launcher's rule): a compile-time true drops their
    // slab path, which took their spills from up to 200 LDL/STL to at most 37 (sass_survey)
    const bool resident = MultiN || p.resident;
    QUADS_DECODE_TRACE_MODE(resident);
    constexpr int SC = SL::slab_chunks(nt);  // chunks per slab (slab mode)
    const int slab_len = resident ? p.chunks_per_split : SC;  // chunks per buffer
    const int nslabs = resident ? 1 : (nchunks + SC - 1) / SC;

    const int chunk_slots = nt * DL::words_per_lane * 32;  // 16-byte slots of one chunk
    const int buf_slots = slab_len * chunk_slots;
    const int nbufs = resident ? 1 : 2;
    uint4* act = reinterpret_cast<uint4*>(smem_raw);  // [nbufs][buf_slots]
    // RAC residuals in spare MMA columns (rac_cols): with one token tile (at most 4 tokens) the
    // MMA column of token n + 4 (16 slots after the token's own: stage_slot's lane (n % 8) * 4 +
    // o / 4); with two tiles (dense calls of 5-8 tokens, grouped 8-row m-tiles) the second tile
    // (128 slots after); the token tiles' MMAs then yield both products and the split-K push files
    // those columns as the residual partials. Else a residual buffer [nbufs][buf_slots] after the
    // activations, with a second MMA per step. The placement is compile-time: the launchers pick
    // `ResidualColumns` exactly when every tile fits the columns (`rac_col_capacity`), and dense
    // one-tile calls (at most 4 RAC tokens) always fit; so a residual-buffer kernel holds no
    // column code and a column kernel no buffer code (the plain two-chunk loop).
    constexpr int RC = SL::rac_col_capacity(nt);
    constexpr bool residual_buffer_path = SL::residual_buffer(T::rac, ResidualColumns, nt, Grouped);
    constexpr bool rac_cols = T::rac && !residual_buffer_path;
    uint4* res = rac_cols ? act + SL::stage_slot(nt, 0, RC, 0) : act + nbufs * buf_slots;
    unsigned char* ring = smem_raw + static_cast<std::size_t>(nbufs) * buf_slots * 16 *
                                         (residual_buffer_path ? 2 : 1);
    const int staged_tokens = rac_cols ? RC : 8 * nt;  // token slots the staging fills
    unsigned char* my_ring = ring + warp * S * SL::stage_bytes;

    const std::size_t row_bytes = static_cast<std::size_t>(p.K / 2);
    const int w_scale_cols = p.K / WB;
    const bool scale_vec = Aligned || (w_scale_cols % 4) == 0;

    // --- this lane's copy sources / destinations (chunk 0 of the split) --------------------------
    const int r_s = g + 8 * (t / 2), half = t % 2;  // the scale row / half this lane copies
    const int nA = n0 + g, nB = n0 + g + 8, nS = n0 + r_s;
    const bool okA = nA < p.N, okB = nB < p.N;
    const bool okS = nS < p.N && 4 * half < scale_per_chunk;
    const int kseg0 = DL::word_k(chunk_begin, t, 0);
    // chunk_tiled weights (chunk_tiling.hpp): a warp's chunk is one contiguous run of codes and
    // one of scales, already in the ring's order (the host checked N % 16 == 0, K % 128 == 0)
    constexpr bool tiled = is_chunk_tiled<WF>;
    constexpr int code_step = tiled ? chunk_tiling::code_bytes : DL::chunk_k / 2;
    constexpr int scale_step = tiled ? chunk_tiling::scale_bytes : scale_per_chunk;
    const std::size_t tile0 =
        static_cast<std::size_t>(n0 / chunk_tiling::rows) * p.chunks + chunk_begin;
    const std::uint8_t* pA =
        tiled ? w_data + tile0 * chunk_tiling::code_bytes + lane * 32
              : w_data + static_cast<std::size_t>(okA ? nA : 0) * row_bytes + kseg0 / 2;
    const std::uint8_t* pB =
        tiled ? pA + 16 : w_data + static_cast<std::size_t>(okB ? nB : 0) * row_bytes + kseg0 / 2;
    const std::uint8_t* pS =
        tiled ? w_scales + tile0 * chunk_tiling::scale_bytes + lane * 4
              : w_scales + static_cast<std::size_t>(okS ? nS : 0) * w_scale_cols +
                    chunk_begin * scale_per_chunk + 4 * half;
    const std::uint32_t ring_s = smem_addr(my_ring);
    const std::uint32_t dA = ring_s + lane * 32,
                        dS = ring_s + SL::stage_code_bytes +
                             (tiled ? lane * 4 : r_s * 8 + 4 * half);

    // --- ring: chunk i (split-local) of this warp's 16 rows into stage `stage` (= i % S, which the
    // chunk loop counts instead of dividing); called for chunks 0, 1, 2, ... in order. Tiled and
    // K % 128 == 0 weights copy from running source pointers (recomputing them from the parameters
    // cost ~15 instructions per chunk); the others from index arithmetic (K tail, narrow rows).
    const std::uint8_t* run_a = pA;
    const std::uint8_t* run_b = pB;
    const std::uint8_t* run_s = pS;
    auto issue = [&](int i, int stage) {
      if (i < nchunks && warp_active) {
        const std::uint32_t off = static_cast<std::uint32_t>(stage * SL::stage_bytes);
        if constexpr (tiled || Aligned) {
          cp_async16(dA + off, run_a, tiled || okA ? 16 : 0);
          cp_async16(dA + off + 16, run_b, tiled || okB ? 16 : 0);
          cp_async4(dS + off, run_s, tiled || okS ? 4 : 0);
        } else {
          const int kseg = kseg0 + i * DL::chunk_k;
          const bool in_k = kseg < p.K;
          if (p.w_vec16) {
            cp_async16(dA + off, in_k ? pA + i * 64 : w_data, okA && in_k ? 16 : 0);
            cp_async16(dA + off + 16, in_k ? pB + i * 64 : w_data, okB && in_k ? 16 : 0);
          } else {
            const bool in2 = kseg + 16 < p.K;
            cp_async8(dA + off, in_k ? pA + i * 64 : w_data, okA && in_k ? 8 : 0);
            cp_async8(dA + off + 8, in2 ? pA + i * 64 + 8 : w_data, okA && in2 ? 8 : 0);
            cp_async8(dA + off + 16, in_k ? pB + i * 64 : w_data, okB && in_k ? 8 : 0);
            cp_async8(dA + off + 24, in2 ? pB + i * 64 + 8 : w_data, okB && in2 ? 8 : 0);
          }
          const int first_block = (chunk_begin + i) * scale_per_chunk + 4 * half;
          int valid = okS ? w_scale_cols - first_block : 0;
          valid = valid < 0 ? 0 : (valid > 4 ? 4 : valid);
          const std::uint8_t* src = valid > 0 ? pS + i * scale_per_chunk : w_scales;
          if (scale_vec) {
            cp_async4(dS + off, src, valid);
          } else {
            unsigned char* sdst = my_ring + off + SL::stage_code_bytes + r_s * 8 + 4 * half;
#pragma unroll
            for (int b = 0; b < 4; ++b) sdst[b] = b < valid ? __ldg(src + b) : std::uint8_t{0};
          }
        }
      }
      cp_async_commit();
      if constexpr (tiled || Aligned) {
        run_a += code_step;
        run_b += code_step;
        run_s += scale_step;
      }
    };

    float acc[2][4] = {};
    float acc_r[2][4] = {};
    float acc2[DualAcc ? 2 : 1][4] = {};  // odd words (DualAcc)

    struct ring_regs {
      uint4 q0, q1;         // codes of rows g, g + 8
      std::uint32_t s0, s1; // this lane's scale bytes of rows g, g + 8
    };
    // Reads stage `stage` back. A warp without rows (n0 >= N) reads a stage nothing wrote; it
    // never uses the values.
    auto ring_read = [&](int stage) {
      ring_regs r;
      const unsigned char* st = my_ring + stage * SL::stage_bytes;
      r.q0 = *reinterpret_cast<const uint4*>(st + lane * 32);
      r.q1 = *reinterpret_cast<const uint4*>(st + lane * 32 + 16);
      const unsigned char* ss = st + SL::stage_code_bytes;
      if constexpr (WB == 16) {
        r.s0 = *reinterpret_cast<const std::uint16_t*>(ss + g * 8 + 2 * t);
        r.s1 = *reinterpret_cast<const std::uint16_t*>(ss + (g + 8) * 8 + 2 * t);
      } else {
        r.s0 = ss[g * 8 + t];
        r.s1 = ss[(g + 8) * 8 + t];
      }
      return r;
    };

    // --- prologue: ring stages in flight, then the first slab (or all of the range) staged ------
#pragma unroll
    for (int i = 0; i < S - 1; ++i) issue(i, i);
    QUADS_DECODE_TRACE_POINT(21, warp == 0 && item == 0);
    // the activations (and everything after) may come from the previous kernel of the stream
    ::quads::kernels::detail::pdl_wait();
    QUADS_DECODE_TRACE_POINT(22, warp == 0 && item == 0);

    // Slab refills (KGroups == 1): thread tid stages slab chunk tid % SC, octet tid / SC % 16 of
    // tokens tid / (16 SC) + rf_step u (u < batch). A decode call's single token is then one unit
    // for each of 16 SC threads; with 16 threads per token (tid / 16) it was 4 serial units of half
    // of warp 0, which every other warp waited for at the slab barrier.
    constexpr int batch = 4;  // units in flight per thread while staging
    constexpr int rf_units = SC * 16;  // units of one token per slab
    constexpr int rf_step = SL::threads / rf_units; // tokens staged side by side
    static_assert(SL::threads % rf_units == 0 && rf_step * batch >= 8 * nt,
                  "quads: the slab refill map must cover every token slot");
    const int rf_c = tid % SC, rf_o = tid / SC % 16,
              rf_n0 = tid / rf_units;
    // token rf_n0 + rf_step u of the slab at `first`
    auto stage_refill_load = [&](int u, int first) {
      const int n = rf_n0 + rf_step * u;
      const int k = (chunk_begin + first + rf_c) * DL::chunk_k + 8 * rf_o;
      const bool valid = n < tokens && first + rf_c < nchunks && k < p.K;
      return stage_load<Lane, Act>(p, slot_table, m0 + n, k, valid);
    };
    auto stage_refill_store = [&](const staged_unit<Act>& su, int u, int bufi) {
      const int n = rf_n0 + rf_step * u;
      if (n < staged_tokens)
        stage_store<Lane, Act>(su, act + bufi * buf_slots, res + bufi * buf_slots,
                               rf_c * chunk_slots + SL::stage_slot(nt, 0, n, rf_o));
    };
    staged_unit<Act> pre[batch];
    if (item == 0) {
      // The first fill (the whole K range when resident) spreads its pieces over all threads,
      // token-major, so that only the real tokens' pieces issue loads and every thread keeps a
      // batch of them in flight: with one token per 16 threads and one chunk per batch it took
      // 6-9 us (several dependent DRAM round trips) before the first MMA (H200 trace, 04:22 UTC).
      const int first_len = resident ? cta_chunks : min(SC, cta_chunks);
      using FP = stage_piece<Lane, Act>;
      constexpr int pieces_per_chunk = 16 / FP::octets;
      constexpr int fill_batch = FP::batch;
      const int per_token = first_len * pieces_per_chunk;
      const int items = staged_tokens * per_token;
      for (int base = 0; base < items; base += fill_batch * NT) {
        typename FP::raw raw[fill_batch];
#pragma unroll
        for (int u = 0; u < fill_batch; ++u) {
          const int item = base + u * NT + tid;
          const int n = item / per_token, rest = item % per_token;
          const int c = rest / pieces_per_chunk, piece = rest % pieces_per_chunk;
          const int k = (cta_begin + c) * DL::chunk_k + 8 * FP::octets * piece;
          raw[u] = FP::load(p, slot_table, m0 + n, k, item < items && n < tokens && c < cta_chunks);
        }
#pragma unroll
        for (int u = 0; u < fill_batch; ++u) {
          const int item = base + u * NT + tid;
          if (item < items) {
            const int n = item / per_token, rest = item % per_token;
            const int c = rest / pieces_per_chunk, piece = rest % pieces_per_chunk;
            FP::store(raw[u], act, res, c * chunk_slots, nt, n, piece);
          }
        }
      }
      QUADS_DECODE_TRACE_POINT(23, warp == 0);
    }
    // chunk 0 into registers, then the ring's last stage in flight
    cp_async_wait<S - 2>();
    __syncwarp();
    ring_regs cur = ring_read(0);
    issue(S - 1, S - 1);
    int stage = 0;  // i % S of the chunk the loop works on
    __syncthreads();
    QUADS_DECODE_TRACE_POINT(1, warp == 0 && item == 0);

    for (int s = 0; s < nslabs; ++s) {
      const int buf = resident ? 0 : (s & 1);
      const bool next = !resident && s + 1 < nslabs;
      if (next) {
#pragma unroll
        for (int u = 0; u < batch; ++u)
          pre[u] = stage_refill_load(u, (s + 1) * SC);
      }
      const uint4* a_buf = act + buf * buf_slots;
      const uint4* r_buf = res + buf * buf_slots;
      const int c_first = resident ? 0 : s * SC;
      const int c_end = resident ? nchunks : min(SC, nchunks - c_first);
      // resident: act chunk group_off + i (group_off = 0 with one k-group, as in slab mode)
      const int a_first = resident ? group_off : 0;
      const uint4* a_chunks = a_buf + a_first * chunk_slots;
      const uint4* r_chunks = r_buf + a_first * chunk_slots;
      // two chunks per iteration; RAC with two token tiles, and grouped RAC (residual buffer
      // for 8-row m-tiles), keep one (register bound: ptxas spilled otherwise)
#pragma unroll(residual_buffer_path ? 1 : 2)
      for (int cl = 0; cl < c_end; ++cl) {
        const int i = c_first + cl;  // split-local chunk
        // this chunk's codes and scales are in registers (cur); fetch the next chunk's from the
        // ring first, so the shared-memory latency overlaps this chunk's work
        const uint4 wq0 = cur.q0, wq1 = cur.q1;
        const std::uint32_t sc0 = cur.s0, sc1 = cur.s1;
        // After the last chunk this reads a stage no copy is in flight for (values unused), and
        // the issue only commits an empty group: no branch in the loop.
        const int next_stage = stage + 1 == S ? 0 : stage + 1;
        cp_async_wait<S - 2>();
        __syncwarp();
        cur = ring_read(next_stage);
        issue(i + S, stage);  // chunk i's stage: its bytes are in registers
        stage = next_stage;
        if (!warp_active) continue;
        const uint4* a_chunk = a_chunks + cl * chunk_slots;
        const uint4* r_chunk = r_chunks + cl * chunk_slots;
#pragma unroll
        for (int w = 0; w < DL::words_per_lane; ++w) {
          const int b = (w * 8) / WB;
          const std::uint32_t m_0 = WL::multiplier2(static_cast<std::uint8_t>(sc0 >> (8 * b)));
          const std::uint32_t m_1 = WL::multiplier2(static_cast<std::uint8_t>(sc1 >> (8 * b)));
          std::uint32_t ag[4], ag8[4];
          WL::dequant_word(word_of(wq0, w), m_0, ag);
          WL::dequant_word(word_of(wq1, w), m_1, ag8);
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            if (j >= nt) break;
            const int slot = (j * DL::words_per_lane + w) * 32 + lane;
            const uint4 bv = a_chunk[slot];
            if constexpr (DualAcc) {
              float(&d)[4] = (w & 1) ? acc2[j] : acc[j];
              mma_16816<Lane>(d, ag[0], ag8[0], ag[1], ag8[1], bv.x, bv.y);
              mma_16816<Lane>(d, ag[2], ag8[2], ag[3], ag8[3], bv.z, bv.w);
            } else {
              mma_16816<Lane>(acc[j], ag[0], ag8[0], ag[1], ag8[1], bv.x, bv.y);
              mma_16816<Lane>(acc[j], ag[2], ag8[2], ag[3], ag8[3], bv.z, bv.w);
            }
            if constexpr (T::rac) {
              // the residual's own accumulators for either residual scale: a second MMA
              // dependency chain beside the token tile's (a shared scale joins the sums in the
              // epilogue, as the residual columns do). Every chunk multiplies its residual tile,
              // zero where no block is selected: a per-chunk skip flag (read from shared memory)
              // made ptxas guard each MMA pair with a WARPSYNC, 16 per chunk; a warp-uniform flag
              // (vote) with a branch around a second loop body, which skips half the chunks'
              // residual MMAs on a tail selection, was 4-9 % slower at M = 16 than this
              // (docs/history/gemm.md, "Twenty-first session").
              if (!rac_cols) {
                const uint4 br = r_chunk[slot];
                mma_16816<Lane>(acc_r[j], ag[0], ag8[0], ag[1], ag8[1], br.x, br.y);
                mma_16816<Lane>(acc_r[j], ag[2], ag8[2], ag[3], ag8[3], br.z, br.w);
              }
            }
          }
        }
      }
      if (next) {
#pragma unroll
        for (int u = 0; u < batch; ++u)
          stage_refill_store(pre[u], u, buf ^ 1);
      }
      if (!resident) __syncthreads();
    }

    // --- split-K reduction, push form: each CTA stores its partials straight into the shared
    // memory of the CTA that owns the fragment (fragment f belongs to split f % splits), one slot
    // per source split; after the cluster barrier every owner sums its slots in split order
    // (deterministic) and runs the epilogue. Remote stores do not wait for a reply, so this costs
    // two cluster barriers and local loads (the pull form it replaces read every partial back from
    // remote shared memory, which cost 2-80 us at 4-8 splits on the H200, 02:27 UTC run).
    QUADS_DECODE_TRACE_POINT(2 + row_warp, kg == 0 && item == 0);
    if (gs.late_release && item == 0) ::quads::kernels::detail::pdl_release();
    cp_async_wait<0>();
    if constexpr (DualAcc)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] = __fadd_rn(acc[j][e], acc2[j][e]);
    namespace cg = cooperative_groups;
    constexpr int per_row = SL::rows_per_cta / W;
    // main and residual partials (RAC files residual partials for either residual scale)
    constexpr int which_count = Epi::reads_residual || T::rac ? 2 : 1;
    static_assert(SL::reduce_floats(W, which_count) * 4 <= SL::warps * S * SL::stage_bytes,
                  "quads: the split-K receive slots must fit the drained weight rings");
    const int frags = tokens * per_row;
    const int lf_count = SL::reduce_locals(W, splits);
    float* recv = reinterpret_cast<float*>(ring);
    // sources: split-major, then k-group (SL::reduce_slot's layout with splits * KGroups sources;
    // the rings of the KGroups warp groups hold KGroups times the floats)
    const int sources = splits * KGroups;
    auto slot_of = [&](int which, int src, int lf) {
      return ((which * sources + src) * lf_count + lf) * W;
    };
    if (splits > 1) cg::this_cluster().sync();  // every CTA's rings drained and free
    else __syncthreads();
    QUADS_DECODE_TRACE_POINT(10, warp == 0 && item == 0);
    if (warp_active) {
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          // MMA column: token, or (rac_cols, >= RC) residual
          const int col = 8 * j + 2 * t + (e & 1);
          const bool res_col = rac_cols && col >= RC;
          const int m = res_col ? col - RC : col;
          if (j >= nt || m >= tokens) continue;
          const int nl = row_warp * SL::rows_per_warp + g + (e >= 2 ? 8 : 0);
          const int f = m * per_row + nl / W;
          const int owner = f % splits, lf = f / splits, src = split * KGroups + kg;
          float* dst = splits > 1 ? cg::this_cluster().map_shared_rank(recv, owner) : recv;
          // exact: the fold is a power of two
          dst[slot_of(res_col ? 1 : 0, src, lf) + nl % W] = acc[j][e] * p.fold;
          if constexpr (T::rac)
            if (!rac_cols) dst[slot_of(1, src, lf) + nl % W] = acc_r[j][e] * p.fold;
        }
    }
    if (splits > 1) cg::this_cluster().sync();  // every partial has arrived
    else __syncthreads();
    QUADS_DECODE_TRACE_POINT(11, warp == 0 && item == 0);

    // One fragment per thread, or per group of G lanes (`epilogue::lane_group_size`: a chain
    // whose quantize-output block spreads over 16 lanes, each holding WL columns); the loop
    // bounds are uniform over a group, so its lanes reach the chain together.
    constexpr int G = epilogue::lane_group_size<Epi>;
    constexpr int WL = W / G;
    static_assert(G == 1 || (WL == Epi::width_divisor && 32 % G == 0),
                  "quads: a lane-grouped epilogue gives each lane one output column");
    const int sub = tid % G;
    for (int lf = tid / G; lf < lf_count; lf += NT / G) {
      const int f = lf * splits + split;
      if (f >= frags) break;
      const int m = f / per_row;
      const int nl = (f % per_row) * W;
      const int col = n_cta + nl;
      if (col >= p.N) continue;
      epilogue::fragment<WL> fr;
      fr.row = m0 + m;
      fr.col = col + sub * WL;
      fr.count = max(min(WL, p.N - fr.col), 0);
#pragma unroll
      for (int i = 0; i < WL; ++i) fr.r[i] = 0.0f;
      for (int q = 0; q < sources; ++q) {
        const float* src = recv + slot_of(0, q, lf) + sub * WL;
#pragma unroll
        for (int i = 0; i < WL; ++i) {
          const float v = i < fr.count ? src[i] : 0.0f;
          fr.v[i] = q == 0 ? v : __fadd_rn(fr.v[i], v);
        }
        if constexpr (T::rac) {
          const float* srr = recv + slot_of(1, q, lf) + sub * WL;
#pragma unroll
          for (int i = 0; i < WL; ++i) {
            const float v = i < fr.count ? srr[i] : 0.0f;
            fr.r[i] = q == 0 ? v : __fadd_rn(fr.r[i], v);
          }
        }
      }
      if constexpr (T::rac && !Epi::reads_residual) {
        // shared residual scale: the residual products join the main sum
#pragma unroll
        for (int i = 0; i < WL; ++i) {
          fr.v[i] = __fadd_rn(fr.v[i], fr.r[i]);
          fr.r[i] = 0.0f;
        }
      }
      if constexpr (G > 1) {
        (void)Epi::apply_group(fr, ep, epilogue::lane_group<G>::of_lane(lane));
      } else {
        (void)epilogue::apply_node<Epi>(fr, ep);
      }
    }
    QUADS_DECODE_TRACE_POINT(12, warp == 0 && item == 0);
    if (item + 1 < n_items) __syncthreads();  // the receive area (rings) read before refilling
  }
}

} // namespace detail

namespace detail {

//! SMs of the current device (132, the H200's, when the query fails).
inline int stream_sms() {
  const int sms = ::quads::kernels::detail::sm_count();
  return sms > 0 ? sms : 132;
}

//! CTAs of a streaming kernel with `smem_bytes` of dynamic shared memory that run at once: two
//! per SM up to `two_per_sm_bytes` (the registers allow two: `__launch_bounds__(256, 2)`), else
//! one.
inline long stream_slots(int smem_bytes) {
  return static_cast<long>(stream_sms()) * (smem_bytes <= stream_layout::two_per_sm_bytes ? 2 : 1);
}

//! Whether a streaming launch keeps the activations of a split's whole K range resident: they
//! fit two CTAs per SM next to the rings, or one CTA per SM when the grid is one wave.
inline bool stream_resident(int chunks_per_split, int resident_bytes, long ctas) {
  using SL = stream_layout;
  return chunks_per_split <= SL::max_resident_chunks &&
         (resident_bytes <= SL::two_per_sm_bytes ||
          (resident_bytes <= SL::max_smem_bytes && ctas <= stream_slots(resident_bytes)));
}

//! Whether `clusters` clusters of `splits` CTAs of `kernel` (`smem` dynamic bytes each) are
//! resident together (cudaOccupancyMaxActiveClusters, cached per kernel, cluster size and shared
//! memory). A cluster that does not fit runs as a second wave and doubles the call: 4096x14336 at
//! M = 16 (32 clusters of 4, one CTA per SM) took 46 us instead of ~24 on the H200 (04:40 UTC).
//! A failed query counts as fitting (and is cleared).
template <class... Params>
bool clusters_fit(void (*kernel)(Params...), int splits, int smem, long clusters,
                  int threads = stream_layout::threads) {
  if (splits <= 1) return true;
  struct entry {
    const void* kernel;
    int splits, smem, max_clusters;
  };
  static std::mutex lock;
  static std::vector<entry> cache;
  const void* key = reinterpret_cast<const void*>(kernel);
  std::lock_guard<std::mutex> guard(lock);
  for (const entry& e : cache)
    if (e.kernel == key && e.splits == splits && e.smem == smem) return clusters <= e.max_clusters;
  const ::quads::kernels::detail::cluster_launch_config c(splits, 1, 1, threads, smem, nullptr);
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &c.cfg) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  cache.push_back({key, splits, smem, n});
  return clusters <= n;
}

//! Raises the dynamic shared-memory limit of the two K-alignment instantiations of a streaming
//! kernel once per process; a refusal is cleared (not left to the next launcher) and returned
//! on every call.
template <auto KernelAligned, auto KernelUnaligned>
cudaError_t raise_stream_smem_limit() {
  static const cudaError_t status = [] {
    cudaError_t e = cudaFuncSetAttribute(KernelAligned, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         stream_layout::max_smem_bytes);
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(KernelUnaligned, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               stream_layout::max_smem_bytes);
    return e;
  }();
  if (status != cudaSuccess) (void)cudaGetLastError();
  return status;
}

//! Launches a streaming kernel on grid (splits, y, z) whose x dimension is one cluster of
//! `splits` CTAs (no cluster attribute for one split); `programmatic`: as a programmatic
//! dependent of the stream's previous kernel (`grouped_plan::programmatic`).
template <class... Params, class... Args>
cudaError_t launch_stream(void (*kernel)(Params...), unsigned y, unsigned z, int splits, int smem,
                          cudaStream_t stream, int threads, bool programmatic, Args&&... args) {
  namespace kd = ::quads::kernels::detail;
  return kd::launch_clustered(
      kernel, kd::cluster_launch_config(splits, y, z, threads, smem, stream, programmatic),
      static_cast<Args&&>(args)...);
}

} // namespace detail

namespace detail {

#define QUADS_GEMM_MSG(text) (Grouped ? "quads: grouped_gemm: " text : "quads: decode_gemm: " text)

//! The argument checks shared by `decode_gemm` and `grouped_gemm` (the shapes are the plan's:
//! `M` = rows of A and of the workspace, `N`, `K` of one weight matrix) and the mainloop
//! parameters they produce. Returns cudaSuccess or the refusal (with its message).
template <bool Grouped, mma_lane Lane, class Epi, block_scaled_format WF, class Act>
cudaError_t check_and_fill(int M, int N, int K, bool plan_residual, const fp4_weights<WF>& w,
                           const Act& a, const typename Epi::arguments& epi, void* workspace,
                           decode_params& p) {
  static_assert(epilogue::check_epilogue_node<Epi>());
  using AT = activation_traits<Act>;
  using ::quads::kernels::detail::aligned;
  using ::quads::kernels::detail::fail;
  static_assert(!std::is_same_v<Act, dense_activations<fp16_lane>> || std::is_same_v<Lane, fp16_lane>,
                "quads: fp16 activations need fp16 lanes (decode_gemm<fp16_lane, ...>)");
  static_assert(!std::is_same_v<Act, dense_activations<bf16_lane>> || std::is_same_v<Lane, bf16_lane>,
                "quads: bf16 activations need bf16 lanes (decode_gemm<bf16_lane, ...>)");
  if constexpr (AT::rac)
    static_assert(std::is_same_v<typename AT::format, value_format_t<WF>>,
                  "quads: RAC composition (b) needs the same format (block size) for the "
                  "activation's residual blocks and the weight blocks they reuse");
  if (K % WF::block_size != 0 || K % AT::block_size != 0)
    return fail(QUADS_GEMM_MSG("K must be a multiple of both operands' block sizes"));
  if (w.data == nullptr || w.scales == nullptr)
    return fail(QUADS_GEMM_MSG("weight data / scales are null"));
  if constexpr (is_chunk_tiled<WF>)
    if (const char* why = chunk_tiling::check_shape(1, N, K)) return fail(why);
  if (!aligned(w.data, K % 32 == 0 ? 16 : 8))
    return fail(QUADS_GEMM_MSG("weight data must be 16-byte aligned (8 when K % 32 != 0)"));
  bool own = false;
  int a_row_bytes = 0, a_scale_cols = 0;
  const int* slot = nullptr;
  if constexpr (!AT::fp4) {
    if (a.data == nullptr || !aligned(a.data, 16))
      return fail(QUADS_GEMM_MSG("dense activations must be non-null and 16-byte aligned"));
  } else {
    if (a.data == nullptr || a.scales == nullptr || !aligned(a.data, 4))
      return fail(QUADS_GEMM_MSG("FP4 activations: data (4-byte aligned) and scales needed"));
    int Kp = K;
    if constexpr (AT::rac) {
      if (a.slot == nullptr || a.selected < 0 || a.selected % AT::block_size != 0 ||
          a.selected > K)
        return fail(QUADS_GEMM_MSG("RAC activations need the slot table and a selected count "
                                   "that is a multiple of the block size, at most K"));
      if (Grouped && a.slot_expert_stride != 0 && a.slot_expert_stride != K / AT::block_size)
        return fail(QUADS_GEMM_MSG("RAC slot_expert_stride must be 0 (one shared table) or "
                                   "K / B (a table per expert)"));
      Kp = K + a.selected;
      own = a.residual == compensation::residual_scale::own;
      slot = a.slot;
    }
    a_row_bytes = Kp / 2;
    a_scale_cols = Kp / AT::block_size;
  }
  if (plan_residual != own)
    return fail(QUADS_GEMM_MSG("the plan's residual flag must be true exactly for RAC "
                               "activations with residual_scale::own"));
  if (reads_residual_of<Epi>::value != own)
    return fail(own ? QUADS_GEMM_MSG("RAC with residual_scale::own needs an epilogue with "
                                     "rac_residual, or the residual term would be dropped")
                    : QUADS_GEMM_MSG("the epilogue reads a residual accumulator, which only "
                                     "RAC activations with residual_scale::own produce"));
  if (workspace == nullptr || !aligned(workspace, 16))
    return fail(QUADS_GEMM_MSG("workspace must be non-null, 16-byte aligned, "
                               "plan.workspace_bytes long"));
  if (const char* why = epilogue::check_arguments<Epi>(epi, M, N)) return fail(why);
  int dev = 0, major = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess)
    return fail(QUADS_GEMM_MSG("no current CUDA device"), e);
  if (const cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
      e != cudaSuccess)
    return fail(QUADS_GEMM_MSG("cannot query the device's compute capability"), e);
  if (major < 9)
    return fail(QUADS_GEMM_MSG("needs compute capability 9.0 or newer (mul.bf16x2, built "
                               "for sm_90a)"));

  constexpr int fold_a = activation_fold<Act, Lane>();
  p = decode_params{};
  p.M = M;
  p.N = N;
  p.K = K;
  p.w_data = w.data;
  p.w_scales = w.scales;
  p.a_data = a.data;
  if constexpr (AT::fp4) p.a_scales = a.scales;
  p.a_row_bytes = a_row_bytes;
  p.a_scale_cols = a_scale_cols;
  p.slot = slot;
  p.own = own;
  p.w_vec16 = K % 32 == 0;
  p.fold = ::quads::detail::from_bits(
      static_cast<std::uint32_t>(127 + weight_loader_t<WF, Lane>::fold_log2 + fold_a) << 23);
  p.ws = static_cast<float*>(workspace);
  return cudaSuccess;
}

#undef QUADS_GEMM_MSG

//! `decode_gemm` on the streaming kernel (one launch: mainloop, cluster split-K reduction, fused
//! epilogue) with `FT` n8 token tiles; `Cols`: RAC residuals in the second tile (5-8 tokens, the
//! ResidualColumns form); `p` filled and checked by the caller.
template <mma_lane Lane, block_scaled_format WF, class Act, class Epi, int St, int MinB, int FT,
          bool DA, bool Cols = false>
cudaError_t decode_stream(const decode_plan& plan, decode_params& p,
                          const typename Epi::arguments& epi, cudaStream_t stream) {
  using ::quads::kernels::detail::fail;
  using AT = activation_traits<Act>;
  using SL = stream_layout;
  constexpr int W = epilogue_fragment_width<Epi>;
  const int M = plan.M, N = plan.N, K = plan.K;
  constexpr int nt = FT;
  const bool aligned_k = K % decode_layout::chunk_k == 0;
  const auto kernel =
      aligned_k
          ? stream_mainloop<Lane, WF, Act, Epi, W, true, St, MinB, false, FT, DA, 1, false, Cols>
          : stream_mainloop<Lane, WF, Act, Epi, W, false, St, MinB, false, FT, DA, 1, false, Cols>;
  const unsigned n_tiles = static_cast<unsigned>((N + SL::rows_per_cta - 1) / SL::rows_per_cta);
  const unsigned m_tiles = static_cast<unsigned>((M + SL::tokens_per_cta - 1) / SL::tokens_per_cta);
  const int ctas = plan.splits * static_cast<int>(n_tiles * m_tiles);
  // RAC residuals in spare MMA columns (tokens 4-7 of one tile; `Cols`: the second tile), else
  // (9-16 tokens) a residual buffer: decode_gemm picks the form by rac_col_capacity
  constexpr bool res_buffer = SL::residual_buffer(AT::rac, Cols, nt, false);
  const int res_bytes = SL::resident_bytes(nt, res_buffer, plan.chunks_per_split, St);
  // Two k-groups (16 warps) per CTA when the grid leaves at most one CTA per SM, every k-group
  // keeps >= 4 chunks and the activations stay resident next to the doubled rings: the chunk
  // loop is latency-bound per warp, and 8 warps per SM left it at ~0.5 us per chunk (H200,
  // 04:30 UTC trace; 16 warps moved 1.4x the bytes per SM).
  const auto kernel2 =
      aligned_k
          ? stream_mainloop<Lane, WF, Act, Epi, W, true, St, MinB, false, FT, DA, 2, false, Cols>
          : stream_mainloop<Lane, WF, Act, Epi, W, false, St, MinB, false, FT, DA, 2, false, Cols>;
  const int res2_bytes = res_bytes + SL::warps * St * SL::stage_bytes;
  if (ctas <= stream_sms() && plan.chunks_per_split >= 8 &&
      stream_resident(plan.chunks_per_split, res2_bytes, ctas)) {
    if (const cudaError_t e = raise_stream_smem_limit<
            stream_mainloop<Lane, WF, Act, Epi, W, true, St, MinB, false, FT, DA, 2, false, Cols>,
            stream_mainloop<Lane, WF, Act, Epi, W, false, St, MinB, false, FT, DA, 2, false,
                            Cols>>();
        e != cudaSuccess)
      return fail("quads: decode_gemm: cannot raise the kernel's dynamic shared memory limit", e);
    if (clusters_fit(kernel2, plan.splits, res2_bytes, ctas / plan.splits, 2 * SL::threads)) {
      p.resident = true;
      return launch_stream(kernel2, n_tiles, m_tiles, plan.splits, res2_bytes, stream,
                           2 * SL::threads, false, p, Epi::to_params(epi), stream_groups{});
    }
  }
  // Activations resident for the whole K range of a split when that fits next to the ring
  // and keeps the CTAs of the grid resident together; else double-buffered slabs.
  p.resident = stream_resident(plan.chunks_per_split, res_bytes, ctas);
  if (const cudaError_t e = raise_stream_smem_limit<
          stream_mainloop<Lane, WF, Act, Epi, W, true, St, MinB, false, FT, DA, 1, false, Cols>,
          stream_mainloop<Lane, WF, Act, Epi, W, false, St, MinB, false, FT, DA, 1, false, Cols>>();
      e != cudaSuccess)
    return fail("quads: decode_gemm: cannot raise the kernel's dynamic shared memory limit", e);
  // resident activations only if every cluster of the grid fits at once; else the slabs'
  // smaller footprint (more CTAs per SM) usually does
  if (p.resident && !clusters_fit(kernel, plan.splits, res_bytes, ctas / plan.splits))
    p.resident = false;
  const int smem = p.resident ? res_bytes : SL::smem_bytes(nt, res_buffer, St);
  return launch_stream(kernel, n_tiles, m_tiles, plan.splits, smem, stream, SL::threads, false, p,
                       Epi::to_params(epi), stream_groups{});
}

} // namespace detail

//! Runs `y = Epi(A W^T)` as planned by `plan_decode(M, N, K, residual)` (see the file comment).
//! Requirements / checks (each refusal returns cudaErrorInvalidValue with a message):
//! M, N, K > 0 and equal to the plan's; K a multiple of both operands' block sizes; non-null,
//! aligned pointers; `workspace` at least `plan.workspace_bytes`; `plan.residual` exactly when
//! the activations are RAC with `residual_scale::own`; the epilogue reads the residual exactly
//! then; the epilogue's own argument checks; a device of compute capability 9.0 or newer.
template <mma_lane Lane, class Epi, block_scaled_format WF, class Act,
          class Tuning = stream_tuning<>>
cudaError_t decode_gemm(const decode_plan& plan, const fp4_weights<WF>& w, const Act& a,
                        const typename Epi::arguments& epi, void* workspace, cudaStream_t stream) {
  using ::quads::kernels::detail::fail;
  const int M = plan.M, N = plan.N, K = plan.K;
  if (M <= 0 || N <= 0 || K <= 0 || plan.chunks <= 0)
    return fail("quads: decode_gemm: M, N and K must be positive (plan_decode of the shape)");
  if ((M + decode_layout::tokens_per_cta - 1) / decode_layout::tokens_per_cta > 65535)
    return fail("quads: decode_gemm: M above 1048560 tokens (grid y limit); split the batch");
  if (K % 16 != 0)
    return fail("quads: decode_gemm: K must be a multiple of both operands' block sizes");
  const decode_plan expect = plan_decode(M, N, K, plan.residual, {plan.splits, plan.mode});
  if (expect.chunks_per_split != plan.chunks_per_split || expect.splits != plan.splits ||
      expect.workspace_bytes != plan.workspace_bytes)
    return fail("quads: decode_gemm: the plan is inconsistent; make it with plan_decode");
  detail::decode_params p;
  if (const cudaError_t e = detail::check_and_fill<false, Lane, Epi>(M, N, K, plan.residual, w, a,
                                                                     epi, workspace, p);
      e != cudaSuccess)
    return e;
  p.chunks = plan.chunks;
  p.chunks_per_split = plan.chunks_per_split;
  p.mode = plan.mode;
  p.ws_r = p.own ? p.ws + plan.residual_offset() : nullptr;

  constexpr int W = epilogue_fragment_width<Epi>;
  // Every operand kind, RAC included (residual slabs next to the activation slabs, a second
  // accumulator for residual_scale::own), runs on the streaming kernel when the fragments tile
  // a CTA's rows and the splits fit one cluster.
  if constexpr (stream_layout::rows_per_cta % W == 0) {
    if (plan.splits <= stream_layout::max_splits) {
      // The token tiles are a template parameter (M <= 8: one n8 tile): the chunk loop then holds
      // no MMA or load for a tile without tokens (tiled pair-coded weights, M = 1: 214 -> 163
      // SASS instructions per chunk together with the loop's running pointers).
      // RAC of 5-8 tokens takes two tiles: its residuals fill the second one
      constexpr int FT = Tuning::fixed_tiles;
      const int nt = stream_layout::token_tiles(M, detail::activation_traits<Act>::rac);
      if (FT != 0 && FT != nt)
        return fail("quads: decode_gemm: stream_tuning's FixedTiles does not match M (1: M <= 8, "
                    "or M <= 4 with RAC operands; 2 above)");
      if (nt == 1)
        return detail::decode_stream<Lane, WF, Act, Epi, Tuning::stages, Tuning::min_blocks,
                                     FT == 0 ? 1 : FT, Tuning::dual_acc>(plan, p, epi, stream);
      // RAC of 5-8 tokens: the form without the residual-buffer path (plain two-chunk loop)
      if constexpr (detail::activation_traits<Act>::rac)
        if (M <= stream_layout::rac_col_capacity(2))
          return detail::decode_stream<Lane, WF, Act, Epi, Tuning::stages, Tuning::min_blocks,
                                       FT == 0 ? 2 : FT, Tuning::dual_acc, true>(plan, p, epi,
                                                                                  stream);
      return detail::decode_stream<Lane, WF, Act, Epi, Tuning::stages, Tuning::min_blocks,
                                   FT == 0 ? 2 : FT, Tuning::dual_acc>(plan, p, epi, stream);
    }
  }

  // Fallback (fragments wider than a CTA's rows, or more splits than a cluster holds): the
  // decode_layout mainloop writes split partials to the workspace, a second kernel reduces.
  if constexpr (is_chunk_tiled<WF>)
    return fail("quads: decode_gemm: chunk_tiled weights run on the streaming kernel only (an "
                "epilogue fragment width dividing 128 and at most 8 splits)");
  if (plan.mode == reduction::atomic)
    if (const cudaError_t e = cudaMemsetAsync(workspace, 0, plan.workspace_bytes, stream);
        e != cudaSuccess)
      return fail(cudaGetErrorString(e), e);
  using DL = decode_layout;
  const dim3 grid(static_cast<unsigned>((N + DL::rows_per_cta - 1) / DL::rows_per_cta),
                  static_cast<unsigned>((M + DL::tokens_per_cta - 1) / DL::tokens_per_cta),
                  static_cast<unsigned>(plan.splits));
  detail::decode_mainloop<Lane, WF, Act><<<grid, DL::threads, 0, stream>>>(p);

  const long long frags = static_cast<long long>(M) * ((N + W - 1) / W);
  const unsigned blocks = static_cast<unsigned>((frags + 127) / 128);
  detail::decode_epilogue<Epi, W><<<blocks, 128, 0, stream>>>(
      p.ws, p.ws_r, M, N, plan.stored_partials(), Epi::to_params(epi));
  return ::quads::kernels::detail::after_launch();
}

} // namespace gemm
} // namespace quads
