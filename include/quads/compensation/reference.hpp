// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host reference of RAC: permutation, activation quantization with residuals, weight
//!        augmentation, and the two GEMM compositions (the specification the GPU matches).
//!
//! Activation operand (`rac_activation`), `[rows, K']` with K' = K + |S|:
//! - row `r` holds the packed codes of Q(x) (K/2 bytes; x permuted first when the selection is),
//!   then those of Q(r_S) (|S|/2 bytes): residual block `j` compensates block `sel.blocks[j]`;
//! - scale bytes in `Layout{rows, K'/B}`: column `kb < K/B` is x's block, column `K/B + j` the
//!   residual's; tensor scales of x and of r (one, or one per row with `global_scale::per_row`).
//! Q(x) equals `quads::reference::quantize` of the (permuted) x byte for byte.
//!
//! Compositions:
//! - (a) `gemm_augmented`: `y = alpha * A' W'^T` over K', with `W' = [Q(W) | Q(W)_S]`
//!   (`augment_weight` duplicates the selected weight blocks, codes and scale bytes);
//!   `alpha = gs_a * gs_w`. Needs `residual_scale::shared` (one global scale along K').
//! - (b) `gemm_residual`: `y = alpha_x * Q(x) Q(W)^T + alpha_r * Q(r_S) Q(W)_S^T`, reading the
//!   selected weight blocks in place (no duplicated bytes); with `shared`, alpha_x = alpha_r and
//!   both terms share one accumulator, added block by block as a fused kernel would (x block kb,
//!   then its residual), so (a) and (b) differ only in summation order.
//! Both accumulate products of dequantized values *without* the FP32 tensor scales (exact in fp32
//! for NVFP4: at most 12 significant bits) in `Acc` (double or float) and apply alpha at the end.
#pragma once

#include <quads/config.hpp>

#include <quads/compensation/residual.hpp>
#include <quads/compensation/selection.hpp>
#include <quads/layout/scale_layouts.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/options.hpp>
#include <quads/quant/random_bits.hpp>
#include <quads/quant/tensor_scale.hpp>
#include <quads/reference/tensor.hpp>
#include <quads/scheme/schemes.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace quads::compensation::reference {

//! Options of `quantize_activation`.
struct rac_args {
  residual_scale residual = residual_scale::shared;
  std::span<const tensor_scale> given{}; //!< x's scale with `global_scale::given` (one entry)
  std::uint64_t seed = 0;                //!< stochastic rounding seed (x and residual blocks)
};

//! The augmented activation operand `[Q(x) | Q(r_S)]` (see the file comment).
template <block_scaled_format Format, scale_layout Layout = linear_scales>
struct rac_activation {
  static constexpr int block_size = Format::block_size;
  int rows = 0;
  int channels = 0; //!< K
  int selected = 0; //!< |S|
  global_scale global = global_scale::per_tensor;
  residual_scale residual = residual_scale::shared;
  std::vector<std::uint8_t> data;     //!< rows * K' / 2 packed codes
  std::vector<std::uint8_t> scales;   //!< Layout{rows, K' / B}.size() bytes
  std::vector<tensor_scale> x_scales; //!< 1, or rows with per_row
  std::vector<tensor_scale> r_scales; //!< as x_scales

  int augmented_channels() const noexcept { return channels + selected; }
  Layout scale_layout() const { return Layout{rows, augmented_channels() / block_size}; }
  tensor_scale x_scale(int row) const {
    return x_scales[x_scales.size() == 1 ? 0 : static_cast<std::size_t>(row)];
  }
  tensor_scale r_scale(int row) const {
    return r_scales[r_scales.size() == 1 ? 0 : static_cast<std::size_t>(row)];
  }
  //! Block `kb` (of K'/B) of `row`.
  packed_block<Format> block(int row, int kb) const {
    packed_block<Format> pb{};
    const std::size_t first = static_cast<std::size_t>(row) * (augmented_channels() / 2) +
                              static_cast<std::size_t>(kb) * (block_size / 2);
    for (int i = 0; i < block_size / 2; ++i)
      pb.codes[i] = data[first + static_cast<std::size_t>(i)];
    pb.scale = scales[scale_layout().offset(row, kb)];
    return pb;
  }
};

namespace detail {

template <class Format>
void check_selection(const channel_selection& sel, int cols) {
  sel.validate();
  if (sel.channels != cols)
    throw std::invalid_argument("quads: the selection is for K = " + std::to_string(sel.channels) +
                                ", the tensor has K = " + std::to_string(cols));
  if (sel.block_size != Format::block_size)
    throw std::invalid_argument("quads: the selection's block size differs from the format's");
}

//! Dequantized value without the tensor scale: e2m1 * block scale (exact).
template <class Format>
float unscaled(std::uint8_t code, std::uint8_t scale) {
  return decode_e2m1(code) * Format::decode_scale(scale);
}

} // namespace detail

//! `x_perm[r][k'] = x[r][sel.order[k']]` (a copy of x for `permutation::none`). Throws on a shape
//! mismatch. Apply it to activations online and to the weight's columns offline.
inline std::vector<float> permute_columns(std::span<const float> x, int rows,
                                          const channel_selection& sel) {
  const int K = sel.channels;
  if (rows < 0 || x.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(K))
    throw std::invalid_argument("quads: permute_columns: x must hold rows * K values");
  if (sel.order.size() != static_cast<std::size_t>(K))
    throw std::invalid_argument("quads: permute_columns: the selection has no order of K entries");
  std::vector<float> out(x.size());
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)
    for (std::size_t k = 0; k < static_cast<std::size_t>(K); ++k)
      out[r * K + k] = x[r * K + static_cast<std::size_t>(sel.order[k])];
  return out;
}

//! Quantizes activations `x` (`[rows, K]`, unpermuted) into `[Q(x) | Q(r_S)]`. x's tensor scale
//! follows `Options.global` (per_tensor: amax of x; per_row; given: `args.given[0]`); the
//! residual's follows `args.residual`. Throws `std::invalid_argument` on a bad shape/selection.
template <block_scaled_format Format, quant_options Options = quant_options{},
          scale_layout Layout = linear_scales>
rac_activation<Format, Layout> quantize_activation(std::span<const float> x, int rows,
                                                   const channel_selection& sel,
                                                   const rac_args& args = {}) {
  static_assert(
      Options.math != scale_math::rcp_approx,
      "quads: scale_math::rcp_approx is GPU-only; the host reference cannot reproduce it");
  using Q = block_quantizer<Format, Options>;
  using RQ = residual_quantizer<Q>;
  constexpr int B = Format::block_size;
  const int K = sel.channels;
  detail::check_selection<Format>(sel, K);
  if (rows < 0 || x.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(K))
    throw std::invalid_argument("quads: quantize_activation: x must hold rows * K values");
  const std::vector<float> xp =
      sel.permuted() ? permute_columns(x, rows, sel) : std::vector<float>(x.begin(), x.end());
  const int nkb = K / B;
  const int nsel = sel.selected_blocks();
  const int Kp = sel.augmented_channels();
  const std::vector<int> slot = sel.slot_table();

  rac_activation<Format, Layout> a;
  a.rows = rows;
  a.channels = K;
  a.selected = sel.selected;
  a.global = Format::has_tensor_scale ? Options.global : global_scale::per_tensor;
  a.residual = args.residual;
  a.data.assign(static_cast<std::size_t>(rows) * (Kp / 2), 0);
  a.scales.assign(a.scale_layout().size(), 0);

  const bool per_row = Format::has_tensor_scale && Options.global == global_scale::per_row;
  const std::size_t n_scales = per_row ? static_cast<std::size_t>(rows) : 1;
  if (!Format::has_tensor_scale) {
    a.x_scales.assign(1, tensor_scale{});
  } else if (Options.global == global_scale::given) {
    if (args.given.size() != 1)
      throw std::invalid_argument("quads: global_scale::given needs exactly one tensor scale");
    a.x_scales.assign(1, args.given[0]);
  } else if (per_row) {
    for (int r = 0; r < rows; ++r)
      a.x_scales.push_back(make_tensor_scale<Format, Options>(
          quads::reference::amax(std::span<const float>(xp).subspan(static_cast<std::size_t>(r) * K,
                                                                    static_cast<std::size_t>(K)))));
  } else {
    a.x_scales.assign(1, make_tensor_scale<Format, Options>(quads::reference::amax(xp)));
  }

  auto bits_of = [&](std::uint64_t index) { return Q::bits_for(args.seed, index); };
  auto load = [&](int r, int kb, float(&v)[B]) {
    for (int i = 0; i < B; ++i)
      v[i] = xp[static_cast<std::size_t>(r) * K + static_cast<std::size_t>(kb) * B + i];
  };
  auto x_index = [&](int r, int kb) {
    return static_cast<std::uint64_t>(r) * static_cast<std::uint64_t>(nkb) +
           static_cast<std::uint64_t>(kb);
  };

  if (args.residual == residual_scale::shared || !Format::has_tensor_scale) {
    a.r_scales = a.x_scales;
  } else { // own: amax of the residuals of the selected blocks, per tensor or per row
    std::vector<float> ramax(n_scales, 0.0f);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < nsel; ++j) {
        const int kb = sel.blocks[static_cast<std::size_t>(j)];
        float v[B];
        load(r, kb, v);
        float& m = ramax[per_row ? static_cast<std::size_t>(r) : 0];
        m = ::quads::detail::max_num(m,
                                     RQ::residual_amax(v, a.x_scale(r), bits_of(x_index(r, kb))));
      }
    for (float m : ramax)
      a.r_scales.push_back(make_tensor_scale<Format, Options>(m));
  }

  const auto layout = a.scale_layout();
  const std::size_t row_bytes = static_cast<std::size_t>(Kp / 2);
  for (int r = 0; r < rows; ++r)
    for (int kb = 0; kb < nkb; ++kb) {
      float v[B];
      load(r, kb, v);
      const int j = slot[static_cast<std::size_t>(kb)];
      const auto bx = bits_of(x_index(r, kb));
      packed_block<Format> qx{};
      if (j < 0) {
        qx = Q::quantize(v, a.x_scale(r), bx);
      } else {
        const auto q = RQ::quantize(v, a.x_scale(r), a.r_scale(r), bx,
                                    bits_of(residual_block_index(rows, nkb, nsel, r, j)));
        qx = q.x;
        const std::size_t first =
            static_cast<std::size_t>(r) * row_bytes + static_cast<std::size_t>(nkb + j) * (B / 2);
        for (int i = 0; i < B / 2; ++i)
          a.data[first + static_cast<std::size_t>(i)] = q.r.codes[i];
        a.scales[layout.offset(r, nkb + j)] = q.r.scale;
      }
      const std::size_t first =
          static_cast<std::size_t>(r) * row_bytes + static_cast<std::size_t>(kb) * (B / 2);
      for (int i = 0; i < B / 2; ++i)
        a.data[first + static_cast<std::size_t>(i)] = qx.codes[i];
      a.scales[layout.offset(r, kb)] = qx.scale;
    }
  return a;
}

//! Quantizes a weight `w` (`[N, K]`, unpermuted) for RAC: its columns are permuted as the
//! selection says, then `quads::reference::quantize` runs (the weight's blocks follow the permuted
//! axis, so the trainer's weight fake-quant must use the same permutation).
template <block_scaled_format Format, quant_options Options = quant_options{},
          scale_layout Layout = linear_scales>
quads::reference::quantized_tensor<Format, Layout>
quantize_weight(std::span<const float> w, int n, const channel_selection& sel,
                const quads::reference::quantize_args& args = {}) {
  detail::check_selection<Format>(sel, sel.channels);
  if (!sel.permuted())
    return quads::reference::quantize<Format, Options, Layout>(w, n, sel.channels, args);
  const std::vector<float> wp = permute_columns(w, n, sel);
  return quads::reference::quantize<Format, Options, Layout>(wp, n, sel.channels, args);
}

//! Composition (a)'s weight `[Q(W) | Q(W)_S]`: K' columns, the selected blocks' codes and scale
//! bytes copied after the K columns in residual order. Throws on a shape mismatch or experts > 1.
template <block_scaled_format Format, scale_layout Layout>
quads::reference::quantized_tensor<Format, Layout>
augment_weight(const quads::reference::quantized_tensor<Format, Layout>& w,
               const channel_selection& sel) {
  constexpr int B = Format::block_size;
  detail::check_selection<Format>(sel, w.cols);
  if (w.experts != 1)
    throw std::invalid_argument("quads: augment_weight takes one matrix (experts = 1)");
  quads::reference::quantized_tensor<Format, Layout> out;
  out.experts = 1;
  out.rows = w.rows;
  out.cols = sel.augmented_channels();
  out.global = w.global;
  out.tensor_scales = w.tensor_scales;
  out.data.assign(static_cast<std::size_t>(out.rows) * (out.cols / 2), 0);
  out.scales.assign(out.scale_layout().size(), 0);
  const int nkb = w.cols / B;
  const auto lin = w.scale_layout();
  const auto lout = out.scale_layout();
  auto copy_block = [&](int r, int from, int to) {
    const std::size_t src =
        static_cast<std::size_t>(r) * (w.cols / 2) + static_cast<std::size_t>(from) * (B / 2);
    const std::size_t dst =
        static_cast<std::size_t>(r) * (out.cols / 2) + static_cast<std::size_t>(to) * (B / 2);
    for (int i = 0; i < B / 2; ++i)
      out.data[dst + static_cast<std::size_t>(i)] = w.data[src + static_cast<std::size_t>(i)];
    out.scales[lout.offset(0, r, to)] = w.scales[lin.offset(0, r, from)];
  };
  for (int r = 0; r < w.rows; ++r) {
    for (int kb = 0; kb < nkb; ++kb)
      copy_block(r, kb, kb);
    for (int j = 0; j < sel.selected_blocks(); ++j)
      copy_block(r, sel.blocks[static_cast<std::size_t>(j)], nkb + j);
  }
  return out;
}

//! Dequantized activation operand `[rows, K']` in fp32 with the tensor scales applied (x's on
//! the first K columns, r's on the rest), i.e. the operand a fake-quant path would see.
template <block_scaled_format Format, scale_layout Layout>
std::vector<float> dequantize_activation(const rac_activation<Format, Layout>& a) {
  using Q = block_quantizer<Format>;
  constexpr int B = Format::block_size;
  const int Kp = a.augmented_channels();
  const int nkb = a.channels / B;
  std::vector<float> out(static_cast<std::size_t>(a.rows) * Kp);
  for (int r = 0; r < a.rows; ++r)
    for (int kb = 0; kb < Kp / B; ++kb) {
      const auto pb = a.block(r, kb);
      const tensor_scale ts = kb < nkb ? a.x_scale(r) : a.r_scale(r);
      for (int i = 0; i < B; ++i)
        out[static_cast<std::size_t>(r) * Kp + static_cast<std::size_t>(kb) * B + i] =
            Q::decode(Q::code_at(pb, i), pb.scale, ts);
    }
  return out;
}

namespace detail {

//! Unscaled (no tensor scale) dequantized rows of the activation operand, `[rows, K']`.
template <block_scaled_format Format, scale_layout Layout>
std::vector<float> unscaled_activation(const rac_activation<Format, Layout>& a) {
  using Q = block_quantizer<Format>;
  constexpr int B = Format::block_size;
  const int Kp = a.augmented_channels();
  std::vector<float> out(static_cast<std::size_t>(a.rows) * Kp);
  for (int r = 0; r < a.rows; ++r)
    for (int kb = 0; kb < Kp / B; ++kb) {
      const auto pb = a.block(r, kb);
      for (int i = 0; i < B; ++i)
        out[static_cast<std::size_t>(r) * Kp + static_cast<std::size_t>(kb) * B + i] =
            unscaled<Format>(Q::code_at(pb, i), pb.scale);
    }
  return out;
}

//! Unscaled dequantized weight `[N, cols]`.
template <block_scaled_format Format, scale_layout Layout>
std::vector<float> unscaled_weight(const quads::reference::quantized_tensor<Format, Layout>& w) {
  constexpr int B = Format::block_size;
  const auto layout = w.scale_layout();
  std::vector<float> out(static_cast<std::size_t>(w.rows) * w.cols);
  for (int n = 0; n < w.rows; ++n)
    for (int k = 0; k < w.cols; ++k) {
      const std::uint8_t byte =
          w.data[static_cast<std::size_t>(n) * (w.cols / 2) + static_cast<std::size_t>(k / 2)];
      const std::uint8_t code = static_cast<std::uint8_t>((byte >> ((k & 1) * 4)) & 0xfu);
      out[static_cast<std::size_t>(n) * w.cols + k] =
          unscaled<Format>(code, w.scales[layout.offset(0, n, k / B)]);
    }
  return out;
}

template <class Acc>
Acc alpha_of(tensor_scale a, tensor_scale w) {
  if constexpr (std::is_same_v<Acc, float>)
    return ::quads::detail::mul_rn(a.decode, w.decode);
  else
    return static_cast<Acc>(a.decode) * static_cast<Acc>(w.decode);
}

} // namespace detail

//! Composition (a): `y[m][n] = alpha * sum_k' A'[m][k'] W'[n][k']` over K' in index order, `Acc`
//! accumulation, `alpha = gs_a(m) * gs_w(n)` applied last. `w_aug` from `augment_weight`.
//! Returns `[rows, N]` as double. Throws unless the residual scale is shared and K' matches.
template <class Acc = double, block_scaled_format Format, scale_layout LA, scale_layout LW>
std::vector<double> gemm_augmented(const rac_activation<Format, LA>& a,
                                   const quads::reference::quantized_tensor<Format, LW>& w_aug) {
  static_assert(std::is_same_v<Acc, double> || std::is_same_v<Acc, float>);
  if (a.residual != residual_scale::shared && Format::has_tensor_scale)
    throw std::invalid_argument("quads: composition (a) needs residual_scale::shared: one GEMM "
                                "applies one alpha along K'; use gemm_residual for an own scale");
  if (w_aug.cols != a.augmented_channels() || w_aug.experts != 1)
    throw std::invalid_argument("quads: gemm_augmented: the weight must have K' = K + |S| columns");
  const int M = a.rows, N = w_aug.rows, Kp = a.augmented_channels();
  const std::vector<float> A = detail::unscaled_activation(a);
  const std::vector<float> W = detail::unscaled_weight(w_aug);
  std::vector<double> y(static_cast<std::size_t>(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const float* ar = A.data() + static_cast<std::size_t>(m) * Kp;
      const float* wr = W.data() + static_cast<std::size_t>(n) * Kp;
      Acc acc = 0;
      for (int k = 0; k < Kp; ++k)
        acc += static_cast<Acc>(ar[k]) * static_cast<Acc>(wr[k]);
      const Acc alpha = detail::alpha_of<Acc>(a.x_scale(m), w_aug.scale_of(0, n));
      y[static_cast<std::size_t>(m) * N + n] = static_cast<double>(alpha * acc);
    }
  return y;
}

//! Composition (b): per weight block kb, `acc += x_kb . w_kb`, then, if kb is selected,
//! `acc_r += r_j . w_kb` (the same weight block, read once). With `shared`, `acc_r` is `acc` and
//! `y = alpha * acc`; with `own`, `y = alpha_x * acc + alpha_r * acc_r`. `w` is Q(W) with K
//! columns (from `quantize_weight`). Returns `[rows, N]` as double.
template <class Acc = double, block_scaled_format Format, scale_layout LA, scale_layout LW>
std::vector<double> gemm_residual(const rac_activation<Format, LA>& a,
                                  const quads::reference::quantized_tensor<Format, LW>& w,
                                  const channel_selection& sel) {
  static_assert(std::is_same_v<Acc, double> || std::is_same_v<Acc, float>);
  constexpr int B = Format::block_size;
  detail::check_selection<Format>(sel, a.channels);
  if (w.cols != a.channels || w.experts != 1 || sel.selected != a.selected)
    throw std::invalid_argument(
        "quads: gemm_residual: weight / selection do not match the activation");
  const int M = a.rows, N = w.rows, K = a.channels, Kp = a.augmented_channels(), nkb = K / B;
  const std::vector<int> slot = sel.slot_table();
  const std::vector<float> A = detail::unscaled_activation(a);
  const std::vector<float> W = detail::unscaled_weight(w);
  const bool shared = a.residual == residual_scale::shared || !Format::has_tensor_scale;
  std::vector<double> y(static_cast<std::size_t>(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const float* ar = A.data() + static_cast<std::size_t>(m) * Kp;
      const float* wr = W.data() + static_cast<std::size_t>(n) * K;
      Acc acc = 0, acc_r = 0;
      Acc& racc = shared ? acc : acc_r;
      for (int kb = 0; kb < nkb; ++kb) {
        for (int i = 0; i < B; ++i)
          acc += static_cast<Acc>(ar[kb * B + i]) * static_cast<Acc>(wr[kb * B + i]);
        const int j = slot[static_cast<std::size_t>(kb)];
        if (j >= 0)
          for (int i = 0; i < B; ++i)
            racc += static_cast<Acc>(ar[K + j * B + i]) * static_cast<Acc>(wr[kb * B + i]);
      }
      const tensor_scale tw = w.scale_of(0, n);
      Acc out = detail::alpha_of<Acc>(a.x_scale(m), tw) * acc;
      if (!shared) out += detail::alpha_of<Acc>(a.r_scale(m), tw) * acc_r;
      y[static_cast<std::size_t>(m) * N + n] = static_cast<double>(out);
    }
  return y;
}

//! Plain float64 `y = a b^T` for `a` `[M, K]` and `b` `[N, K]` (fp32 inputs): the references
//! (unquantized activations times dequantized weights, or no RAC).
inline std::vector<double> gemm_dense(std::span<const float> a, std::span<const float> b, int M,
                                      int N, int K) {
  if (a.size() != static_cast<std::size_t>(M) * K || b.size() != static_cast<std::size_t>(N) * K)
    throw std::invalid_argument("quads: gemm_dense: shape mismatch");
  std::vector<double> y(static_cast<std::size_t>(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int k = 0; k < K; ++k)
        acc += static_cast<double>(a[static_cast<std::size_t>(m) * K + k]) *
               static_cast<double>(b[static_cast<std::size_t>(n) * K + k]);
      y[static_cast<std::size_t>(m) * N + n] = acc;
    }
  return y;
}

//! `||y - ref||_F / ||ref||_F` (0 when both are zero).
inline double relative_error(std::span<const double> y, std::span<const double> ref) {
  if (y.size() != ref.size()) throw std::invalid_argument("quads: relative_error: size mismatch");
  double num = 0, den = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    num += (y[i] - ref[i]) * (y[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

} // namespace quads::compensation::reference
