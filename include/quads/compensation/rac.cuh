// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GPU RAC: one pass over x writing `[Q(x) | Q(r_S)]` with both scale sets, and the
//!        calibration statistics (nvcc only).
//!
//! Launchers (namespace `quads::compensation::kernels`, error scheme of `quads/kernels/common.cuh`:
//! they return `cudaError_t`, never synchronise, and `quads::kernels::last_error_message()` says
//! why an argument was refused):
//! - `rac_quantize<Quantizer, Layout>(x, rows, selection, out, args, stream)`: byte-identical to
//!   `compensation::reference::quantize_activation<Format, Options, Layout>`;
//! - `accumulate_statistics<Quantizer>(x, rows, stats, workspace, given, stream)` and
//!   `decay_statistics(stats, factor, stream)`: bit-identical to `compensation::calibrator`
//!   (a fixed-order reduction: fp32 partial sums per 64-row chunk, then fp64 sums in chunk order;
//!   no atomics on the sums, so the doubles do not depend on scheduling).
//!
//! `rac_quantize` kernels: each block goes through `residual_quantizer<Quantizer>` (the one QDQ
//! path, twice for a selected block) or, for the NVFP4 default recipe from bf16 / fp16, through
//! the kernels' turbo path, which gives the same bytes. Without permutation: the pair kernel (warp
//! steps of 32 block pairs, residuals through a per-warp ring; fewer than 3/4 of the blocks
//! selected, even K / B, either residual scale), the column kernel (a per-CTA column map, selected
//! columns first; the other turbo cases with a shared residual scale), else a grid-stride loop
//! giving each thread whole blocks (two per iteration for more loads in flight); with a
//! permutation each CTA stages a row in shared memory with coalesced 16-byte loads and gathers the
//! permuted blocks from there.
//! Passes over x: 1 with a given x scale and `residual_scale::shared`; +1 amax pass for
//! `global_scale::per_tensor` / `per_row`; +1 pass over the selected blocks for
//! `residual_scale::own` (their residual amax).
#pragma once

#include <quads/compensation/calibration.hpp>
#include <quads/compensation/residual.hpp>
#include <quads/compensation/selection.hpp>
#include <quads/kernels/amax.cuh>
#include <quads/kernels/common.cuh>
#include <quads/kernels/quantize.cuh>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace quads::compensation::kernels {

using ::quads::kernels::is_kernel_element;
using ::quads::kernels::last_error_message;

//! A selection in device memory. `order` (K ints; null for `permutation::none`), `slot` (K/B ints:
//! residual index or -1) and `blocks` (|S|/B ints, ascending) as made by `selection_tables`.
struct device_selection {
  int channels = 0;
  int selected_blocks = 0;
  const int* order = nullptr;
  const int* slot = nullptr;
  const int* blocks = nullptr;
};

//! The host arrays behind a `device_selection` (copy them to the device yourself).
struct selection_tables {
  std::vector<int> order; //!< empty when not permuted
  std::vector<int> slot;
  std::vector<int> blocks;
};
inline selection_tables make_selection_tables(const channel_selection& sel) {
  sel.validate();
  return {sel.permuted() ? sel.order : std::vector<int>{}, sel.slot_table(), sel.blocks};
}

//! The augmented activation operand in device memory (layout of `reference::rac_activation`):
//! `data` rows * K'/2 bytes (aligned to B/2), `scales` `Layout{rows, K'/B}.size()` bytes,
//! `x_scales` / `r_scales` one entry, or `rows` with `global_scale::per_row` (may be null for
//! schemes without a tensor scale).
struct rac_view {
  std::uint8_t* data = nullptr;
  std::uint8_t* scales = nullptr;
  tensor_scale* x_scales = nullptr;
  tensor_scale* r_scales = nullptr;
};

//! Options of `rac_quantize`. `given`: device pointer to x's tensor scale (one entry) for
//! `global_scale::given`. `workspace`: `rac_workspace_floats(rows)` device floats (amax of x for
//! per_tensor / per_row, and of r_S for `own`); unused (may be null) with a given scale and
//! `shared`. `seed`: stochastic rounding (x blocks as `reference::quantize`, residual blocks
//! after).
struct rac_args {
  residual_scale residual = residual_scale::shared;
  const tensor_scale* given = nullptr;
  float* workspace = nullptr;
  std::uint64_t seed = 0;
};

inline constexpr std::size_t rac_workspace_floats(int rows) noexcept {
  return 2 * static_cast<std::size_t>(rows > 1 ? rows : 1);
}

namespace detail {

namespace kd = ::quads::kernels::detail;

inline constexpr int rac_threads = 256;

//! Blocks per thread per iteration: two when a block's input is at most 32 bytes (more loads in
//! flight), else one.
template <class T, int B>
inline constexpr int rac_unroll = B* static_cast<int>(sizeof(T)) <= 32 ? 2 : 1;

//! The packed codes of a block as 32-bit words (element 8w + i in nibble i of word w).
template <class Format>
struct code_words {
  std::uint32_t w[Format::block_size / 8];
};
template <class Format>
QUADS_DEVICE_API code_words<Format> words_of(const packed_block<Format>& pb) {
  code_words<Format> c;
#pragma unroll
  for (int i = 0; i < Format::block_size / 8; ++i)
    c.w[i] = static_cast<std::uint32_t>(pb.codes[4 * i]) |
             (static_cast<std::uint32_t>(pb.codes[4 * i + 1]) << 8) |
             (static_cast<std::uint32_t>(pb.codes[4 * i + 2]) << 16) |
             (static_cast<std::uint32_t>(pb.codes[4 * i + 3]) << 24);
  return c;
}
template <class Format>
QUADS_DEVICE_API packed_block<Format> block_of(const code_words<Format>& c, std::uint8_t scale) {
  packed_block<Format> pb;
#pragma unroll
  for (int i = 0; i < Format::block_size / 2; ++i)
    pb.codes[i] = static_cast<std::uint8_t>(c.w[i / 4] >> (8 * (i % 4)));
  pb.scale = scale;
  return pb;
}

//! x's (and the residual's) tensor scale for a row.
template <class Quantizer>
struct scale_source {
  const tensor_scale* given = nullptr;
  const float* x_amax = nullptr; //!< 1 or rows (per_row)
  const float* r_amax = nullptr; //!< `own` only: 1 or rows
  bool own = false;

  static constexpr bool per_row =
      Quantizer::format::has_tensor_scale && Quantizer::options.global == global_scale::per_row;

  QUADS_DEVICE_API tensor_scale x(int row) const {
    using F = typename Quantizer::format;
    constexpr quant_options O = Quantizer::options;
    if constexpr (!F::has_tensor_scale) {
      (void)row;
      return {};
    } else if constexpr (O.global == global_scale::given) {
      (void)row;
      return given[0];
    } else {
      return make_tensor_scale<F, O>(x_amax[per_row ? row : 0]);
    }
  }
  QUADS_DEVICE_API tensor_scale r(int row, tensor_scale ts_x) const {
    using F = typename Quantizer::format;
    if constexpr (!F::has_tensor_scale) {
      (void)row;
      return ts_x;
    } else {
      return own ? make_tensor_scale<F, Quantizer::options>(r_amax[per_row ? row : 0]) : ts_x;
    }
  }
};

//! Quantizes block `kb` of `row` (values `v`) and its residual if selected; writes both. Every
//! block goes through `Quantizer::quantize` and the residual through `residual_quantizer`
//! (`Quantizer::decode`): the core functors themselves, the one QDQ path.
template <class Quantizer, class Layout>
struct rac_writer {
  using F = typename Quantizer::format;
  static constexpr int B = F::block_size;
  std::uint8_t* data;
  std::uint8_t* scales;
  tensor_scale* x_scales;
  tensor_scale* r_scales;
  Layout layout; //!< {rows, K'/B}
  int rows;
  int nkb;
  int nsel;
  std::uint64_t seed;

  QUADS_DEVICE_API void store_words(std::uint8_t* p, const code_words<F>& q) const {
    if constexpr (B == 16) {
      *reinterpret_cast<uint2*>(p) = make_uint2(q.w[0], q.w[1]);
    } else {
#pragma unroll
      for (int i = 0; i < B / 32; ++i)
        reinterpret_cast<uint4*>(p)[i] =
            make_uint4(q.w[4 * i], q.w[4 * i + 1], q.w[4 * i + 2], q.w[4 * i + 3]);
    }
  }

  //! `Quantizer::quantize` of one block as code words: nearest-even amax -> 6 goes through the
  //! kernels' block path (`quantize_blocks`, bit-identical to the core functor and verified by
  //! the GPU suite), everything else through `Quantizer::quantize` itself.
  QUADS_DEVICE_API static std::uint8_t quantize_words(const float (&v)[B], tensor_scale ts,
                                                      std::uint64_t seed, std::uint64_t index,
                                                      code_words<F>& out) {
    if constexpr (kd::fast_path_applies<Quantizer>) {
      kd::block_words<B> bw;
      kd::quantize_block<Quantizer>(v, ts, seed, index, bw);
#pragma unroll
      for (int i = 0; i < B / 8; ++i)
        out.w[i] = bw.w[i];
      return bw.scale;
    } else {
      const packed_block<F> pb = Quantizer::quantize(v, ts, Quantizer::bits_for(seed, index));
      out = words_of(pb);
      return pb.scale;
    }
  }

  //! Q(x) of block `kb` of `row` (`Quantizer::quantize`, the one QDQ path).
  QUADS_DEVICE_API std::uint8_t quantize_x(const float (&v)[B], tensor_scale ts_x, int row, int kb,
                                           code_words<F>& out) const {
    return quantize_words(
        v, ts_x, seed, static_cast<std::uint64_t>(row) * static_cast<std::uint64_t>(nkb) + kb, out);
  }

  //! Q(v - QDQ(v)) with `ts_r` (`residual_quantizer`, i.e. `Quantizer::decode` and `::quantize`).
  QUADS_DEVICE_API std::uint8_t residual(const float (&v)[B], const code_words<F>& cx,
                                         std::uint8_t sx, tensor_scale ts_x, tensor_scale ts_r,
                                         int row, int j, code_words<F>& out) const {
    float r[B];
    residual_quantizer<Quantizer>::residual(v, block_of(cx, sx), ts_x, r);
    return quantize_words(r, ts_r, seed, residual_block_index(rows, nkb, nsel, row, j), out);
  }

  QUADS_DEVICE_API void put(const float (&v)[B], int row, int kb, int j, tensor_scale ts_x,
                            tensor_scale ts_r) const {
    const std::size_t row_bytes = static_cast<std::size_t>(nkb + nsel) * (B / 2);
    std::uint8_t* out_row = data + static_cast<std::size_t>(row) * row_bytes;
    code_words<F> cx;
    const std::uint8_t sx = quantize_x(v, ts_x, row, kb, cx);
    store_words(out_row + static_cast<std::size_t>(kb) * (B / 2), cx);
    scales[layout.offset(row, kb)] = sx;
    if (j >= 0) {
      code_words<F> cr;
      const std::uint8_t sr = residual(v, cx, sx, ts_x, ts_r, row, j, cr);
      store_words(out_row + static_cast<std::size_t>(nkb + j) * (B / 2), cr);
      scales[layout.offset(row, nkb + j)] = sr;
    }
    if (kb == 0 && (scale_source<Quantizer>::per_row || row == 0)) {
      const int at = scale_source<Quantizer>::per_row ? row : 0;
      if (x_scales != nullptr) x_scales[at] = ts_x;
      if (r_scales != nullptr) r_scales[at] = ts_r;
    }
  }
};

//! max over a CTA for the per-tensor residual amax (thread 0 does the atomic).
QUADS_DEVICE_API void reduce_amax_to(float m, float* dst, float* red) {
  m = kd::cta_max(m, red);
  if (threadIdx.x == 0) kd::atomic_max_nonneg(dst, m);
}

//! Lane mapping of the unpermuted kernels: a warp covers `R` rows x `32 / R` consecutive blocks
//! (R = 32 unless there are fewer rows), so with R = 32 a warp works on one block column and the
//! selected / not-selected branch is uniform across it (selection is per column).
struct warp_tiling {
  int rows;
  int cols;            //!< blocks per row of the work (nkb, or nsel for the amax pass)
  std::uint32_t log_r; //!< R = 2^log_r rows per warp
  std::uint32_t col_groups;
  std::uint32_t units; //!< warps' worth of work

  static warp_tiling make(int rows, int cols) {
    std::uint32_t lr = 0;
    while ((1 << lr) < rows && lr < 5)
      ++lr;
    const std::uint32_t c = 32u >> lr;
    const std::uint32_t groups = (static_cast<std::uint32_t>(cols) + c - 1) / c;
    const std::uint32_t row_groups = (static_cast<std::uint32_t>(rows) + (1u << lr) - 1) >> lr;
    return {rows, cols, lr, groups, groups * row_groups};
  }
  //! Row and column of `lane` in unit `w`; false if outside the matrix.
  QUADS_DEVICE_API bool at(std::uint32_t w, std::uint32_t lane, int& row, int& col) const {
    const std::uint32_t rg = w / col_groups, cg = w - rg * col_groups;
    const std::uint32_t lr = lane & ((1u << log_r) - 1u), lc = lane >> log_r;
    row = static_cast<int>((rg << log_r) + lr);
    col = static_cast<int>(cg * (32u >> log_r) + lc);
    return row < rows && col < cols;
  }
};

//! Words of one deferred residual task in shared memory: x's raw block, Q(x)'s code words, and
//! (row, residual index, x's scale byte), stored as a structure of arrays (conflict-free).
template <class T, int B>
inline constexpr int task_words = B* static_cast<int>(sizeof(T)) / 4 + B / 8 + 3;

//! Capacity of a warp's task ring: (U + 1) * 32 tasks when 8 warps' rings fit in 48 KiB of
//! static shared memory (tasks then accumulate over iterations and are processed 32 at a time),
//! else U * 32 (processed every iteration).
template <class T, int B, int U>
inline constexpr int task_capacity = 8 * (U + 1) * 32 * task_words<T, B> * 4 <= 48 * 1024
                                         ? (U + 1) * 32
                                         : U * 32;

//! No permutation, write pass. Phase 1: consecutive lanes take consecutive blocks of the
//! flattened (row, block) index, U blocks each (coalesced loads and stores, as the plain quantize
//! kernel), and write Q(x); a selected block is appended to the warp's task ring in shared
//! memory (ballot + popc). Phase 2: whenever 32 tasks are pending, the warp's lanes take one each
//! (dequantize Q(x), residual, quantize it, write Q(r)), so the scattered selection neither
//! serialises the residual work nor leaves lanes idle.
template <class Quantizer, class Layout, class T>
__global__ void __launch_bounds__(rac_threads, 4)
    rac_plain_kernel(const T* x, std::int64_t row_stride, kd::fast_divmod nkb_div,
                     std::uint32_t total, const int* slot, scale_source<Quantizer> src,
                     rac_writer<Quantizer, Layout> w) {
  using F = typename Quantizer::format;
  constexpr int B = Quantizer::block_size;
  constexpr int U = rac_unroll<T, B>;
  constexpr int RW = B * static_cast<int>(sizeof(T)) / 4; // raw words per block
  constexpr int TW = task_words<T, B>;
  constexpr int CAP = task_capacity<T, B, U>;
  constexpr bool ring = CAP > U * 32;
  constexpr bool per_row = scale_source<Quantizer>::per_row;
  __shared__ std::uint32_t tasks[rac_threads / 32][CAP * TW];
  std::uint32_t* my = tasks[threadIdx.x >> 5];
  tensor_scale ts_x{}, ts_r{};
  if constexpr (!per_row) {
    ts_x = src.x(0);
    ts_r = src.r(0, ts_x);
  }
  // Q(x) through the turbo block path when x's scale is one per call (per-CTA multiplier table)
  constexpr bool turbo = kd::turbo_applies<Quantizer, T> && !per_row;
  __shared__ float turbo_tab[turbo ? kd::turbo_table_floats : 1];
  kd::turbo_ctx tc{};
  if constexpr (turbo) tc = kd::make_turbo_ctx<Quantizer>(ts_x, turbo_tab);
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const std::uint32_t stride = gridDim.x * blockDim.x;
  const std::uint32_t row_bytes = static_cast<std::uint32_t>(w.nkb + w.nsel) * (B / 2);

  // Task p: word i at my[i * CAP + p] (structure of arrays: lanes hit consecutive words).
  auto process = [&](int p) {
    const std::uint32_t* t = my + p;
    kd::raw_block<T, B> rb;
    std::uint32_t* rw = reinterpret_cast<std::uint32_t*>(&rb);
#pragma unroll
    for (int i = 0; i < RW; ++i)
      rw[i] = t[i * CAP];
    code_words<F> cw;
#pragma unroll
    for (int i = 0; i < B / 8; ++i)
      cw.w[i] = t[(RW + i) * CAP];
    const int r = static_cast<int>(t[(RW + B / 8) * CAP]);
    const int j = static_cast<int>(t[(RW + B / 8 + 1) * CAP]);
    const std::uint8_t sx = static_cast<std::uint8_t>(t[(RW + B / 8 + 2) * CAP]);
    float v[B];
    kd::widen(rb, v);
    tensor_scale tx = ts_x, tr = ts_r;
    if constexpr (per_row) {
      tx = src.x(r);
      tr = src.r(r, tx);
    }
    code_words<F> cr;
    const std::uint8_t sr = w.residual(v, cw, sx, tx, tr, r, j, cr);
    w.store_words(w.data + static_cast<std::size_t>(r) * row_bytes +
                      static_cast<std::size_t>(w.nkb + j) * (B / 2),
                  cr);
    w.scales[w.layout.offset(r, w.nkb + j)] = sr;
  };

  int head = 0, pending = 0; // warp-uniform ring state
  // Warp-uniform loop: every lane runs every iteration (ballots need the whole warp).
  for (std::uint32_t base = (blockIdx.x * blockDim.x) + (threadIdx.x & ~31u); base < total;
       base += U * stride) {
    kd::raw_block<T, B> raw[U];
    std::uint32_t row[U], kb[U];
    bool in[U];
#pragma unroll
    for (int q = 0; q < U; ++q) {
      const std::uint32_t u = base + q * stride + static_cast<std::uint32_t>(lane);
      in[q] = u < total;
      if (in[q]) {
        nkb_div.divmod(u, row[q], kb[q]);
        kd::load_raw<T, B>(x + row[q] * row_stride + static_cast<std::int64_t>(kb[q]) * B, raw[q]);
      }
    }
#pragma unroll
    for (int q = 0; q < U; ++q) {
      int j = -1;
      int r = 0;
      code_words<F> cx{};
      std::uint8_t sx = 0;
      if (in[q]) {
        r = static_cast<int>(row[q]);
        if constexpr (per_row) {
          ts_x = src.x(r);
          ts_r = src.r(r, ts_x);
        }
        j = __ldg(slot + kb[q]);
        bool done = false;
        if constexpr (turbo) {
          if (tc.ok) {
            const kd::raw_block<T, B> one[1] = {raw[q]};
            kd::block_words<B> bw[1];
            float unused[1][B];
            if (kd::turbo_blocks<Quantizer, T, 1, true, false>(one, tc, bw, unused)) {
#pragma unroll
              for (int i = 0; i < B / 8; ++i)
                cx.w[i] = bw[0].w[i];
              sx = bw[0].scale;
              done = true;
            }
          }
        }
        if (!done) {
          float v[B];
          kd::widen(raw[q], v);
          sx = w.quantize_x(v, ts_x, r, static_cast<int>(kb[q]), cx);
        }
        w.store_words(w.data + static_cast<std::size_t>(r) * row_bytes +
                          static_cast<std::size_t>(kb[q]) * (B / 2),
                      cx);
        w.scales[w.layout.offset(r, static_cast<int>(kb[q]))] = sx;
        if (kb[q] == 0 && (per_row || r == 0)) {
          const int at = per_row ? r : 0;
          if (w.x_scales != nullptr) w.x_scales[at] = ts_x;
          if (w.r_scales != nullptr) w.r_scales[at] = ts_r;
        }
      }
      const std::uint32_t sel_mask = __ballot_sync(0xffffffffu, j >= 0);
      if (j >= 0) {
        int p = head + pending + __popc(sel_mask & ((1u << lane) - 1u));
        if (p >= CAP) p -= CAP;
        std::uint32_t* t = my + p;
        const std::uint32_t* rw = reinterpret_cast<const std::uint32_t*>(&raw[q]);
#pragma unroll
        for (int i = 0; i < RW; ++i)
          t[i * CAP] = rw[i];
#pragma unroll
        for (int i = 0; i < B / 8; ++i)
          t[(RW + i) * CAP] = cx.w[i];
        t[(RW + B / 8) * CAP] = static_cast<std::uint32_t>(r);
        t[(RW + B / 8 + 1) * CAP] = static_cast<std::uint32_t>(j);
        t[(RW + B / 8 + 2) * CAP] = sx;
      }
      pending += __popc(sel_mask);
    }
    __syncwarp();
    if constexpr (ring) {
      while (pending >= 32) {
        int p = head + lane;
        if (p >= CAP) p -= CAP;
        process(p);
        head += 32;
        if (head >= CAP) head -= CAP;
        pending -= 32;
      }
    } else {
      for (int p = lane; p < pending; p += 32)
        process(p);
      pending = 0;
    }
    __syncwarp(); // processed slots are rewritten by later appends
  }
  if (lane < pending) { // the ring's remainder (fewer than 32 tasks)
    int p = head + lane;
    if (p >= CAP) p -= CAP;
    process(p);
  }
}

//! Whether the column kernel applies: the turbo block path (NVFP4, nearest-even, amax -> 6, IEEE
//! scale math, bf16 / fp16 input) with one x scale per call (given or per tensor).
template <class Quantizer, class T>
inline constexpr bool rac_column_applies =
    kd::turbo_applies<Quantizer, T> && !scale_source<Quantizer>::per_row;

//! One residual value x - QDQ(x) from `turbo_blocks`' dequantized magnitude `mag` of x's code
//! (the dequantized value has x's sign: see `turbo_blocks`).
QUADS_DEVICE_API float turbo_residual(float x, float mag) {
  return quads::detail::add_rn(
      x, -__uint_as_float(__float_as_uint(mag) | (__float_as_uint(x) & 0x80000000u)));
}

//! One RAC block on the kernels' turbo path with `residual_scale::shared` (`ts_r` = x's scale,
//! whose multiplier table `tc` also serves the residual): Q(x) into `qx` and, when `selected`,
//! Q(x - QDQ(x)) into `qr` (the fp32 turbo block; a residual block holding NaN takes the kernels'
//! fast block path with stochastic block index `r_index`). Bytes equal `residual_quantizer`'s.
//! Returns false, with nothing written, for a NaN x block or an unusable table (`tc.ok` false):
//! the caller then uses the core functors. Requires `kd::turbo_applies<Quantizer, T>`. `P`: the
//! code packing's multipliers (`kd::pack_mul`; literals for latency-bound callers).
template <class Quantizer, class T, kd::pack_mul P = kd::pack_mul::constant>
QUADS_DEVICE_API bool rac_turbo_block(const kd::raw_block<T, 16>& raw, bool selected,
                                      const kd::turbo_ctx& tc, tensor_scale ts_r,
                                      std::uint64_t seed, std::uint64_t r_index,
                                      kd::block_words<16>& qx, kd::block_words<16>& qr) {
  constexpr int B = 16;
  const kd::raw_block<T, B> one[1] = {raw};
  kd::block_words<B> q1[1];
  float dq[1][B];
  if (!tc.ok) return false;
  if (!(selected ? kd::turbo_blocks<Quantizer, T, 1, true, true, P>(one, tc, q1, dq)
                 : kd::turbo_blocks<Quantizer, T, 1, true, false, P>(one, tc, q1, dq)))
    return false;
  qx = q1[0];
  if (selected) {
    float v[B], res[B];
    kd::widen(raw, v);
#pragma unroll
    for (int i = 0; i < B; ++i)
      res[i] = turbo_residual(v[i], dq[0][i]);
    if (!kd::turbo_block_f32<Quantizer, P>(res, tc, qr)) {
      // `kd::quantize_block` spelled out: through the helper ptxas allocated the column kernel's
      // registers differently (spills in the per-tensor instantiation; tenth session)
      float rv[1][B];
#pragma unroll
      for (int i = 0; i < B; ++i)
        rv[0][i] = res[i];
      const std::uint64_t idx[1] = {r_index};
      kd::block_words<B> b1[1];
      kd::quantize_blocks<Quantizer, 1>(rv, ts_r, seed, idx, b1);
      qr = b1[0];
    }
  }
  return true;
}

//! No permutation, column mapping (the default configuration from 3/4 of the blocks selected, or
//! with odd K / B; `rac_pair_kernel` takes the rest). Each CTA walks rows
//! (two per iteration for more loads in flight); thread t takes the t-th entry of a column map
//! that lists the selected blocks first (column c < |S| is residual slot c) and the others after,
//! so a warp's lanes are all selected or all not (except one warp when |S| % 32 != 0) and the
//! residual work runs without divergence and without staging. Q(x) and its dequantized values
//! come from the turbo block path, the residual `x - QDQ(x)` is quantized by the fp32 turbo block
//! (`residual_scale::shared` only: same multiplier table). A residual block holding NaN takes the
//! kernels' fast block path; a NaN x block, or a CTA whose table is unusable, the core functors
//! (`rac_writer`). The column map is built per CTA from `slot` (prefix count of the unselected
//! blocks); the lines of the first rows (and of each next iteration) are prefetched into L1.
//! (A rotation of the map by 32 columns per row pair, which spread the selected columns over the
//! warps, was a benchmark option until the ninth session: 2 % faster at 50 %, 3 % slower at 100 %,
//! and the pair kernel took the ratios where it helped; docs/history/rac.md.)
template <class Quantizer, class Layout, class T, int MinBlocks = 0>
__global__ void __launch_bounds__(rac_threads, MinBlocks)
    rac_column_kernel(const T* x, std::int64_t row_stride, int rows, const int* slot,
                      const int* blocks, scale_source<Quantizer> src,
                      rac_writer<Quantizer, Layout> w) {
  using F = typename Quantizer::format;
  constexpr int B = Quantizer::block_size;
  extern __shared__ int colmap[]; // nkb entries
  __shared__ float turbo_tab[kd::turbo_table_floats];
  kd::pdl_enter(); // launched programmatically above the small-call size
  const int nkb = w.nkb, nsel = w.nsel;
  const int t = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  for (int u = 0; u < 2; ++u) { // the first two rows' lines while the tables are built
    const int r = static_cast<int>(blockIdx.x + u * gridDim.x);
    if (r < rows && t < nkb) kd::prefetch_l1(x + r * row_stride + static_cast<std::int64_t>(t) * B);
  }
  // column map: selected block kb goes to column slot[kb], unselected blocks follow in order
  // (rank by a CTA prefix count of the unselected flags, one pass per blockDim blocks)
  __shared__ int warp_count[rac_threads / 32];
  const int lane = t & 31, warp = t >> 5, nwarps = (n + 31) >> 5;
  int done = 0; // unselected blocks below this pass
  for (int base = 0; base < nkb; base += n) {
    const int kb = base + t;
    const int j = kb < nkb ? __ldg(slot + kb) : 0;
    const bool unsel = kb < nkb && j < 0;
    const unsigned m = __ballot_sync(0xffffffffu, unsel);
    if (lane == 0) warp_count[warp] = __popc(m);
    __syncthreads();
    int before = done + __popc(m & ((1u << lane) - 1u)), total_pass = 0;
    for (int i = 0; i < nwarps; ++i) {
      if (i < warp) before += warp_count[i];
      total_pass += warp_count[i];
    }
    if (kb < nkb) colmap[unsel ? nsel + before : j] = kb;
    done += total_pass;
    __syncthreads(); // warp_count is rewritten by the next pass
  }
  (void)blocks;
  const tensor_scale ts_x = src.x(0);
  const tensor_scale ts_r = ts_x; // the residual shares x's scale
  const kd::turbo_ctx tc = kd::make_turbo_ctx<Quantizer>(ts_x, turbo_tab); // synchronises
  const std::size_t row_bytes = static_cast<std::size_t>(nkb + nsel) * (B / 2);
  const int rstep = static_cast<int>(gridDim.x);
  for (int r0 = static_cast<int>(blockIdx.x); r0 < rows; r0 += 2 * rstep) {
    for (int c = t; c < nkb; c += n) {
      const int kb = colmap[c];
      const bool selected = c < nsel;
      kd::raw_block<T, B> raw[2];
      int rr[2] = {r0, r0 + rstep};
#pragma unroll
      for (int u = 0; u < 2; ++u)
        if (u == 0 || rr[u] < rows)
          kd::load_raw<T, B>(x + rr[u] * row_stride + static_cast<std::int64_t>(kb) * B, raw[u]);
          // the next row pair's lines of this thread's column (its loads then hit L1)
#pragma unroll
      for (int u = 2; u < 4; ++u) {
        const int rn = r0 + u * rstep;
        if (rn < rows) kd::prefetch_l1(x + rn * row_stride + static_cast<std::int64_t>(kb) * B);
      }
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        if (u == 1 && rr[u] >= rows) break;
        const int r = rr[u];
        std::uint8_t* out_row = w.data + static_cast<std::size_t>(r) * row_bytes;
        kd::block_words<B> qx, qr;
        const bool fast = rac_turbo_block<Quantizer, T>(
            raw[u], selected, tc, ts_r, w.seed,
            selected ? residual_block_index(rows, nkb, nsel, r, c) : 0, qx, qr);
        if (fast) {
          code_words<F> cx;
#pragma unroll
          for (int i = 0; i < B / 8; ++i)
            cx.w[i] = qx.w[i];
          w.store_words(out_row + static_cast<std::size_t>(kb) * (B / 2), cx);
          w.scales[w.layout.offset(r, kb)] = qx.scale;
          if (selected) {
            code_words<F> cr;
#pragma unroll
            for (int i = 0; i < B / 8; ++i)
              cr.w[i] = qr.w[i];
            w.store_words(out_row + static_cast<std::size_t>(nkb + c) * (B / 2), cr);
            w.scales[w.layout.offset(r, nkb + c)] = qr.scale;
          }
          if (kb == 0 && r == 0) {
            if (w.x_scales != nullptr) w.x_scales[0] = ts_x;
            if (w.r_scales != nullptr) w.r_scales[0] = ts_r;
          }
        } else { // NaN block or unusable table: the core functors
          float v[B];
          kd::widen(raw[u], v);
          w.put(v, r, kb, selected ? c : -1, ts_x, ts_r);
        }
      }
    }
  }
}

//! Words of one entry of `rac_pair_kernel`'s residual ring: x's raw block (8), Q(x)'s code words
//! (2), the row, and `j | scale << 24`. A 12-word stride puts the 16-byte accesses of a quarter
//! warp on distinct banks.
inline constexpr int ring_entry_words = 12;
//! Entries of a warp's ring: fewer than 32 wait after a step, and a step adds at most 64.
inline constexpr int ring_entries = 96;

//! Whether `rac_pair_kernel` applies (besides `rac_column_applies` and no permutation): fewer
//! than three quarters of the blocks selected, whole block pairs per row, 16-byte aligned codes,
//! 8-byte aligned slot table, j in 24 bits (the ring's packing). From three quarters on the
//! column kernel is as fast or faster: its residual reuses the dequantized values of the x
//! encoder, where the pair kernel decodes Q(x) again and stages through the ring (bf16 8192 x 4096
//! on the H200, 2026-11-30 18:31 UTC, pair / column kernel: 50 % 44.2-44.6 / 47.2-47.4 us, 75 %
//! 51.9-52.3 / 51.9-52.1, 100 % 58.9-59.3 / 52.5-52.7; at 12.5 % 33.4 against 40.1 us at 17:54;
//! docs/history/rac.md).
inline bool rac_pair_applies(int nkb, int nsel, const std::uint8_t* data, const int* slot) {
  return 4 * static_cast<std::int64_t>(nsel) < 3 * static_cast<std::int64_t>(nkb) && nkb % 2 == 0 &&
         nsel < (1 << 24) && ::quads::kernels::detail::aligned(data, 16) &&
         ::quads::kernels::detail::aligned(slot, 8);
}

//! No permutation, turbo path, even K / B, fewer than three quarters of the blocks selected
//! (`rac_pair_applies`; the default configuration's kernel there); `Own`: `residual_scale::own`
//! (a second multiplier table for the residual amax's scale, which an earlier pass computed; a
//! separate instantiation because the runtime choice cost the shared case 0.3-0.5 us at 8192 x
//! 4096, H200 2026-11-30 19:32 UTC). A warp
//! takes 32 block pairs of a row per step (lane l: pair 32 s + l, a 64-byte load; the next step's
//! pair and slot entries are loaded before this step is encoded), quantizes them as the plain
//! quantize's pair kernel does and stores Q(x) as contiguous warp stores (512 bytes of codes, 64 of
//! scales). Its selected blocks go, in block order, to a ring in shared memory (raw x, Q(x));
//! whenever 32 are pending the warp's lanes take one each: decode Q(x) (`dequantize_block` with the
//! byte-permute decoder: `Quantizer::decode`), residual `x - QDQ(x)`, the fp32 turbo block with the
//! residual's scale (the kernels' fast block path for a NaN residual or an unusable table). Ring
//! entries of a row have consecutive j, so the residual codes and scales also leave as contiguous
//! warp stores, and no lane idles on a scattered selection. Rows with an odd `nkb + nsel` are not
//! 16-byte aligned: their codes and scales leave as two 8-byte and two 1-byte stores.
template <class Quantizer, class Layout, class T, int MinBlocks = 0, bool Own = false>
__global__ void __launch_bounds__(rac_threads, MinBlocks)
    rac_pair_kernel(const T* x, std::int64_t row_stride, kd::fast_divmod seg_div,
                    std::uint32_t units, const int* slot, scale_source<Quantizer> src,
                    rac_writer<Quantizer, Layout> w) {
  constexpr int B = Quantizer::block_size;
  constexpr int E = ring_entry_words / 4; // 16-byte words per entry
  __shared__ uint4 ring_mem[rac_threads / 32][ring_entries * E];
  __shared__ float turbo_tab[kd::turbo_table_floats];
  __shared__ float turbo_tab_r[Own ? kd::turbo_table_floats : 1]; // the residual's table
  kd::pdl_enter(); // launched programmatically above the small-call size
  const std::uint32_t lane = threadIdx.x & 31u;
  uint4* ring = ring_mem[threadIdx.x >> 5];
  const std::uint32_t npk = static_cast<std::uint32_t>(w.nkb) / 2;
  const std::uint32_t row_bytes = static_cast<std::uint32_t>(w.nkb + w.nsel) * (B / 2);
  const bool even = (w.nkb + w.nsel) % 2 == 0;
  const int2* slot2 = reinterpret_cast<const int2*>(slot);
  const auto position = [&](std::uint32_t u, std::uint32_t& row, std::uint32_t& kp) {
    std::uint32_t s;
    seg_div.divmod(u, row, s);
    kp = 32u * s + lane;
  };
  const auto load = [&](std::uint32_t row, std::uint32_t kp, kd::raw_pair<T, B>& r, int2& j) {
    if (kp < npk) {
      kd::load_pair(x + row * row_stride + static_cast<std::int64_t>(kp) * (2 * B), r);
      j = __ldg(slot2 + kp);
    }
  };
  const std::uint32_t du = gridDim.x * (blockDim.x / 32u);
  std::uint32_t u = blockIdx.x * (blockDim.x / 32u) + (threadIdx.x >> 5);
  std::uint32_t row = 0, kp = npk;
  kd::raw_pair<T, B> next;
  int2 jn{-1, -1};
  if (u < units) { // the first step's loads while the table is built
    position(u, row, kp);
    load(row, kp, next, jn);
  }
  const tensor_scale ts = src.x(0);
  const tensor_scale ts_r = Own ? src.r(0, ts) : ts; // `own`: the residual amax's scale
  const kd::turbo_ctx tc = kd::make_turbo_ctx<Quantizer>(ts, turbo_tab); // synchronises
  kd::turbo_ctx tc_r = tc;
  if constexpr (Own) tc_r = kd::make_turbo_ctx<Quantizer>(ts_r, turbo_tab_r);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    if (w.x_scales != nullptr) w.x_scales[0] = ts;
    if (w.r_scales != nullptr) w.r_scales[0] = ts_r;
  }
  const auto put_pair = [&](std::uint32_t r, std::uint32_t k, const kd::block_words<B>(&q)[2]) {
    std::uint8_t* codes = w.data + static_cast<std::size_t>(r) * row_bytes + k * 16u;
    const int off = w.layout.offset(static_cast<int>(r), static_cast<int>(2 * k));
    if (even) {
      *reinterpret_cast<uint4*>(codes) = kd::pair_codes(q);
      *reinterpret_cast<std::uint16_t*>(w.scales + off) =
          static_cast<std::uint16_t>(q[0].scale | (q[1].scale << 8));
    } else {
      reinterpret_cast<uint2*>(codes)[0] = make_uint2(q[0].w[0], q[0].w[1]);
      reinterpret_cast<uint2*>(codes)[1] = make_uint2(q[1].w[0], q[1].w[1]);
      w.scales[off] = q[0].scale;
      w.scales[w.layout.offset(static_cast<int>(r), static_cast<int>(2 * k + 1))] = q[1].scale;
    }
  };
  // entry p: Q(r) of the block (x's raw words, Q(x)), stored at the row's residual slot j
  const auto process = [&](int p) {
    const uint4* e = ring + p * E;
    kd::raw_block<T, B> raw;
    raw.w[0] = e[0];
    raw.w[1] = e[1];
    const uint4 m = e[2];
    kd::block_words<B> qx;
    qx.w[0] = m.x;
    qx.w[1] = m.y;
    qx.scale = static_cast<std::uint8_t>(m.w >> 24);
    const int r = static_cast<int>(m.z), j = static_cast<int>(m.w & 0xffffffu);
    float v[B], dq[B], res[B];
    kd::widen(raw, v);
    kd::dequantize_block<Quantizer, true>(qx, ts, dq); // byte-permute decoder
#pragma unroll
    for (int i = 0; i < B; ++i)
      res[i] = quads::detail::add_rn(v[i], -dq[i]);
    kd::block_words<B> qr;
    if (!(tc_r.ok && kd::turbo_block_f32<Quantizer>(res, tc_r, qr)))
      kd::quantize_block<Quantizer>(res, ts_r, w.seed,
                                    residual_block_index(w.rows, w.nkb, w.nsel, r, j), qr);
    *reinterpret_cast<uint2*>(w.data + static_cast<std::size_t>(r) * row_bytes +
                              static_cast<std::uint32_t>(w.nkb + j) * (B / 2)) =
        make_uint2(qr.w[0], qr.w[1]);
    w.scales[w.layout.offset(r, w.nkb + j)] = qr.scale;
  };
  int head = 0, pending = 0; // warp-uniform ring state
  for (; u < units; u += du) {
    const kd::raw_pair<T, B> cur = next;
    const int2 jc = jn;
    const std::uint32_t rc = row, kc = kp;
    if (u + du < units) {
      position(u + du, row, kp);
      load(row, kp, next, jn);
    }
    const bool in = kc < npk;
    kd::block_words<B> q[2];
    if (in) {
      const std::uint64_t b0 =
          static_cast<std::uint64_t>(rc) * static_cast<std::uint64_t>(w.nkb) + 2u * kc;
      if (tc.ok) {
        kd::turbo_pair<Quantizer>(cur, tc, ts, w.seed, b0, q);
      } else {
        float v[2][B];
        kd::widen(cur.b[0], v[0]);
        kd::widen(cur.b[1], v[1]);
        const std::uint64_t idx[2] = {b0, b0 + 1};
        kd::quantize_blocks<Quantizer, 2>(v, ts, w.seed, idx, q);
      }
      put_pair(rc, kc, q);
    }
    // selected blocks to the ring in block order (lane order, first block of a pair first)
    const bool s0 = in && jc.x >= 0, s1 = in && jc.y >= 0;
    const std::uint32_t m0 = __ballot_sync(0xffffffffu, s0), m1 = __ballot_sync(0xffffffffu, s1);
    const std::uint32_t below = (1u << lane) - 1u;
    int p = head + pending + __popc(m0 & below) + __popc(m1 & below);
    const auto stage = [&](int at, const kd::raw_block<T, B>& raw, const kd::block_words<B>& qb,
                           int j) {
      uint4* e = ring + (at >= ring_entries ? at - ring_entries : at) * E;
      e[0] = raw.w[0];
      e[1] = raw.w[1];
      e[2] =
          make_uint4(qb.w[0], qb.w[1], rc,
                     static_cast<std::uint32_t>(j) | (static_cast<std::uint32_t>(qb.scale) << 24));
    };
    if (s0) stage(p++, cur.b[0], q[0], jc.x);
    if (s1) stage(p, cur.b[1], q[1], jc.y);
    pending += __popc(m0) + __popc(m1);
    __syncwarp();
    while (pending >= 32) {
      const int at = head + static_cast<int>(lane);
      process(at >= ring_entries ? at - ring_entries : at);
      head = head + 32 >= ring_entries ? head + 32 - ring_entries : head + 32;
      pending -= 32;
    }
    __syncwarp(); // processed entries are rewritten by later steps
  }
  if (static_cast<int>(lane) < pending) { // the ring's remainder (fewer than 32 entries)
    const int at = head + static_cast<int>(lane);
    process(at >= ring_entries ? at - ring_entries : at);
  }
}

//! No permutation, residual amax pass (`own`): the same tiling over the selected blocks only.
//! With the turbo path (per-tensor or given x scale) QDQ(x) comes from `turbo_blocks`' values
//! (a NaN block, or a table the path refuses, takes the core functors).
template <class Quantizer, class T>
__global__ void __launch_bounds__(rac_threads)
    rac_plain_amax_kernel(const T* x, std::int64_t row_stride, warp_tiling tiles, int nkb,
                          const int* blocks, scale_source<Quantizer> src, float* r_amax,
                          std::uint64_t seed) {
  __shared__ float red[rac_threads / 32];
  constexpr int B = Quantizer::block_size;
  constexpr bool per_row = scale_source<Quantizer>::per_row;
  constexpr bool turbo = kd::turbo_applies<Quantizer, T> && !per_row;
  __shared__ float turbo_tab[turbo ? kd::turbo_table_floats : 1];
  kd::turbo_ctx tc{};
  if constexpr (turbo) tc = kd::make_turbo_ctx<Quantizer>(src.x(0), turbo_tab); // synchronises
  float m = 0.0f;
  const std::uint32_t lane = threadIdx.x & 31u;
  const std::uint32_t nwarps = (gridDim.x * blockDim.x) >> 5;
  for (std::uint32_t u = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; u < tiles.units;
       u += nwarps) {
    int row, j;
    if (!tiles.at(u, lane, row, j)) continue;
    const int kb = __ldg(blocks + j);
    kd::raw_block<T, B> raw;
    kd::load_raw<T, B>(x + row * row_stride + static_cast<std::int64_t>(kb) * B, raw);
    float v[B];
    kd::widen(raw, v);
    float a = 0.0f;
    bool done = false;
    if constexpr (turbo) {
      const kd::raw_block<T, B> one[1] = {raw};
      kd::block_words<B> q1[1];
      float dq[1][B];
      if (tc.ok && kd::turbo_blocks<Quantizer, T, 1, false, true>(one, tc, q1, dq)) {
#pragma unroll
        for (int i = 0; i < B; ++i)
          a = fmaxf(a, fabsf(turbo_residual(v[i], dq[0][i])));
        done = true;
      }
    }
    if (!done) {
      const auto bx = Quantizer::bits_for(
          seed, static_cast<std::uint64_t>(row) * static_cast<std::uint64_t>(nkb) + kb);
      a = residual_quantizer<Quantizer>::residual_amax(v, src.x(row), bx);
    }
    if constexpr (per_row)
      kd::atomic_max_nonneg(r_amax + row, a);
    else
      m = fmaxf(m, a);
  }
  if constexpr (!per_row) reduce_amax_to(m, r_amax, red);
}

//! Permuted: one CTA per row (grid-stride), the row staged in shared memory, blocks gathered
//! through `order`. `AmaxOnly`: the residual amax pass over the selected blocks.
template <class Quantizer, class Layout, class T, bool AmaxOnly>
__global__ void __launch_bounds__(rac_threads)
    rac_gather_kernel(const T* x, std::int64_t row_stride, int rows, int K, const int* order,
                      const int* slot, const int* blocks, scale_source<Quantizer> src,
                      rac_writer<Quantizer, Layout> w, float* r_amax) {
  extern __shared__ uint4 smem_words[];
  __shared__ float red[rac_threads / 32];
  constexpr int B = Quantizer::block_size;
  constexpr bool per_row = scale_source<Quantizer>::per_row;
  const T* srow = reinterpret_cast<const T*>(smem_words);
  const int words = K * static_cast<int>(sizeof(T)) / 16;
  const int t = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  const int nkb = K / B;
  float m = 0.0f;
  for (int row = static_cast<int>(blockIdx.x); row < rows; row += static_cast<int>(gridDim.x)) {
    const uint4* src_row = reinterpret_cast<const uint4*>(x + row * row_stride);
    for (int i = t; i < words; i += n)
      smem_words[i] = src_row[i];
    __syncthreads();
    const tensor_scale ts_x = src.x(row);
    const int units = AmaxOnly ? w.nsel : nkb;
    tensor_scale ts_r{};
    if constexpr (!AmaxOnly) ts_r = src.r(row, ts_x);
    for (int u = t; u < units; u += n) {
      const int kb = AmaxOnly ? __ldg(blocks + u) : u;
      float v[B];
#pragma unroll
      for (int i = 0; i < B; ++i)
        v[i] = ::quads::kernels::detail::to_float(srow[__ldg(order + kb * B + i)]);
      if constexpr (AmaxOnly) {
        const auto bx = Quantizer::bits_for(
            w.seed, static_cast<std::uint64_t>(row) * static_cast<std::uint64_t>(nkb) + kb);
        const float a = residual_quantizer<Quantizer>::residual_amax(v, ts_x, bx);
        if constexpr (per_row)
          kd::atomic_max_nonneg(r_amax + row, a);
        else
          m = fmaxf(m, a);
      } else {
        w.put(v, row, kb, __ldg(slot + kb), ts_x, ts_r);
      }
    }
    __syncthreads(); // the row buffer is reused
  }
  if constexpr (AmaxOnly && !per_row) reduce_amax_to(m, r_amax, red);
}

//! Largest dynamic shared memory a gather kernel may ask for (opt-in above 48 KiB).
inline constexpr int gather_smem_limit = 200 * 1024;

template <auto Kernel>
inline cudaError_t allow_smem(int bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

} // namespace detail

//! Quantizes `x` (`[rows, K]` of `__nv_bfloat16`, `__half` or `float`, row stride `row_stride`
//! elements, 0 = K) into `[Q(x) | Q(r_S)]` (see `rac_view`), `Quantizer = block_quantizer<Format,
//! Options>`, scales in `Layout` (`linear_scales` or `swizzled_128x4`) over `{rows, K'/B}`.
//! x's tensor scale follows `Options.global`; the residual's `args.residual`.
//! Requires: `sel.channels % B == 0`; `x` and `row_stride * sizeof(T)` multiples of 16 bytes;
//! `out.data` aligned to B/2; swizzled scales are zeroed first with `cudaMemsetAsync` (padding);
//! with a permutation `K * sizeof(T) <= 200 KiB`; `rows * K' / B < 2^31`.
//! Launches: 1 kernel (given + shared); + the amax pass of `tensor_amax` (per_tensor: one kernel,
//! or a zeroing step and the amax kernel) or the row amax kernel (per_row); +1 memset and
//! residual-amax kernel for `own`.
//! `ColumnMinBlocks`: resident CTAs per SM asked of ptxas for the pair and column kernels (a
//! benchmark knob; 0: no request). The results do not depend on it.
template <class Quantizer, scale_layout Layout = linear_scales, class T, int ColumnMinBlocks = 0>
cudaError_t rac_quantize(const T* x, int rows, const device_selection& sel, const rac_view& out,
                         const rac_args& args = {}, cudaStream_t stream = nullptr,
                         std::int64_t row_stride = 0) {
  static_assert(is_kernel_element<T>, "quads: element type must be __nv_bfloat16, __half or float");
  using F = typename Quantizer::format;
  constexpr quant_options O = Quantizer::options;
  constexpr int B = F::block_size;
  namespace kd = ::quads::kernels::detail;
  const int K = sel.channels;
  const std::int64_t stride = row_stride != 0 ? row_stride : K;
  if (rows < 0 || K < 0 || K % B != 0)
    return kd::fail("quads: rac_quantize needs rows >= 0 and K a multiple of the block size");
  if (sel.selected_blocks < 0 || sel.selected_blocks > K / B)
    return kd::fail("quads: rac_quantize: selected_blocks must lie in [0, K / B]");
  if (rows == 0 || K == 0) return kd::ok();
  if (x == nullptr || !kd::aligned(x, 16) ||
      (stride * static_cast<std::int64_t>(sizeof(T))) % 16 != 0 || stride < K)
    return kd::fail("quads: rac_quantize: x must be 16-byte aligned with row_stride * sizeof(T) a "
                    "multiple of 16 bytes and row_stride >= K");
  if (sel.slot == nullptr || (sel.selected_blocks > 0 && sel.blocks == nullptr))
    return kd::fail("quads: rac_quantize: device_selection needs slot (and blocks when |S| > 0)");
  if (out.data == nullptr || out.scales == nullptr || !kd::aligned(out.data, B / 2))
    return kd::fail("quads: rac_quantize: out.data / out.scales null, or data not aligned to B/2");
  const bool own = F::has_tensor_scale && args.residual == residual_scale::own;
  const bool needs_ws = F::has_tensor_scale && (O.global != global_scale::given || own);
  if (needs_ws && (args.workspace == nullptr || !kd::aligned(args.workspace, 4)))
    return kd::fail("quads: rac_quantize: this configuration needs args.workspace "
                    "(rac_workspace_floats(rows) floats)");
  if (F::has_tensor_scale && O.global == global_scale::given && args.given == nullptr)
    return kd::fail("quads: global_scale::given needs rac_args::given");
  const int nkb = K / B, nsel = sel.selected_blocks, Kp = K + nsel * B;
  if (static_cast<std::int64_t>(rows) * (Kp / B) >= (std::int64_t{1} << 31) ||
      static_cast<std::int64_t>(rows) * stride >= (std::int64_t{1} << 40))
    return kd::fail("quads: rac_quantize: rows * K' / B must be < 2^31");
  const int smem = K * static_cast<int>(sizeof(T));
  if (sel.order != nullptr && smem > detail::gather_smem_limit)
    return kd::fail("quads: rac_quantize: a permuted K must fit in shared memory (K * sizeof(T) "
                    "<= 200 KiB)");

  constexpr bool per_row = detail::scale_source<Quantizer>::per_row;
  const std::size_t n_scales = per_row ? static_cast<std::size_t>(rows) : 1;
  float* x_amax = args.workspace;
  float* r_amax = args.workspace != nullptr ? args.workspace + n_scales : nullptr;
  ::quads::kernels::tensor_shape shape{1, rows, K, stride, 0};
  if constexpr (F::has_tensor_scale && O.global == global_scale::per_tensor) {
    // the amax pass of `tensor_amax` (zeroing + amax kernel, or one kernel for a one-CTA tensor)
    if (const cudaError_t e = ::quads::kernels::tensor_amax(x, shape, x_amax, stream);
        e != cudaSuccess)
      return e;
  } else if constexpr (per_row) {
    if (const cudaError_t e = ::quads::kernels::row_amax(x, shape, x_amax, stream);
        e != cudaSuccess)
      return e;
  }
  const detail::scale_source<Quantizer> src{args.given, x_amax, r_amax, own};
  const Layout layout{rows, Kp / B};
  const detail::rac_writer<Quantizer, Layout> w{
      out.data, out.scales, out.x_scales, out.r_scales, layout, rows, nkb, nsel, args.seed};
  if constexpr (std::is_same_v<Layout, swizzled_128x4>) {
    if (const cudaError_t e = cudaMemsetAsync(out.scales, 0, layout.size(), stream);
        e != cudaSuccess)
      return kd::fail(cudaGetErrorString(e), e);
  }
  const int sms = kd::sm_count() > 0 ? kd::sm_count() : 132;
  if (own) { // zeroed even without selected blocks: the residual scale is then make_tensor_scale(0)
    if (const cudaError_t e = cudaMemsetAsync(r_amax, 0, sizeof(float) * n_scales, stream);
        e != cudaSuccess)
      return kd::fail(cudaGetErrorString(e), e);
  }
  if (own && nsel > 0) {
    if (sel.order == nullptr) {
      const auto tiles = detail::warp_tiling::make(rows, nsel);
      constexpr auto kernel = detail::rac_plain_amax_kernel<Quantizer, T>;
      const unsigned grid =
          kd::grid_for<kernel>(detail::rac_threads, std::uint64_t{tiles.units} * 32, 8);
      kernel<<<grid, detail::rac_threads, 0, stream>>>(x, stride, tiles, nkb, sel.blocks, src,
                                                       r_amax, args.seed);
    } else {
      constexpr auto kernel = detail::rac_gather_kernel<Quantizer, Layout, T, true>;
      if (const cudaError_t e = detail::allow_smem<kernel>(smem); e != cudaSuccess)
        return kd::fail(cudaGetErrorString(e), e);
      const unsigned grid = static_cast<unsigned>(rows < sms * 16 ? rows : sms * 16);
      kernel<<<grid, detail::rac_threads, smem, stream>>>(x, stride, rows, K, sel.order, sel.slot,
                                                          sel.blocks, src, w, r_amax);
    }
  }
  // the pair and column kernels start programmatically above the small-call size, as the plain
  // quantize's kernels do (`enqueue_block`)
  const bool small = kd::small_call(static_cast<std::uint64_t>(rows) * nkb);
  bool launched = false; // the pair or the column kernel
  if constexpr (detail::rac_column_applies<Quantizer, T>) {
    if (sel.order == nullptr && detail::rac_pair_applies(nkb, nsel, out.data, sel.slot)) {
      const std::uint32_t segs = static_cast<std::uint32_t>(nkb / 2 + 31) / 32;
      const std::uint64_t units = static_cast<std::uint64_t>(rows) * segs;
      // small calls in 128-thread CTAs: twice the SMs share the warps (H200, 2026-11-30 19:02
      // UTC, bf16 16 / 64 x 4096 at 50 %: 6.34-6.43 / 6.50-6.66 us with 256 threads, 5.76-5.95 /
      // 6.08-6.14 with 128, 6.05-6.21 / 6.21-6.34 with 64; 256 x 4096 unchanged)
      const int threads = small ? 128 : detail::rac_threads;
      const auto launch_pair = [&](auto kernel_c) {
        constexpr auto kernel = decltype(kernel_c)::value;
        const unsigned grid = kd::grid_for<kernel>(threads, units * 32, 8);
        return kd::launch_kernel(!small, kernel, dim3(grid), dim3(threads), 0, stream, x, stride,
                                 kd::fast_divmod(segs), static_cast<std::uint32_t>(units), sel.slot,
                                 src, w);
      };
      using kd::kernel_constant;
      if (const cudaError_t e =
              own ? launch_pair(
                        kernel_constant<
                            detail::rac_pair_kernel<Quantizer, Layout, T, ColumnMinBlocks, true>>{})
                  : launch_pair(kernel_constant<
                                detail::rac_pair_kernel<Quantizer, Layout, T, ColumnMinBlocks>>{});
          e != cudaSuccess)
        return kd::fail(cudaGetErrorString(e), e);
      launched = true;
    } else if (sel.order == nullptr && !own &&
               static_cast<std::size_t>(nkb) * sizeof(int) <= 48 * 1024) {
      constexpr auto kernel = detail::rac_column_kernel<Quantizer, Layout, T, ColumnMinBlocks>;
      const int threads = ::quads::kernels::detail::cta_threads_for(nkb);
      const unsigned grid = kd::grid_for<kernel>(
          threads, (static_cast<std::uint64_t>(rows) + 1) / 2 * static_cast<std::uint64_t>(threads),
          8);
      if (const cudaError_t e =
              kd::launch_kernel(!small, kernel, dim3(grid), dim3(threads),
                                static_cast<std::size_t>(nkb) * sizeof(int), stream, x, stride,
                                rows, sel.slot, sel.blocks, src, w);
          e != cudaSuccess)
        return kd::fail(cudaGetErrorString(e), e);
      launched = true;
    }
  }
  if (launched) {
  } else if (sel.order == nullptr) {
    constexpr int U = detail::rac_unroll<T, B>;
    const std::uint32_t total = static_cast<std::uint32_t>(rows) * static_cast<std::uint32_t>(nkb);
    constexpr auto kernel = detail::rac_plain_kernel<Quantizer, Layout, T>;
    const unsigned grid =
        kd::grid_for<kernel>(detail::rac_threads, (std::uint64_t{total} + U - 1) / U, 8);
    kernel<<<grid, detail::rac_threads, 0, stream>>>(
        x, stride, kd::fast_divmod(static_cast<std::uint32_t>(nkb)), total, sel.slot, src, w);
  } else {
    constexpr auto kernel = detail::rac_gather_kernel<Quantizer, Layout, T, false>;
    if (const cudaError_t e = detail::allow_smem<kernel>(smem); e != cudaSuccess)
      return kd::fail(cudaGetErrorString(e), e);
    const int threads = ::quads::kernels::detail::cta_threads_for(nkb);
    const unsigned grid = static_cast<unsigned>(rows < sms * 16 ? rows : sms * 16);
    kernel<<<grid, threads, smem, stream>>>(x, stride, rows, K, sel.order, sel.slot, sel.blocks,
                                            src, w, nullptr);
  }
  return kd::after_launch();
}

// ---------------------------------------------------------------------------------------------
// Calibration statistics
// ---------------------------------------------------------------------------------------------

//! Device statistics: `channels` doubles each for `sq_error` and `max_abs`, one for `tokens`
//! (zero them to start). The layout of `channel_statistics`.
struct device_statistics {
  int channels = 0;
  double* sq_error = nullptr;
  double* max_abs = nullptr;
  double* tokens = nullptr;
};

//! Floats of workspace `accumulate_statistics` needs for `rows` x `channels`.
inline constexpr std::size_t statistics_workspace_floats(int rows, int channels) noexcept {
  const std::size_t chunks =
      static_cast<std::size_t>((rows + calibration_chunk_rows - 1) / calibration_chunk_rows);
  return 2 * chunks * static_cast<std::size_t>(channels) +
         static_cast<std::size_t>(rows > 1 ? rows : 1);
}

namespace detail {

inline constexpr int stats_threads = 128;

//! One thread per (block column, chunk): fp32 partial sums over the chunk's rows in row order.
template <class Quantizer, class T>
__global__ void __launch_bounds__(stats_threads)
    stats_partial_kernel(const T* x, std::int64_t row_stride, int rows, int K,
                         scale_source<Quantizer> src, float* part_err, float* part_max) {
  constexpr int B = Quantizer::block_size;
  const int kb = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int chunk = static_cast<int>(blockIdx.y);
  if (kb >= K / B) return;
  float err[B], mx[B];
#pragma unroll
  for (int i = 0; i < B; ++i)
    err[i] = mx[i] = 0.0f;
  const int r0 = chunk * calibration_chunk_rows;
  const int r1 = r0 + calibration_chunk_rows < rows ? r0 + calibration_chunk_rows : rows;
  for (int r = r0; r < r1; ++r) {
    kd::raw_block<T, B> raw;
    kd::load_raw<T, B>(x + r * row_stride + static_cast<std::int64_t>(kb) * B, raw);
    float v[B];
    kd::widen(raw, v);
    accumulate_block_statistics<Quantizer>(v, src.x(r), err, mx);
  }
  const std::size_t at = static_cast<std::size_t>(chunk) * K + static_cast<std::size_t>(kb) * B;
#pragma unroll
  for (int i = 0; i < B; i += 4) {
    *reinterpret_cast<float4*>(part_err + at + i) =
        make_float4(err[i], err[i + 1], err[i + 2], err[i + 3]);
    *reinterpret_cast<float4*>(part_max + at + i) =
        make_float4(mx[i], mx[i + 1], mx[i + 2], mx[i + 3]);
  }
}

//! One thread per channel: fp64 sums of the chunk partials in chunk order. (A template only so
//! that the header can be included by several translation units.)
template <int = 0>
__global__ void stats_combine_kernel(const float* part_err, const float* part_max, int chunks,
                                     int K, int rows, double* sq_error, double* max_abs,
                                     double* tokens) {
  const int k = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (k == 0) *tokens += static_cast<double>(rows);
  if (k >= K) return;
  double e = sq_error[k], m = max_abs[k];
  for (int c = 0; c < chunks; ++c) {
    e += static_cast<double>(part_err[static_cast<std::size_t>(c) * K + k]);
    m = fmax(m, static_cast<double>(part_max[static_cast<std::size_t>(c) * K + k]));
  }
  sq_error[k] = e;
  max_abs[k] = m;
}

template <int = 0>
__global__ void stats_decay_kernel(double* sq_error, double* max_abs, double* tokens, int K,
                                   double factor) {
  const int k = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (k == 0) *tokens *= factor;
  if (k >= K) return;
  sq_error[k] *= factor;
  max_abs[k] *= factor;
}

} // namespace detail

//! Adds the statistics of batch `x` (`[rows, K]`, unpermuted, row stride `row_stride`, 0 = K) to
//! `stats`, exactly as `calibrator<Quantizer>::observe` does on the host (same doubles).
//! `workspace`: `statistics_workspace_floats(rows, K)` device floats, 16-byte aligned. `given`:
//! device pointer to x's tensor scale for `global_scale::given`.
//! Requires what `rac_quantize` requires of x. Launches: per_tensor the amax pass of
//! `tensor_amax` (per_row: the row amax kernel), then two kernels.
template <class Quantizer, class T>
cudaError_t accumulate_statistics(const T* x, int rows, const device_statistics& stats,
                                  float* workspace, const tensor_scale* given = nullptr,
                                  cudaStream_t stream = nullptr, std::int64_t row_stride = 0) {
  static_assert(is_kernel_element<T>, "quads: element type must be __nv_bfloat16, __half or float");
  using F = typename Quantizer::format;
  constexpr quant_options O = Quantizer::options;
  constexpr int B = F::block_size;
  namespace kd = ::quads::kernels::detail;
  const int K = stats.channels;
  const std::int64_t stride = row_stride != 0 ? row_stride : K;
  if (rows < 0 || K <= 0 || K % B != 0)
    return kd::fail("quads: accumulate_statistics needs rows >= 0 and K a positive multiple of B");
  if (stats.sq_error == nullptr || stats.max_abs == nullptr || stats.tokens == nullptr)
    return kd::fail("quads: accumulate_statistics: statistics pointers are null");
  if (rows == 0) return kd::ok();
  if (x == nullptr || !kd::aligned(x, 16) ||
      (stride * static_cast<std::int64_t>(sizeof(T))) % 16 != 0 || stride < K)
    return kd::fail("quads: accumulate_statistics: x must be 16-byte aligned with row_stride * "
                    "sizeof(T) a multiple of 16 bytes and row_stride >= K");
  if (workspace == nullptr || !kd::aligned(workspace, 16))
    return kd::fail("quads: accumulate_statistics needs a 16-byte aligned workspace of "
                    "statistics_workspace_floats(rows, K) floats");
  if (F::has_tensor_scale && O.global == global_scale::given && given == nullptr)
    return kd::fail("quads: global_scale::given needs the given tensor scale");
  const int chunks = (rows + calibration_chunk_rows - 1) / calibration_chunk_rows;
  if (chunks > 65535)
    return kd::fail("quads: accumulate_statistics: at most 65535 * 64 rows per call");
  float* part_err = workspace;
  float* part_max = workspace + static_cast<std::size_t>(chunks) * K;
  float* amax = part_max + static_cast<std::size_t>(chunks) * K;
  ::quads::kernels::tensor_shape shape{1, rows, K, stride, 0};
  if constexpr (F::has_tensor_scale && O.global == global_scale::per_tensor) {
    if (const cudaError_t e = ::quads::kernels::tensor_amax(x, shape, amax, stream);
        e != cudaSuccess)
      return e;
  } else if constexpr (F::has_tensor_scale && O.global == global_scale::per_row) {
    if (const cudaError_t e = ::quads::kernels::row_amax(x, shape, amax, stream); e != cudaSuccess)
      return e;
  }
  const detail::scale_source<Quantizer> src{given, amax, nullptr, false};
  const int nkb = K / B;
  const dim3 grid((nkb + detail::stats_threads - 1) / detail::stats_threads, chunks);
  detail::stats_partial_kernel<Quantizer, T>
      <<<grid, detail::stats_threads, 0, stream>>>(x, stride, rows, K, src, part_err, part_max);
  detail::stats_combine_kernel<><<<(K + 255) / 256, 256, 0, stream>>>(
      part_err, part_max, chunks, K, rows, stats.sq_error, stats.max_abs, stats.tokens);
  return kd::after_launch();
}

//! Multiplies the device statistics by `factor` in [0, 1] (as `calibrator::decay`).
inline cudaError_t decay_statistics(const device_statistics& stats, double factor,
                                    cudaStream_t stream = nullptr) {
  namespace kd = ::quads::kernels::detail;
  if (!(factor >= 0.0 && factor <= 1.0)) return kd::fail("quads: decay factor must lie in [0, 1]");
  if (stats.channels <= 0 || stats.sq_error == nullptr || stats.max_abs == nullptr ||
      stats.tokens == nullptr)
    return kd::fail("quads: decay_statistics: bad statistics");
  detail::stats_decay_kernel<><<<(stats.channels + 255) / 256, 256, 0, stream>>>(
      stats.sq_error, stats.max_abs, stats.tokens, stats.channels, factor);
  return kd::after_launch();
}

} // namespace quads::compensation::kernels
