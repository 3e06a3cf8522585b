// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Epilogue nodes of the MoE expert MLP (host + device): `quantize_expert_output`
//!        (NVFP4 output with a per-layer or per-expert tensor scale and, for RAC, the residual of
//!        the expert's own channel set in the `[Q(h) | Q(r_S)]` layout), `route_weight` (the
//!        top-k weight of the row) and `tap<T>` (an optional side store).
//!
//! They follow the `epilogue_node` concept (quads/epilogue/node.hpp), so the GPU grouped GEMM and
//! the host reference (`quads::gemm::reference::apply_epilogue`) run the same code on the same
//! fp32 values and write the same bytes.
#pragma once

#include <quads/config.hpp>

#include <quads/compensation/residual.hpp>
#include <quads/detail/float_bits.hpp>
#include <quads/epilogue/fragment.hpp>
#include <quads/epilogue/node.hpp>
#include <quads/epilogue/nodes.hpp>
#include <quads/layout/scale_layouts.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/tensor_scale.hpp>
#include <quads/scheme/schemes.hpp>

#include <cuda/std/cstdint>

namespace quads::moe {

//! Quantizes the expert MLP's intermediate `h` (`rows x cols`, grouped rows) to `Quantizer`'s
//! format with a given tensor scale, the down GEMM's activation operand; with RAC it also writes
//! the residual `Q(h - QDQ(h))` of the blocks of the row's expert's channel set.
//!
//! Output layout (that of `compensation::reference::rac_activation` and of
//! `gemm::rac_activations`, with `selected = 0` the plain quantized layout): row `r` holds
//! `(cols + selected) / 2` bytes, Q(h) codes then the residual blocks; scale bytes linear
//! `[rows, (cols + selected) / B]`, residual block j's scale in column `cols / B + j`.
//! - `scale` points to one tensor scale (`scale_source::tensor`, per layer) or one per expert
//!   (`scale_source::expert`, indexed by `expert_of_row[row]`). The residual shares it
//!   (`residual_scale::shared`: one alpha for the down GEMM).
//! - `slot` (RAC): `[experts, cols / B]` ints, expert e's slot table (residual index of each
//!   block, or -1), each expert selecting `selected / B` blocks; null without RAC.
//! - Stochastic rounding: x block index `row * (cols / B) + kb`, residual block index
//!   `compensation::residual_block_index(rows, cols / B, selected / B, row, j)` (as
//!   `rac_quantize`).
template <class Quantizer>
struct quantize_expert_output {
  using format = typename Quantizer::format;
  static constexpr int block_size = Quantizer::block_size;
  static constexpr int min_width = block_size;
  static_assert(!is_two_level<format> || Quantizer::options.global == global_scale::given,
                "quads: quantize_expert_output needs global_scale::given (a calibrated scale)");
  static_assert(Quantizer::options.math != scale_math::rcp_approx,
                "quads: quantize_expert_output uses exact scale math (host reference)");

  struct arguments {
    ::cuda::std::uint8_t* data = nullptr;
    ::cuda::std::uint8_t* scales = nullptr;
    const tensor_scale* scale = nullptr;
    epilogue::scale_source mode = epilogue::scale_source::tensor; //!< tensor or expert
    const int* expert_of_row = nullptr;
    const int* slot = nullptr; //!< RAC slot tables [E, cols / B], or null
    int selected = 0;          //!< |S| per expert (multiple of B); 0 without RAC
    int rows = 0;
    int cols = 0; //!< output columns at this node (the intermediate size I)
    ::cuda::std::uint64_t seed = 0;
  };
  using params = arguments;
  static constexpr params to_params(const arguments& a) noexcept { return a; }

  //! Q(x) of one block and, when `selected`, Q(x - QDQ(x)) with the same scale, through the core
  //! functors (`residual_quantizer::quantize_shared`; `x_index` / `r_index`: the stochastic block
  //! indices). `apply_with` takes another such callable, e.g. a faster device path with the same
  //! bytes (moe/layer.cuh).
  struct core_blocks {
    QUADS_API void operator()(const float (&x)[block_size], tensor_scale ts, bool selected,
                              ::cuda::std::uint64_t seed, ::cuda::std::uint64_t x_index,
                              ::cuda::std::uint64_t r_index, packed_block<format>& qx,
                              packed_block<format>& qr) const noexcept {
      compensation::residual_quantizer<Quantizer>::quantize_shared(x, ts, selected, seed, x_index,
                                                                   r_index, qx, qr);
    }
  };

  template <int W>
  QUADS_API static epilogue::fragment<W> apply(const epilogue::fragment<W>& f,
                                               const params& p) noexcept {
    return apply_with<W>(f, p, core_blocks{});
  }

  template <int W, class Blocks>
  QUADS_API static epilogue::fragment<W> apply_with(const epilogue::fragment<W>& f,
                                                    const params& p,
                                                    const Blocks& blocks) noexcept {
    static_assert(W % block_size == 0, "quads: quantize_expert_output needs whole blocks");
    const int e = expert_of(p, f.row);
    const tensor_scale ts = tensor_scale_of(p, e);
    for (int b = 0; b < W / block_size; ++b) {
      if (b * block_size >= f.count) break;
      float x[block_size];
      for (int i = 0; i < block_size; ++i)
        x[i] = f.v[b * block_size + i];
      const int kb = (f.col + b * block_size) / block_size;
      const int j = slot_of(p, e, kb);
      packed_block<format> qx{}, qr{};
      blocks(x, ts, j >= 0, p.seed, x_index(p, f.row, kb), r_index(p, f.row, j), qx, qr);
      store_block(p, f.row, kb, j, qx, qr);
    }
    return f;
  }

  // Where the node reads and writes (shared by `apply_with` and device group forms).
  //! The expert of grouped row `row` (0 without `expert_of_row`).
  QUADS_API static int expert_of(const params& p, int row) noexcept {
    return p.expert_of_row != nullptr ? p.expert_of_row[row] : 0;
  }
  //! The tensor scale of expert `e`'s rows (unused by one-level formats).
  QUADS_API static tensor_scale tensor_scale_of(const params& p, int e) noexcept {
    if constexpr (is_two_level<format>)
      return p.mode == epilogue::scale_source::expert ? p.scale[e] : p.scale[0];
    else
      return tensor_scale{};
  }
  //! Residual slot of block `kb` in expert `e`'s set, or -1.
  QUADS_API static int slot_of(const params& p, int e, int kb) noexcept {
    return p.slot != nullptr
               ? p.slot[static_cast<::cuda::std::size_t>(e) * (p.cols / block_size) + kb]
               : -1;
  }
  //! Stochastic block index of Q(x) block `kb`, and of residual slot `j` (0 when j < 0).
  QUADS_API static ::cuda::std::uint64_t x_index(const params& p, int row, int kb) noexcept {
    return static_cast<::cuda::std::uint64_t>(row) *
               static_cast<::cuda::std::uint64_t>(p.cols / block_size) +
           static_cast<::cuda::std::uint64_t>(kb);
  }
  QUADS_API static ::cuda::std::uint64_t r_index(const params& p, int row, int j) noexcept {
    return j >= 0 ? compensation::residual_block_index(p.rows, p.cols / block_size,
                                                       p.selected / block_size, row, j)
                  : 0;
  }
  //! Codes and scale byte of output block column `cb` of row `row` (`cb` = kb for Q(x), cols / B
  //! + j for residual slot j).
  QUADS_API static ::cuda::std::uint8_t* codes_at(const params& p, int row, int cb) noexcept {
    const int row_cols = p.cols + p.selected;
    return p.data + static_cast<::cuda::std::size_t>(row) * static_cast<::cuda::std::size_t>(row_cols / 2) +
           cb * (block_size / 2);
  }
  QUADS_API static ::cuda::std::uint8_t* scale_at(const params& p, int row, int cb) noexcept {
    return p.scales + linear_scales{p.rows, (p.cols + p.selected) / block_size}.offset(row, cb);
  }
  //! Stores Q(x) of block `kb` and, when `j >= 0`, the residual in slot `j`.
  QUADS_API static void store_block(const params& p, int row, int kb, int j,
                                    const packed_block<format>& qx,
                                    const packed_block<format>& qr) noexcept {
    const int nkb = p.cols / block_size;
    if (j >= 0) {
      ::cuda::std::uint8_t* dst = codes_at(p, row, nkb + j);
      for (int i = 0; i < block_size / 2; ++i)
        dst[i] = qr.codes[i];
      *scale_at(p, row, nkb + j) = qr.scale;
    }
    ::cuda::std::uint8_t* dst = codes_at(p, row, kb);
    for (int i = 0; i < block_size / 2; ++i)
      dst[i] = qx.codes[i];
    *scale_at(p, row, kb) = qx.scale;
  }

  static const char* check(const arguments& a, int rows, int cols) {
    if (a.data == nullptr || a.scales == nullptr)
      return "quads: quantize_expert_output: `data` and `scales` must not be null";
    if (is_two_level<format> && a.scale == nullptr)
      return "quads: quantize_expert_output: `scale` (the given tensor scale) must not be null";
    if (a.mode != epilogue::scale_source::tensor && a.mode != epilogue::scale_source::expert)
      return "quads: quantize_expert_output: mode must be scale_source::tensor or ::expert";
    if ((a.mode == epilogue::scale_source::expert || a.slot != nullptr) &&
        a.expert_of_row == nullptr)
      return "quads: quantize_expert_output: per-expert scales or slots need `expert_of_row`";
    if (a.rows != rows || a.cols != cols)
      return "quads: quantize_expert_output: `rows`/`cols` must equal the output shape here";
    if (cols % block_size != 0 || a.selected < 0 || a.selected % block_size != 0 ||
        a.selected > cols)
      return "quads: quantize_expert_output: cols and selected must be multiples of the block "
             "size, selected <= cols";
    if ((a.selected > 0) != (a.slot != nullptr))
      return "quads: quantize_expert_output: `slot` is needed exactly when selected > 0";
    return nullptr;
  }
};

//! `v * weights[row]`: the top-k routing weight of a grouped row (`routing_view::weight_of_row`).
struct route_weight {
  struct arguments {
    const float* weights = nullptr;
  };
  using params = arguments;
  static constexpr params to_params(const arguments& a) noexcept { return a; }
  QUADS_API static constexpr float apply(float v, int row, int, const params& p) noexcept {
    return ::quads::detail::mul_rn(v, p.weights[row]);
  }
  static const char* check(const arguments& a, int, int) {
    return a.weights == nullptr ? "quads: route_weight: `weights` is null" : nullptr;
  }
};

//! `out[row * ld + col] = T(v)` when `out` is not null (values pass through): a debug / test
//! side output, e.g. the fp32 SwiGLU output before it is quantized.
template <class T = float>
struct tap {
  struct arguments {
    T* out = nullptr;
    ::cuda::std::int64_t ld = 0;
  };
  using params = arguments;
  static constexpr params to_params(const arguments& a) noexcept { return a; }
  QUADS_API static constexpr float apply(float v, int row, int col, const params& p) noexcept {
    if (p.out != nullptr)
      p.out[static_cast<::cuda::std::int64_t>(row) * p.ld + col] = element_traits<T>::from_float(v);
    return v;
  }
  static const char* check(const arguments& a, int, int cols) {
    return a.out != nullptr && a.ld < cols ? "quads: tap: `ld` is smaller than the column count"
                                           : nullptr;
  }
};

} // namespace quads::moe
