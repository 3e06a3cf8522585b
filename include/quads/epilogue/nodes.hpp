// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The library's epilogue nodes: `scale_alpha`, `bias<T>`, `swiglu<pairing>`,
//!        `rac_residual`, `quantize_output<Quantizer, Layout>`, `store<T>` (host + device).
//!
//! Overview: the GEMM hands the epilogue the accumulator without the FP32 tensor scales (the
//! emulated W4A4 / W4A16 product of E2M1 * block-scale values, exact products summed in fp32).
//! The usual chain is
//! @code
//!   chain<scale_alpha, [rac_residual,] [bias<T>,] [swiglu<>,] [quantize_output<Q>,] store<T>>
//! @endcode
//! Every node computes in fp32 with explicitly rounded operations (`detail::mul_rn`/`add_rn`), so
//! the host reference and the kernel apply a chain with the same roundings; only `swiglu` calls
//! `exp`, whose host and device implementations may differ by an ulp.
//! Pointers in `arguments` point to the memory the epilogue runs on: device memory for the GPU
//! GEMM, host memory for `quads::gemm::reference::apply_epilogue`.
#pragma once

#include <quads/config.hpp>

#include <quads/detail/float_bits.hpp>
#include <quads/epilogue/fragment.hpp>
#include <quads/epilogue/node.hpp>
#include <quads/layout/scale_layouts.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/options.hpp>
#include <quads/quant/random_bits.hpp>
#include <quads/quant/tensor_scale.hpp>
#include <quads/scheme/schemes.hpp>

#include <cuda/std/cstddef>
#include <cuda/std/cstdint>

#if !defined(__CUDA_ARCH__)
#  include <cmath>
#endif

namespace quads::epilogue {

// ---------------------------------------------------------------------------------------------
// alpha = gs_a * gs_w (and a constant factor), per tensor, per row, per column or per expert
// ---------------------------------------------------------------------------------------------

//! Where one operand's FP32 tensor scale (its `decode` direction) comes from.
enum class scale_source : ::cuda::std::uint8_t {
  none,    //!< no scale (MXFP4, bf16 activations)
  tensor,  //!< one scale: `scales[0]`
  row,     //!< one per output row m (per-token activation scales: `global_scale::per_row`)
  col,     //!< one per output column n (per-row weight scales: weights with `per_row`)
  expert,  //!< `scales[expert_of_row[m]]` (per-expert weight scales of a grouped MoE GEMM)
};

//! `alpha(m, n) = ((alpha * gs_a) * gs_w)` in fp32, each factor present only if its source is
//! not `none`; `gs` are the `decode` members of `tensor_scale`s (S_dec, ModelOpt's
//! `weight_scale_2` / `input_scale`). Trivially copyable: it is both arguments and params.
struct alpha_source {
  float alpha = 1.0f;                //!< constant factor (user scaling; 1 by default)
  const tensor_scale* a = nullptr;   //!< activation scales
  scale_source a_mode = scale_source::none;
  const tensor_scale* w = nullptr;   //!< weight scales
  scale_source w_mode = scale_source::none;
  const int* expert_of_row = nullptr;  //!< for `scale_source::expert`

  QUADS_API static constexpr float pick(const tensor_scale* s, scale_source mode, int row,
                                        int col, const int* expert_of_row) noexcept {
    switch (mode) {
    case scale_source::tensor: return s[0].decode;
    case scale_source::row: return s[row].decode;
    case scale_source::col: return s[col].decode;
    case scale_source::expert: return s[expert_of_row[row]].decode;
    default: return 1.0f;
    }
  }
  QUADS_API constexpr float at(int row, int col) const noexcept {
    float f = alpha;
    if (a_mode != scale_source::none)
      f = ::quads::detail::mul_rn(f, pick(a, a_mode, row, col, expert_of_row));
    if (w_mode != scale_source::none)
      f = ::quads::detail::mul_rn(f, pick(w, w_mode, row, col, expert_of_row));
    return f;
  }
  //! Whether alpha is the same for every column of a row (no `scale_source::col`).
  QUADS_API constexpr bool same_along_row() const noexcept {
    return a_mode != scale_source::col && w_mode != scale_source::col;
  }
  //! nullptr, or what is wrong with these settings.
  const char* check() const {
    if (a_mode != scale_source::none && a == nullptr)
      return "quads: alpha_source: activation scale mode set but `a` is null";
    if (w_mode != scale_source::none && w == nullptr)
      return "quads: alpha_source: weight scale mode set but `w` is null";
    if ((a_mode == scale_source::expert || w_mode == scale_source::expert) &&
        expert_of_row == nullptr)
      return "quads: alpha_source: scale_source::expert needs `expert_of_row`";
    return nullptr;
  }
};

//! `v * alpha(m, n)`: the tensor scales of the emulated W4A4 / W4A16 product.
struct scale_alpha {
  using arguments = alpha_source;
  using params = alpha_source;
  static constexpr params to_params(const arguments& a) noexcept { return a; }
  QUADS_API static constexpr float apply(float v, int row, int col, const params& p) noexcept {
    return ::quads::detail::mul_rn(v, p.at(row, col));
  }
  //! The same products, with alpha looked up once per fragment unless it varies by column: the
  //! per-element form reloaded the scales (and `expert_of_row`) for every value, a dependent
  //! load chain per element in the single-thread epilogues of decode (H200 ncu, 07:31 UTC).
  template <int W>
  QUADS_API static constexpr fragment<W> apply(const fragment<W>& f, const params& p) noexcept {
    fragment<W> g = f;
    if (p.same_along_row()) {
      const float a = f.count > 0 ? p.at(f.row, f.col) : 1.0f;
      for (int i = 0; i < W; ++i)
        if (i < f.count) g.v[i] = ::quads::detail::mul_rn(f.v[i], a);
    } else {
      for (int i = 0; i < W; ++i)
        if (i < f.count) g.v[i] = ::quads::detail::mul_rn(f.v[i], p.at(f.row, f.col + i));
    }
    return g;
  }
  static const char* check(const arguments& a, int, int) { return a.check(); }
};

// ---------------------------------------------------------------------------------------------
// RAC composition (b): + alpha_r * (Q(r_S) . Q(W)_S) from the second accumulator
// ---------------------------------------------------------------------------------------------

//! Adds the RAC residual term `alpha_r(m, n) * r` of composition (b) with
//! `residual_scale::own`, where `r` is the second accumulator the mainloop fills with
//! `Q(r_S) . Q(W)_S` (unscaled). With `residual_scale::shared` the mainloop adds the residual
//! products into the main accumulator itself and no node is needed (one alpha for both).
//! Place it after `scale_alpha` (which scales the main term only) and before width-changing
//! nodes. Arguments: the residual's alpha (`a` = the residual's tensor scales `r_scales`,
//! `w` = the weight's, as for `scale_alpha`).
struct rac_residual {
  using arguments = alpha_source;
  using params = alpha_source;
  static constexpr bool reads_residual = true;
  static constexpr params to_params(const arguments& a) noexcept { return a; }
  template <int W>
  QUADS_API static constexpr fragment<W> apply(const fragment<W>& f, const params& p) noexcept {
    fragment<W> g = f;
    const bool same = p.same_along_row();
    const float a = same && f.count > 0 ? p.at(f.row, f.col) : 1.0f;
    for (int i = 0; i < W; ++i)
      if (i < f.count)
        g.v[i] = ::quads::detail::add_rn(
            f.v[i], ::quads::detail::mul_rn(f.r[i], same ? a : p.at(f.row, f.col + i)));
    return g;
  }
  static const char* check(const arguments& a, int, int) { return a.check(); }
};

// ---------------------------------------------------------------------------------------------
// bias
// ---------------------------------------------------------------------------------------------

//! `v + bias[n]` in fp32 (one rounding), `bias` of `T` = float, bf16_t, fp16_t (or, in .cu
//! files including quads/gemm/decode.cuh, __nv_bfloat16 / __half).
template <class T = float>
struct bias {
  struct arguments {
    const T* values = nullptr;  //!< one per output column
  };
  struct params {
    const T* values;
  };
  static constexpr params to_params(const arguments& a) noexcept { return {a.values}; }
  QUADS_API static constexpr float apply(float v, int, int col, const params& p) noexcept {
    return ::quads::detail::add_rn(v, element_traits<T>::to_float(p.values[col]));
  }
  static const char* check(const arguments& a, int, int) {
    return a.values == nullptr ? "quads: bias: `values` is null" : nullptr;
  }
};

// ---------------------------------------------------------------------------------------------
// SwiGLU
// ---------------------------------------------------------------------------------------------

//! How gate and up columns are paired in the GEMM output.
enum class pairing : ::cuda::std::uint8_t {
  interleaved,  //!< column 2j is gate j, column 2j+1 is up j (weights rows interleaved offline)
  halves,       //!< gate in columns [0, N/2), up in [N/2, N) (the checkpoint order)
};

//! `silu(gate) * up` with `silu(g) = g / (1 + exp(-g))` in fp32; N inputs give N/2 outputs.
//! Only `pairing::interleaved` runs in an epilogue (a fragment must hold both of a pair):
//! interleave the weight rows offline instead (`quads::gemm::interleave_gate_up`), which is an
//! exact row permutation of codes, scales and per-row tensor scales.
template <pairing P = pairing::interleaved>
struct swiglu {
  static_assert(P == pairing::interleaved,
                "quads: swiglu<pairing::halves> cannot run in a column-fragment epilogue: "
                "interleave the gate/up weight rows offline (quads::gemm::interleave_gate_up) and "
                "use swiglu<pairing::interleaved>");
  struct arguments {};
  struct params {};
  static constexpr int width_divisor = 2;
  static constexpr params to_params(const arguments&) noexcept { return {}; }

  QUADS_API static float silu(float g) noexcept {
#if defined(__CUDA_ARCH__)
    const float e = ::expf(-g);
#else
    const float e = std::exp(-g);
#endif
    return ::quads::detail::div_rn(g, ::quads::detail::add_rn(1.0f, e));
  }
  template <int W>
  QUADS_API static fragment<W / 2> apply(const fragment<W>& f, const params&) noexcept {
    static_assert(W % 2 == 0, "quads: swiglu needs an even fragment width");
    fragment<W / 2> g{};
    g.row = f.row;
    g.col = f.col / 2;
    g.count = f.count / 2;
    for (int j = 0; j < W / 2; ++j) {
      g.v[j] = ::quads::detail::mul_rn(silu(f.v[2 * j]), f.v[2 * j + 1]);
      g.r[j] = 0.0f;
    }
    return g;
  }
  static const char* check(const arguments&, int, int cols) {
    return cols % 2 != 0 ? "quads: swiglu needs an even number of GEMM output columns" : nullptr;
  }
};

// ---------------------------------------------------------------------------------------------
// quantize the output (the next layer's input)
// ---------------------------------------------------------------------------------------------

//! Quantizes the values to `Quantizer`'s format (packed codes + block scales), the next layer's
//! activation operand, through `Quantizer::quantize` (the one QDQ path): byte-identical to
//! `quads::reference::quantize<Format, Options, Layout>` of the same fp32 values with the given
//! tensor scale (block index for stochastic rounding: `row * (cols / B) + col / B`).
//! Values pass through unchanged, so a `store` after it can keep a 16-bit copy.
//! Requirements: two-level formats need `global_scale::given` (a per-tensor or per-row amax would
//! need a reduction over the whole output first, which an epilogue does not have); the fragment
//! holds whole blocks (`min_width = block_size`; the output columns must be a multiple of it).
template <class Quantizer, scale_layout Layout = linear_scales>
struct quantize_output {
  using format = typename Quantizer::format;
  static constexpr int block_size = Quantizer::block_size;
  static constexpr int min_width = block_size;
  static_assert(!is_two_level<format> || Quantizer::options.global == global_scale::given,
                "quads: quantize_output needs global_scale::given for NVFP4 (a calibrated "
                "tensor scale): per-tensor or per-row amax needs a reduction over the whole "
                "output, which the epilogue does not do");
  static_assert(Quantizer::options.math != scale_math::rcp_approx,
                "quads: quantize_output uses the exact scale math so that the host reference "
                "reproduces it; rcp_approx is GPU-only");

  struct arguments {
    ::cuda::std::uint8_t* data = nullptr;    //!< rows * cols / 2 packed codes
    ::cuda::std::uint8_t* scales = nullptr;  //!< Layout{rows, cols / B}.size() bytes
    const tensor_scale* scale = nullptr;     //!< the given tensor scale (two-level formats)
    int rows = 0;                            //!< output rows (M)
    int cols = 0;                            //!< output columns after width changes
    ::cuda::std::uint64_t seed = 0;          //!< stochastic rounding
  };
  struct params {
    ::cuda::std::uint8_t* data;
    ::cuda::std::uint8_t* scales;
    const tensor_scale* scale;
    int rows;
    int cols;
    ::cuda::std::uint64_t seed;
  };
  static constexpr params to_params(const arguments& a) noexcept {
    return {a.data, a.scales, a.scale, a.rows, a.cols, a.seed};
  }
  template <int W>
  QUADS_API static fragment<W> apply(const fragment<W>& f, const params& p) noexcept {
    static_assert(W % block_size == 0, "quads: quantize_output needs whole blocks per fragment");
    tensor_scale ts{};
    if constexpr (is_two_level<format>) ts = p.scale[0];
    const Layout layout{p.rows, p.cols / block_size};
    for (int b = 0; b < W / block_size; ++b) {
      if (b * block_size >= f.count) break;
      float x[block_size];
      for (int i = 0; i < block_size; ++i) x[i] = f.v[b * block_size + i];
      const int kb = (f.col + b * block_size) / block_size;
      const packed_block<format> q = Quantizer::quantize(
          x, ts,
          Quantizer::bits_for(p.seed, static_cast<::cuda::std::uint64_t>(f.row) *
                                              static_cast<::cuda::std::uint64_t>(p.cols / block_size) +
                                          static_cast<::cuda::std::uint64_t>(kb)));
      ::cuda::std::uint8_t* dst = p.data + packed_offset(f.row, kb * block_size, p.cols);
      for (int i = 0; i < block_size / 2; ++i) dst[i] = q.codes[i];
      p.scales[layout.offset(f.row, kb)] = q.scale;
    }
    return f;
  }
  static const char* check(const arguments& a, int rows, int cols) {
    if (a.data == nullptr || a.scales == nullptr)
      return "quads: quantize_output: `data` and `scales` must not be null";
    if (is_two_level<format> && a.scale == nullptr)
      return "quads: quantize_output: `scale` (the given tensor scale) must not be null";
    if (a.rows != rows || a.cols != cols)
      return "quads: quantize_output: `rows`/`cols` must equal the epilogue's output shape at "
             "this node";
    if (cols % block_size != 0)
      return "quads: quantize_output: the output columns must be a multiple of the block size";
    return nullptr;
  }
};

// ---------------------------------------------------------------------------------------------
// store
// ---------------------------------------------------------------------------------------------

//! `out[row * ld + col] = T(v)` (round to nearest even for 16-bit types). Values pass through.
template <class T = float>
struct store {
  struct arguments {
    T* out = nullptr;
    ::cuda::std::int64_t ld = 0;  //!< elements between rows (>= the node's column count)
  };
  struct params {
    T* out;
    ::cuda::std::int64_t ld;
  };
  static constexpr params to_params(const arguments& a) noexcept { return {a.out, a.ld}; }
  QUADS_API static constexpr float apply(float v, int row, int col, const params& p) noexcept {
    p.out[static_cast<::cuda::std::int64_t>(row) * p.ld + col] = element_traits<T>::from_float(v);
    return v;
  }
  static const char* check(const arguments& a, int, int cols) {
    if (a.out == nullptr) return "quads: store: `out` is null";
    if (a.ld < cols) return "quads: store: `ld` is smaller than the node's column count";
    return nullptr;
  }
};

} // namespace quads::epilogue
