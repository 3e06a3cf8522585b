// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Writing a grouped GEMM's m-tile table on the device (nvcc only): the parts routing
//!        kernels call, and a one-CTA launcher for offsets that come from elsewhere.
//!
//! The table (`grouped_m_tile_table`, quads/gemm/grouped_layout.hpp) lists the streaming
//! kernel's m-tiles in slot order. A writer needs every expert's first row, row count and first
//! slot (the exclusive scan of the experts' m-tile counts); `moe::route` folds that scan into
//! its offsets scan, `write_m_tile_table` runs its own.
//! @code
//!   auto plan = quads::gemm::plan_grouped(max_rows, N, K, E, false);
//!   quads::gemm::write_m_tile_table(plan, offsets, entries, stream);  // entries: stream_m_tiles
//!   quads::gemm::grouped_gemm<Lane, Epi>(plan, w, a, offsets, epi, ws, stream,
//!                                        quads::gemm::m_tile_table_for(plan, entries));
//! @endcode
#pragma once

#if !defined(__CUDACC__)
#  error "quads/gemm/m_tile_table.cuh needs nvcc (CUDA C++)"
#endif

#include <quads/gemm/grouped_layout.hpp>
#include <quads/kernels/common.cuh>

#include <cub/block/block_scan.cuh>

#include <cuda_runtime.h>

namespace quads::gemm {
namespace detail {

//! Expert e's entries: its rows `[first, last)` from slot `first_slot` on (slots past the table
//! are dropped).
QUADS_DEVICE_API void write_expert_m_tiles(const grouped_m_tile_table& t, int e, int first,
                                           int last, int first_slot) {
  const int n = grouped_m_tiles(last - first, t.tile_rows);
  for (int j = 0; j < n && first_slot + j < t.slots; ++j)
    t.entries[first_slot + j] = grouped_m_tile_at(e, first, last, j, t.tile_rows);
}

//! Marks slots `[total, slots)` empty; the `threads` threads of a CTA share the work.
QUADS_DEVICE_API void write_empty_m_tiles(const grouped_m_tile_table& t, int total, int tid,
                                          int threads) {
  for (int z = total + tid; z < t.slots; z += threads)
    t.entries[z] = {-1, 0, 0, 0};
}

inline constexpr int m_tile_table_threads = grouped_max_experts; // one thread per expert

template <int = 0> // a template, so the header can be in several TUs
__global__ void __launch_bounds__(m_tile_table_threads)
    m_tile_table_kernel(const int* __restrict__ offsets, int experts, int max_rows,
                        const grouped_m_tile_table t) {
  using scan_t = cub::BlockScan<int, m_tile_table_threads>;
  __shared__ typename scan_t::TempStorage scan;
  const int e = static_cast<int>(threadIdx.x);
  const int first = e < experts ? clamp_offset(offsets[e], max_rows) : 0;
  const int last = e < experts ? clamp_offset(offsets[e + 1], max_rows) : 0;
  int slot = 0, total = 0;
  scan_t(scan).ExclusiveSum(grouped_m_tiles(last - first, t.tile_rows), slot, total);
  if (e < experts) write_expert_m_tiles(t, e, first, last, slot);
  write_empty_m_tiles(t, total, e, m_tile_table_threads);
}

} // namespace detail

//! Writes the m-tile table `t` of the device offsets `expert_offsets` (E + 1 values for
//! `experts` experts, clamped to [0, max_rows] as `grouped_gemm` reads them): one kernel of one
//! CTA, no host synchronisation. Refusals return cudaErrorInvalidValue with a message, nothing
//! enqueued.
inline cudaError_t write_m_tile_table(const int* expert_offsets, int experts, int max_rows,
                                      const grouped_m_tile_table& t, cudaStream_t stream) {
  namespace kd = ::quads::kernels::detail;
  if (experts <= 0 || experts > grouped_max_experts || max_rows < 0)
    return kd::fail("quads: write_m_tile_table: experts must be in [1, grouped_max_experts], "
                    "max_rows >= 0");
  if (t.tile_rows <= 0 || t.slots <= 0)
    return kd::fail("quads: write_m_tile_table: the table needs positive tile_rows and slots "
                    "(m_tile_table_for of a plan)");
  if (expert_offsets == nullptr || !kd::aligned(expert_offsets, 4))
    return kd::fail("quads: write_m_tile_table: expert_offsets must be a device int[E + 1]");
  if (t.entries == nullptr || !kd::aligned(t.entries, 16))
    return kd::fail("quads: write_m_tile_table: entries must be 16-byte aligned device memory");
  detail::m_tile_table_kernel<>
      <<<1, detail::m_tile_table_threads, 0, stream>>>(expert_offsets, experts, max_rows, t);
  return kd::after_launch();
}

//! `write_m_tile_table` for the grouped GEMMs of `plan`: `entries` holds `plan.stream_m_tiles`.
inline cudaError_t write_m_tile_table(const grouped_plan& plan, const int* expert_offsets,
                                      grouped_m_tile* entries, cudaStream_t stream) {
  return write_m_tile_table(expert_offsets, plan.experts, plan.max_rows,
                            m_tile_table_for(plan, entries), stream);
}

} // namespace quads::gemm
