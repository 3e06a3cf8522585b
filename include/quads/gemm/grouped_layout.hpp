// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The grouped (MoE expert) GEMM's launch plan and its device-side tile scheduler
//!        (host + device), shared by `quads/gemm/grouped.cuh` and the host tests.
//!
//! Overview (docs/gemm.md, "Grouped expert GEMM"). A rows `[0, max_rows)` are grouped by expert:
//! rows `[offsets[e], offsets[e + 1])` use expert e's weights `[N, K]` (offsets written on the
//! device by routing; the host never reads them). The work is a flat list of items
//! `(m-tile, split, n-tile)` over the non-empty experts only: expert e has
//! `ceil(rows_e / tile_rows)` m-tiles, and every m-tile has `splits * n_tiles` items. The
//! streaming kernel (the default) launches one CTA per (split, n-tile group, m-tile slot) with
//! `plan.stream_tile_rows`-row m-tiles; the slots beyond the routing's m-tiles leave at once. A
//! persistent grid of `plan.ctas` CTAs walks the list (item = blockIdx.x, += gridDim.x); each CTA
//! (the fallback kernel, 16-row m-tiles) first builds the prefix sums of m-tiles per expert in
//! shared memory from `offsets`, then finds an item's expert by binary search (the streaming
//! kernel does the same for its m-tile). So no CTA works for an empty expert, and the launch needs
//! no host synchronisation (graph-capturable).
#pragma once

#include <quads/config.hpp>

#include <quads/gemm/decode_layout.hpp>

#include <cuda/std/cstddef>
#include <cuda/std/cstdint>

namespace quads::gemm {

//! Largest expert count of one grouped launch (the scheduler's shared-memory prefix table).
inline constexpr int grouped_max_experts = 1024;

//! Which mainloop `grouped_gemm` runs (`grouped_plan::kernel`).
enum class grouped_kernel : ::cuda::std::uint8_t {
  automatic,   //!< the launcher's rule (grouped.cuh: streaming when the fragments tile a CTA)
  streaming,   //!< the streaming kernel when the operands allow it (else persistent)
  persistent,  //!< the persistent decode-tile kernel (split partials + epilogue pass)
};

//! The name of a kernel choice (logs, test labels).
constexpr const char* grouped_kernel_name(grouped_kernel k) noexcept {
  return k == grouped_kernel::persistent ? "persistent"
         : k == grouped_kernel::streaming ? "streaming"
                                          : "automatic";
}

//! How to run one grouped GEMM (host side; see the file comment).
struct grouped_plan {
  int max_rows = 0;  //!< rows of A (and of the workspace); offsets[E] <= max_rows
  int N = 0;
  int K = 0;
  int experts = 0;
  int splits = 1;
  int chunks = 0;            //!< ceil(K / chunk_k)
  int chunks_per_split = 0;
  int n_tiles = 0;           //!< ceil(N / rows_per_cta)
  int ctas = 0;              //!< persistent grid size (fallback kernel)
  int stream_m_tiles = 0;    //!< m-tile slots of the streaming kernel's grid
  //! Rows of one m-tile of the streaming kernel (4, 8 or 16; the persistent kernel's are 16).
  int stream_tile_rows = decode_layout::tokens_per_cta;
  reduction mode = reduction::deterministic;
  bool residual = false;     //!< a second accumulator (RAC composition (b), `own` scale)
  //! Kernel choice; plan_grouped leaves `automatic`, tests set it to run one path explicitly.
  grouped_kernel kernel = grouped_kernel::automatic;
  //! 128-row n-tiles one CTA of the streaming kernel streams in turn, its activations staged
  //! once (resident activations only; slab-mode launches take 1). 0: the launcher's rule
  //! (`grouped_n_tiles_per_cta`); plan_grouped leaves 0, tests and benchmarks set it.
  int n_tiles_per_cta = 0;
  //! Launch the streaming kernel as a programmatic dependent of the stream's previous kernel
  //! (PDL, sm_90): its CTAs may start while that kernel finishes, read `expert_offsets` and
  //! prefetch weights, and wait for it (`griddepcontrol.wait`) before reading the activations or
  //! writing anything. So the offsets (and weights) must be complete before the previous kernel
  //! can start: written by a kernel that the previous one (or one before it) waited for before
  //! releasing its dependents, as routing is in `moe::forward`. plan_grouped leaves false; the
  //! persistent fallback kernel always launches plainly.
  bool programmatic = false;
  //! Where the streaming kernel releases the stream's next kernel, if that one is launched
  //! programmatically: at entry (false), or after its first n-tile's mainloop (true), so that
  //! the next grid's CTAs are placed only as this one nears its end instead of beside it.
  //! plan_grouped leaves false; the persistent fallback kernel never releases early.
  bool late_release = false;
  ::cuda::std::size_t workspace_bytes = 0;

  constexpr ::cuda::std::size_t partial_floats() const noexcept {
    return static_cast<::cuda::std::size_t>(max_rows) * static_cast<::cuda::std::size_t>(N);
  }
  constexpr int stored_partials() const noexcept {
    return mode == reduction::deterministic ? splits : 1;
  }
  constexpr ::cuda::std::size_t residual_offset() const noexcept {
    return partial_floats() * static_cast<::cuda::std::size_t>(stored_partials());
  }
  //! An upper bound on the m-tiles of any routing: sum_e ceil(rows_e / tile_rows) over
  //! non-empty experts (default: the persistent kernel's 16-row tiles).
  constexpr long max_m_tiles(int tile_rows = decode_layout::tokens_per_cta) const noexcept {
    const long T = tile_rows;
    const long busy = experts < max_rows ? experts : max_rows;  // non-empty experts at most
    const long bound = (static_cast<long>(max_rows) + (T - 1) * busy) / T;
    return bound;
  }
};

//! Rows of the streaming kernel's m-tiles for a routing of at most `max_rows` rows over
//! `experts`: sized by the rows a non-empty expert holds when the rows spread evenly (decode
//! routings hold 1-2 per expert). 4 when that is at most 2 (RAC then stages its residual in the
//! tile's spare MMA columns, decode.cuh), 8 up to 4 (one n8 token tile: half the activation
//! shared memory and MMAs of a 16-row tile; RAC stages its residuals in a second tile), else 16. An expert with more rows than a tile
//! takes several m-tiles, each streaming the expert's weights again.
constexpr int grouped_stream_tile_rows(int max_rows, int experts) noexcept {
  const long busy = experts < max_rows ? experts : max_rows;
  if (busy <= 0) return decode_layout::tokens_per_cta;
  const long per = (static_cast<long>(max_rows) + busy - 1) / busy;
  if (per <= 2) return stream_layout::rac_col_capacity(1);
  return per <= 4 ? 8 : decode_layout::tokens_per_cta;
}

//! n-tiles per CTA of a resident streaming launch of `ctas` CTAs (one n-tile each) on a GPU that
//! holds `slots` of them at once: 2 when the grid is more than one wave, else 1. A second-wave
//! CTA pays the whole prologue again (offsets, activation staging, first ring fill: 4-6 us on
//! the H200); with two n-tiles a CTA stages once and its second n-tile starts with the ring fill
//! alone (DeepSeek-V3 down GEMM, T = 1: 448 -> 224 CTAs). One-wave grids keep one n-tile per CTA
//! (fewer CTAs would leave SMs idle). Forced 1-6 n-tiles on the H200 (2026-12-02,
//! docs/history/moe.md "Sixteenth session"): 2 was best or within 1-3 % of best at every decode
//! size of both models with more than one wave; 3 and 4 lost at some sizes (Qwen3-30B-A3B
//! T = 16: +6-11 %).
constexpr int grouped_n_tiles_per_cta(long ctas, long slots) noexcept {
  return ctas > slots ? 2 : 1;
}

//! The plan for a grouped GEMM over `experts` weight matrices `[N, K]` and at most `max_rows`
//! A rows, on a GPU with `sm_count` SMs. `opt.splits = 0` picks the split-K factor from the
//! expected tile count `max(ceil(max_rows / tile_rows), min(experts, max_rows))` (decode: every
//! row in its own expert) for about two CTAs per SM, keeping at least 4 chunks per split.
//! (Raising it until a split's activations stay resident made DeepSeek-V3's gate_up slower on
//! the H200: 512 resident CTAs ran in two waves where 256 slab-mode CTAs ran in one; 07:09 UTC.)
//! Shapes are not checked here (the launcher does); non-positive sizes give an empty plan
//! (`chunks = 0`).
constexpr grouped_plan plan_grouped(int max_rows, int N, int K, int experts, bool residual,
                                          decode_options opt = {}, int sm_count = 132) noexcept {
  grouped_plan p;
  p.max_rows = max_rows;
  p.N = N;
  p.K = K;
  p.experts = experts;
  p.mode = opt.mode;
  p.residual = residual;
  if (max_rows <= 0 || N <= 0 || K <= 0 || experts <= 0) return p;
  using L = decode_layout;
  p.chunks = (K + L::chunk_k - 1) / L::chunk_k;
  p.n_tiles = (N + L::rows_per_cta - 1) / L::rows_per_cta;
  using S = stream_layout;
  p.stream_tile_rows = grouped_stream_tile_rows(max_rows, experts);
  const int tile = p.stream_tile_rows;
  const long by_rows = (static_cast<long>(max_rows) + tile - 1) / tile;
  const long by_experts = experts < max_rows ? experts : max_rows;
  const long tiles = (by_rows > by_experts ? by_rows : by_experts) *
                     ((N + S::rows_per_cta - 1) / S::rows_per_cta);
  const long sms = sm_count > 0 ? sm_count : 1;
  int splits = opt.splits;
  if (splits <= 0) {
    const long want = 2 * sms / tiles;
    int cap = p.chunks / 4 > 1 ? p.chunks / 4 : 1;
    if (cap > S::default_max_splits) cap = S::default_max_splits;
    splits = want < 1 ? 1 : (want > cap ? cap : static_cast<int>(want));
  }
  if (splits > p.chunks) splits = p.chunks;
  p.chunks_per_split = (p.chunks + splits - 1) / splits;
  p.splits = (p.chunks + p.chunks_per_split - 1) / p.chunks_per_split;
  const long items = p.max_m_tiles() * p.n_tiles * p.splits;
  const long cap_ctas = 4 * sms;  // resident CTAs of 128 threads at ~100 registers
  p.ctas = static_cast<int>(items < cap_ctas ? (items > 0 ? items : 1) : cap_ctas);
  p.stream_m_tiles = static_cast<int>(p.max_m_tiles(tile));
  const ::cuda::std::size_t per =
      p.partial_floats() * static_cast<::cuda::std::size_t>(p.stored_partials());
  p.workspace_bytes = per * (residual ? 2u : 1u) * sizeof(float);
  return p;
}

//! One scheduled item of a grouped GEMM.
struct grouped_item {
  int expert;
  int m0, m_end;  //!< A rows [m0, m_end)
  int n_tile;
  int split;
};

//! Item `w` of the flat list of `tile_rows`-row m-tiles, given `prefix[e]` = m-tiles of experts
//! before e (`prefix[E]` = total) and the offsets. `w` must be below `prefix[E] * splits *
//! n_tiles`.
QUADS_API constexpr grouped_item
grouped_item_at(long w, const int* prefix, const int* offsets, int experts, int splits, int n_tiles,
                int tile_rows = decode_layout::tokens_per_cta) noexcept {
  const long per_tile = static_cast<long>(splits) * n_tiles;
  const int mt = static_cast<int>(w / per_tile);
  const int rem = static_cast<int>(w % per_tile);
  // largest e with prefix[e] <= mt: empty experts (prefix[e] == prefix[e + 1]) are skipped
  int lo = 0, hi = experts - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (prefix[mid] <= mt) lo = mid;
    else hi = mid - 1;
  }
  grouped_item it{};
  it.expert = lo;
  const int first = offsets[lo];
  const int last = offsets[lo + 1];
  it.m0 = first + (mt - prefix[lo]) * tile_rows;
  it.m_end = it.m0 + tile_rows < last ? it.m0 + tile_rows : last;
  it.split = rem / n_tiles;
  it.n_tile = rem % n_tiles;
  return it;
}

//! m-tiles of one expert's rows.
QUADS_API constexpr int grouped_m_tiles(int rows,
                                        int tile_rows = decode_layout::tokens_per_cta) noexcept {
  return rows > 0 ? (rows + tile_rows - 1) / tile_rows : 0;
}

//! One entry of an m-tile table: the streaming kernel's m-tile slot as expert and A rows
//! `[m0, m_end)`; `expert < 0` past the routing's m-tiles (the slot's CTAs leave at once).
struct alignas(16) grouped_m_tile {
  int expert;
  int m0, m_end;
  int unused; //!< 0 (pads the entry to one 16-byte load)
};

//! An m-tile table in device memory: `slots` entries for `tile_rows`-row m-tiles, entry z =
//! the streaming kernel's m-tile slot z in the order of `grouped_item_at` (experts ascending,
//! then rows). Written once per routing (by `moe::route` through `routing_view::m_tiles`, or
//! by `write_m_tile_table`), it serves every grouped GEMM of that routing whose plan has the
//! same `stream_tile_rows` and `stream_m_tiles`: each CTA then reads its entry (one 16-byte
//! load) instead of reading all E + 1 offsets, scanning them and searching its m-tile
//! (docs/moe.md, "The m-tile table"). `entries == nullptr`: no table.
struct grouped_m_tile_table {
  grouped_m_tile* entries = nullptr;
  int tile_rows = 0;
  int slots = 0;
};

//! The table a grouped GEMM of `plan` reads, at `entries` (`plan.stream_m_tiles` entries).
constexpr grouped_m_tile_table m_tile_table_for(const grouped_plan& plan,
                                                grouped_m_tile* entries) noexcept {
  return {entries, plan.stream_tile_rows, plan.stream_m_tiles};
}

//! The entry of expert e's m-tile j (rows `[first, last)` of A).
QUADS_API constexpr grouped_m_tile grouped_m_tile_at(int e, int first, int last, int j,
                                                     int tile_rows) noexcept {
  const int m0 = first + j * tile_rows;
  return {e, m0, m0 + tile_rows < last ? m0 + tile_rows : last, 0};
}

//! An expert offset as the grouped kernels and table writers read it: clamped to [0, max_rows].
QUADS_API constexpr int clamp_offset(int v, int max_rows) noexcept {
  return v < 0 ? 0 : (v > max_rows ? max_rows : v);
}

//! The table of `offsets` (E + 1 values, clamped to [0, max_rows] as the kernels do) into
//! `out[0, slots)` (host reference of the device writers; m-tiles past `slots` are dropped, as
//! the scan path's grid drops them).
constexpr void fill_m_tile_table(const int* offsets, int experts, int max_rows, int tile_rows,
                                 int slots, grouped_m_tile* out) noexcept {
  int z = 0;
  for (int e = 0; e < experts; ++e) {
    const int first = clamp_offset(offsets[e], max_rows);
    const int last = clamp_offset(offsets[e + 1], max_rows);
    for (int j = 0; j < grouped_m_tiles(last - first, tile_rows) && z < slots; ++j)
      out[z++] = grouped_m_tile_at(e, first, last, j, tile_rows);
  }
  for (; z < slots; ++z)
    out[z] = {-1, 0, 0, 0};
}

} // namespace quads::gemm
