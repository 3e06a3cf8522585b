// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Grouped expert GEMM (nvcc only): one launch over all active experts of a MoE layer,
//!        packed FP4 expert stacks `[E, N, K]`, rows grouped by expert through device offsets,
//!        no CTA for an empty expert, no host synchronisation (graph-capturable).
//!
//! `y[m, :] = Epi(A[m, :] W_e^T)` for `m` in `[offsets[e], offsets[e + 1])`. The mainloop is the
//! decode GEMM's (`quads/gemm/decode.cuh`: FP4 weights dequantized in registers,
//! `mma.sync.m16n8k16` with weights on M and up to 16 rows of A on N, split-K), driven by a
//! persistent tile scheduler that reads `offsets` on the device (`quads/gemm/grouped_layout.hpp`).
//! Activations are any of `dense_activations`, `fp4_activations`, `rac_activations` (for RAC,
//! `slot_expert_stride` = 0 shares one slot table between the experts, K / B gives each expert
//! its own; `selected` is the same for all experts).
//!
//! Epilogue rows are A rows (`fragment::row` = m in `[offsets[0], offsets[E])`; rows outside are
//! neither computed nor stored). The epilogue does not receive the expert index: per-expert
//! alpha comes through `epilogue::scale_alpha` with `scale_source::expert` and an
//! `expert_of_row` table (written by routing).
//! @code
//!   auto plan = quads::gemm::plan_grouped(max_rows, N, K, E, /*residual=*/false);
//!   quads::gemm::grouped_gemm<quads::gemm::bf16_lane, epi>(
//!       plan, quads::gemm::fp4_expert_weights<quads::nvfp4>{w, w_scales, E},
//!       quads::gemm::fp4_activations<quads::nvfp4>{x, x_scales}, offsets, epi_args, workspace,
//!       stream);
//! @endcode
//! Enqueued work: with `reduction::atomic` a `cudaMemsetAsync` of the workspace, then the
//! mainloop kernel, then the epilogue kernel.
#pragma once

#if !defined(__CUDACC__)
#  error "quads/gemm/grouped.cuh needs nvcc (CUDA C++)"
#endif

#include <quads/gemm/decode.cuh>
#include <quads/gemm/grouped_layout.hpp>
#include <quads/gemm/m_tile_table.cuh>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace quads::gemm {

//! Packed FP4 expert stack `[E, N, K]`: `data` E * N * K / 2 bytes (expert e's matrix starts at
//! `e * N * K / 2`, row-major packed codes as in `fp4_weights`), `scales` `[E, N, K / B]`
//! linear bytes. Alignment: `data` 16 bytes (8 when K % 32 != 0).
template <block_scaled_format Format>
struct fp4_expert_weights {
  using format = Format;
  const std::uint8_t* data = nullptr;
  const std::uint8_t* scales = nullptr;
  int experts = 0;
};

namespace detail {

//! The grouped mainloop: a persistent CTA walks the flat item list (grouped_layout.hpp).
template <mma_lane Lane, block_scaled_format WF, class Act>
__global__ void __launch_bounds__(decode_layout::threads)
    grouped_mainloop(const __grid_constant__ decode_params p, const __grid_constant__ grouped_sched s) {
  using DL = decode_layout;
  __shared__ uint4 act[DL::slab_slots];
  __shared__ uint4 res[activation_traits<Act>::rac ? DL::slab_slots : 1];
  __shared__ int off[grouped_max_experts + 1];
  __shared__ int prefix[grouped_max_experts + 1];
  __shared__ int warp_total[DL::warps];
  grouped_prefix(s, off, prefix, warp_total);
  const long total = static_cast<long>(prefix[s.experts]) * s.splits * s.n_tiles;
  for (long w = blockIdx.x; w < total; w += gridDim.x) {
    const grouped_item it =
        grouped_item_at(w, prefix, off, s.experts, s.splits, s.n_tiles, s.tile_rows);
    decode_tile tile;
    tile.n_cta = it.n_tile * DL::rows_per_cta;
    tile.m0 = it.m0;
    tile.m_end = it.m_end;
    tile.split = it.split;
    tile.chunk_begin = it.split * p.chunks_per_split;
    tile.chunk_end = min(tile.chunk_begin + p.chunks_per_split, p.chunks);
    tile.w_data = p.w_data + static_cast<std::size_t>(it.expert) * s.w_expert_bytes;
    tile.w_scales = p.w_scales + static_cast<std::size_t>(it.expert) * s.w_expert_scale_bytes;
    tile.slot = p.slot != nullptr ? p.slot + static_cast<std::size_t>(it.expert) * s.slot_stride
                                  : nullptr;
    run_decode_tile<Lane, WF, Act>(p, tile, act, res);
  }
}

//! The grouped epilogue pass: rows in [offsets[0], offsets[E]) only.
template <class Epi, int W>
__global__ void __launch_bounds__(128)
    grouped_epilogue(const float* ws, const float* ws_r, int max_rows, int N, int partials,
                     const int* offsets, int experts,
                     const __grid_constant__ typename Epi::params ep) {
  const int per_row = (N + W - 1) / W;
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<long long>(max_rows) * per_row) return;
  const int m = static_cast<int>(idx / per_row);
  const int first = offsets[0], last = offsets[experts];
  if (m < first || m >= last) return;
  const int col = static_cast<int>(idx % per_row) * W;
  epilogue_fragment_at<Epi, W>(ws, ws_r, max_rows, N, partials, ep, m, col);
}

//! A diagnostic override read from the environment variable `name` once per process: `parse`
//! maps its value (nullptr when unset) to the setting. Overrides change scheduling, never
//! results, so a whole test or benchmark binary can be run on one path (A/B runs on the device);
//! a set variable is reported once on stderr, so that it does not go unnoticed.
template <class Parse>
auto env_override(const char* name, Parse parse) {
  static const auto value = [&] {  // one static per call site's lambda
    const char* v = std::getenv(name);
    if (v != nullptr) std::fprintf(stderr, "quads: diagnostic override %s=%s in effect\n", name, v);
    return parse(v);
  }();
  return value;
}

//! `QUADS_GROUPED_KERNEL` = `persistent` or `streaming` replaces `grouped_kernel::automatic`.
inline grouped_kernel grouped_kernel_from_env() {
  return env_override("QUADS_GROUPED_KERNEL", [](const char* v) {
    if (v != nullptr && std::strcmp(v, "persistent") == 0) return grouped_kernel::persistent;
    if (v != nullptr && std::strcmp(v, "streaming") == 0) return grouped_kernel::streaming;
    return grouped_kernel::automatic;
  });
}

//! `QUADS_GROUPED_N_PER_CTA` replaces `grouped_plan::n_tiles_per_cta` of plans that leave it 0
//! (e.g. inside the MoE layer): n >= 1, or 0 when unset or not a number.
inline int grouped_n_tiles_from_env() {
  return env_override("QUADS_GROUPED_N_PER_CTA", [](const char* v) {
    const int k = v != nullptr ? std::atoi(v) : 0;
    return k > 0 ? k : 0;
  });
}

//! `QUADS_GROUPED_RAC_BUFFER` = `1`: RAC launches of 8-row m-tiles stage their residuals in a
//! residual buffer (one token tile) instead of a second token tile (A/B runs).
inline bool grouped_rac_buffer_from_env() {
  return env_override("QUADS_GROUPED_RAC_BUFFER",
                      [](const char* v) { return v != nullptr && std::strcmp(v, "1") == 0; });
}

} // namespace detail

//! Runs the grouped GEMM planned by `plan_grouped(max_rows, N, K, experts, residual)` (see the
//! file comment). `expert_offsets`: device `int[E + 1]`, non-decreasing, `offsets[E] <=
//! max_rows` (values are clamped to [0, max_rows]; rows outside [offsets[0], offsets[E]) are
//! ignored). Checks as `decode_gemm`, plus: experts in [1, grouped_max_experts] and equal to the
//! plan's and the weights'; offsets non-null and 4-byte aligned; RAC `slot_expert_stride` 0 or
//! K / B. `m_tiles` (optional): the m-tile table of these offsets for this plan
//! (`m_tile_table_for(plan, entries)`, written by `write_m_tile_table` or `moe::route`); the
//! streaming kernel's CTAs then read their m-tile from it instead of scanning the offsets (the
//! persistent kernel ignores it). Its `tile_rows` and `slots` must be the plan's. Refusals
//! return cudaErrorInvalidValue with a message, nothing enqueued.
template <mma_lane Lane, class Epi, block_scaled_format WF, class Act>
cudaError_t grouped_gemm(const grouped_plan& plan, const fp4_expert_weights<WF>& w, const Act& a,
                         const int* expert_offsets, const typename Epi::arguments& epi,
                         void* workspace, cudaStream_t stream,
                         const grouped_m_tile_table& m_tiles = {}) {
  using ::quads::kernels::detail::aligned;
  using ::quads::kernels::detail::fail;
  using AT = detail::activation_traits<Act>;
  const int M = plan.max_rows, N = plan.N, K = plan.K, E = plan.experts;
  if (M <= 0 || N <= 0 || K <= 0 || E <= 0 || plan.chunks <= 0)
    return fail("quads: grouped_gemm: max_rows, N, K and experts must be positive "
                "(plan_grouped of the shape)");
  if (E > grouped_max_experts)
    return fail("quads: grouped_gemm: more experts than grouped_max_experts (1024)");
  if (w.experts != E)
    return fail("quads: grouped_gemm: the weights' expert count differs from the plan's");
  if (K % 16 != 0)
    return fail("quads: grouped_gemm: K must be a multiple of both operands' block sizes");
  const grouped_plan expect =
      plan_grouped(M, N, K, E, plan.residual, {plan.splits, plan.mode});
  if (expect.chunks_per_split != plan.chunks_per_split || expect.splits != plan.splits ||
      expect.workspace_bytes != plan.workspace_bytes || expect.n_tiles != plan.n_tiles ||
      expect.stream_tile_rows != plan.stream_tile_rows ||
      expect.stream_m_tiles != plan.stream_m_tiles || plan.ctas <= 0)
    return fail("quads: grouped_gemm: the plan is inconsistent; make it with plan_grouped");
  if (plan.n_tiles_per_cta < 0)
    return fail("quads: grouped_gemm: n_tiles_per_cta must be 0 (the launcher's rule) or positive");
  if (expert_offsets == nullptr || !aligned(expert_offsets, 4))
    return fail("quads: grouped_gemm: expert_offsets must be a non-null device int[E + 1]");
  if (m_tiles.entries != nullptr &&
      (m_tiles.tile_rows != plan.stream_tile_rows || m_tiles.slots != plan.stream_m_tiles ||
       !aligned(m_tiles.entries, 16)))
    return fail("quads: grouped_gemm: the m-tile table is not this plan's (m_tile_table_for of "
                "the plan; 16-byte aligned entries)");
  detail::decode_params p;
  if (const cudaError_t e = detail::check_and_fill<true, Lane, Epi>(
          M, N, K, plan.residual, fp4_weights<WF>{w.data, w.scales}, a, epi, workspace, p);
      e != cudaSuccess)
    return e;
  p.chunks = plan.chunks;
  p.chunks_per_split = plan.chunks_per_split;
  p.mode = plan.mode;
  p.ws_r = p.own ? p.ws + plan.residual_offset() : nullptr;

  detail::grouped_sched s{};
  s.offsets = expert_offsets;
  s.experts = E;
  s.max_rows = M;
  s.splits = plan.splits;
  s.n_tiles = plan.n_tiles;
  s.w_expert_bytes = static_cast<std::size_t>(N) * static_cast<std::size_t>(K) / 2;
  s.w_expert_scale_bytes =
      static_cast<std::size_t>(N) * static_cast<std::size_t>(K / WF::block_size);
  s.slot_stride = 0;
  if constexpr (AT::rac) s.slot_stride = a.slot_expert_stride;
  s.tile_rows = decode_layout::tokens_per_cta; // the persistent kernel's m-tiles

  constexpr int W = epilogue_fragment_width<Epi>;
  // Every operand kind (RAC included since 2026-11-30, as in decode_gemm) runs the streaming
  // kernel at every routing size (`grouped_kernel::automatic`). Until fae235d the persistent
  // kernel took routings whose streaming grid is more than one wave (it was faster there:
  // Qwen3-30B-A3B gate_up, 128 rows, 169 us streaming vs 152 us persistent). The MoE layer
  // test's non-RAC grouped GEMMs on the persistent kernel gave wrong results on the H200 (23:51
  // and 00:25 UTC); on the streaming kernel the whole MoE suite passes (00:46 UTC run). The cause
  // is not known: the persistent kernel passed the same routings and shapes as GEMM-level tests,
  // and inside the layer with synthetic operands, in that run (docs/history/gemm.md, "The MoE
  // layer's non-RAC failure on the persistent kernel"). `grouped_kernel::persistent` still
  // selects it.
  const grouped_kernel choice =
      plan.kernel == grouped_kernel::automatic ? detail::grouped_kernel_from_env() : plan.kernel;
  const bool want_stream = choice != grouped_kernel::persistent;
  if constexpr (stream_layout::rows_per_cta % W == 0) {
    if (want_stream && plan.splits <= stream_layout::max_splits && plan.stream_m_tiles <= 65535) {
      // The streaming kernel (decode.cuh), one CTA per (split, group of 128-row n-tiles, m-tile
      // slot); slots beyond the routing's m-tiles leave at once.
      using SL = stream_layout;
      using Tn = stream_tuning<>;
      constexpr int St = Tn::stages, MinB = Tn::min_blocks;
      const bool aligned_k = K % decode_layout::chunk_k == 0;
      const int tile = plan.stream_tile_rows;
      // the n8 token tiles of an m-tile as a template parameter, as in decode_gemm
      // RAC residuals in spare MMA columns, as in decode_gemm (no residual buffer, no second MMA
      // per step): m-tiles of at most 4 rows in the token tile's columns 4-7, 8-row m-tiles in a
      // second token tile; 16 rows: a residual buffer. (The second tile for 8 rows lost 3-6 % in
      // the Qwen3-30B-A3B layer at T = 64 on the H200, 2026-12-01 03:05 UTC, while its kernel
      // kept the residual-buffer path's one-chunk loop; it runs the ResidualColumns form now.)
      const int nt = SL::token_tiles(tile, AT::rac && !detail::grouped_rac_buffer_from_env());
      const bool rac_cols = AT::rac && tile <= SL::rac_col_capacity(nt);
      const bool res_buffer = SL::residual_buffer(AT::rac, rac_cols, nt, true);
      const int n128 = (N + SL::rows_per_cta - 1) / SL::rows_per_cta;
      const long ctas = static_cast<long>(plan.splits) * n128 * plan.stream_m_tiles;
      // the prefix table in shared memory (none with an m-tile table)
      const int table_bytes = m_tiles.entries != nullptr ? 0 : (2 * (E + 1) + SL::warps) * 4;
      const int res_bytes =
          SL::resident_bytes(nt, res_buffer, plan.chunks_per_split, St) + table_bytes;
      p.resident = detail::stream_resident(plan.chunks_per_split, res_bytes, ctas);
      const int body = p.resident ? res_bytes - table_bytes : SL::smem_bytes(nt, res_buffer, St);
      const int smem = body + table_bytes;
      if (smem > SL::max_smem_bytes)
        return fail("quads: grouped_gemm: too many experts for the shared-memory tables");
      // n-tiles per CTA (resident activations only: a CTA stages them once for all its n-tiles)
      int n_per = 1;
      if (p.resident) {
        const long slots = detail::stream_slots(smem);
        const int forced =
            plan.n_tiles_per_cta > 0 ? plan.n_tiles_per_cta : detail::grouped_n_tiles_from_env();
        n_per = forced > 0 ? forced : grouped_n_tiles_per_cta(ctas, slots);
        n_per = n_per > n128 ? n128 : n_per;
      }
      const int ny = (n128 + n_per - 1) / n_per;  // the grid's y dimension
      n_per = (n128 + ny - 1) / ny;               // spread evenly over it
      detail::stream_groups gs{};
      gs.sched = s;
      gs.sched.tile_rows = tile;
      gs.m_tiles = m_tiles.entries;
      gs.experts = E;
      gs.table_offset = body;
      gs.n_per_cta = n_per;
      gs.n_tiles = n128;
      gs.late_release = plan.late_release;
      auto launch = [&]<int FT, bool MultiN, bool Cols = false>() -> cudaError_t {
        using namespace detail;
        constexpr auto aligned_kernel =
            stream_mainloop<Lane, WF, Act, Epi, W, true, St, MinB, true, FT, false, 1, MultiN, Cols>;
        constexpr auto unaligned_kernel =
            stream_mainloop<Lane, WF, Act, Epi, W, false, St, MinB, true, FT, false, 1, MultiN,
                            Cols>;
        if (const cudaError_t e = raise_stream_smem_limit<aligned_kernel, unaligned_kernel>();
            e != cudaSuccess)
          return fail("quads: grouped_gemm: cannot raise the kernel's dynamic shared memory limit",
                      e);
        return launch_stream(aligned_k ? aligned_kernel : unaligned_kernel,
                             static_cast<unsigned>(ny), static_cast<unsigned>(plan.stream_m_tiles),
                             plan.splits, smem, stream, stream_layout::threads, plan.programmatic,
                             p, Epi::to_params(epi), gs);
      };
      // the n8 token tiles and the n-tiles per CTA are template parameters
      // RAC launches whose m-tiles all take the residual columns run the `ResidualColumns` form
      // (the kernel's placement is compile-time: the other form holds the residual buffer only)
      const auto with_tiles = [&]<bool MultiN>() {
        if constexpr (AT::rac)
          if (rac_cols)
            return nt == 1 ? launch.template operator()<1, MultiN, true>()
                           : launch.template operator()<2, MultiN, true>();
        return nt == 1 ? launch.template operator()<1, MultiN>()
                       : launch.template operator()<2, MultiN>();
      };
      return n_per > 1 ? with_tiles.template operator()<true>()
                       : with_tiles.template operator()<false>();
    }
  }

  // Fallback: the persistent decode_layout kernel with a split-K workspace and epilogue pass
  // (row-major weights only).
  if constexpr (is_chunk_tiled<WF>) {
    return fail("quads: grouped_gemm: chunk_tiled weights run on the streaming kernel only (an "
                "epilogue fragment width dividing 128, at most 8 splits, not "
                "grouped_kernel::persistent)");
  } else {
    if (plan.mode == reduction::atomic)
      if (const cudaError_t e = cudaMemsetAsync(workspace, 0, plan.workspace_bytes, stream);
          e != cudaSuccess)
        return fail(cudaGetErrorString(e), e);
    detail::grouped_mainloop<Lane, WF, Act>
        <<<static_cast<unsigned>(plan.ctas), decode_layout::threads, 0, stream>>>(p, s);
    const long long frags = static_cast<long long>(M) * ((N + W - 1) / W);
    const unsigned blocks = static_cast<unsigned>((frags + 127) / 128);
    detail::grouped_epilogue<Epi, W><<<blocks, 128, 0, stream>>>(
        p.ws, p.ws_r, M, N, plan.stored_partials(), expert_offsets, E, Epi::to_params(epi));
    return ::quads::kernels::detail::after_launch();
  }
}

} // namespace quads::gemm
