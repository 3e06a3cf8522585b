// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host reference of the trainer side: fake quantization of tensors, straight-through
//! gradients, and a linear layer's forward and backward under each fake-quant policy.
//!
//! Host-only (std::vector). The tests compare the GPU path against it, and the weight-sync
//! contract (`policy/weight_sync.hpp`) is stated against `fake_quant`.
//!
//! `fake_quant<Quantizer>` is the trainer's own tensor-level loop over `Quantizer::qdq` blocks,
//! written apart from `reference::quantize` on purpose: the contract test then checks that two
//! independent tensor-level implementations (and the GPU kernels) agree on tensor scales, block
//! order, stochastic block indices and per-expert scales, bit for bit.
//!
//! Linear layer (`linear_shape`: weights `[E, n, k]`, activations grouped by expert):
//! - forward: `y_g = Xop_g Wop_e^T (+ bias_e)` per expert `e` with group `g = e`;
//!   `Wop = QDQ(W)` if the policy quantizes weights, else `W`; `Xop` likewise for activations;
//! - backward: `dx_g = dy_g Wop_e`, `dW_e = dy_g^T Xop_g`, `dbias_e = sum_rows dy_g`; then
//!   `dW` goes through the policy's `weight_gradient` rule (with the master `W`) and, for
//!   policies that quantize activations, `dx` through `activation_gradient` (with the master `x`).
//! `Acc` is the accumulation type: `double` (the float64 reference of the tests) or `float`
//! (the fp32 variant: products and sums in fp32, k or rows ascending, bias added last).
#pragma once

#include <quads/config.hpp>

#include <quads/policy/linear_shape.hpp>
#include <quads/policy/policies.hpp>
#include <quads/policy/ste.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/random_bits.hpp>
#include <quads/quant/tensor_scale.hpp>
#include <quads/reference/tensor.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace quads::reference {

// ---------------------------------------------------------------------------------------------
// bf16 on the host (the trainer's master/activation precision)
// ---------------------------------------------------------------------------------------------

//! fp32 -> bf16 bits, round to nearest even (NaN stays a quiet NaN).
inline std::uint16_t bf16_bits(float x) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}
//! bf16 bits -> fp32 (exact).
inline float from_bf16_bits(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}
//! `x` rounded to the nearest bf16 value (RNE), as fp32.
inline float round_bf16(float x) noexcept { return from_bf16_bits(bf16_bits(x)); }
//! bf16 bits -> fp32 values.
inline std::vector<float> widen_bf16(std::span<const std::uint16_t> b) {
  std::vector<float> out(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) out[i] = from_bf16_bits(b[i]);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Fake quantization of one tensor and the straight-through gradient
// ---------------------------------------------------------------------------------------------

//! A fake-quantized `[experts, rows, cols]` tensor and what its backward pass needs.
struct fake_quantized {
  std::vector<float> values;                //!< `QDQ(x)` (or `x` itself when not quantized)
  std::vector<tensor_scale> tensor_scales;  //!< one per expert, or per row (`per_row`)
  bool per_row = false;
  bool quantized = false;
  std::uint64_t seed = 0;
  int experts = 1;
  int rows = 0;
  int cols = 0;

  tensor_scale scale_of(int e, int r) const {
    return per_row ? tensor_scales[static_cast<std::size_t>(e) * rows + r]
                   : tensor_scales[static_cast<std::size_t>(e)];
  }
};

namespace detail {
inline float slice_amax(std::span<const float> x) {
  float m = 0.0f;
  for (float v : x) m = quads::detail::max_num(m, quads::detail::abs_bits(v));
  return m;
}

//! The tensor scales `fake_quant` and `reference::quantize` agree on (see tensor.hpp).
template <class Quantizer>
std::vector<tensor_scale> tensor_scales_for(std::span<const float> x, int experts, int rows,
                                            int cols, std::span<const tensor_scale> given) {
  using F = typename Quantizer::format;
  constexpr quant_options O = Quantizer::options;
  const std::size_t slice = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  std::vector<tensor_scale> ts;
  if constexpr (!F::has_tensor_scale) {
    ts.assign(static_cast<std::size_t>(experts), tensor_scale{});
  } else if constexpr (O.global == global_scale::given) {
    if (given.size() != 1 && given.size() != static_cast<std::size_t>(experts))
      throw std::invalid_argument(
          "quads: global_scale::given needs 1 or `experts` tensor scales, got " +
          std::to_string(given.size()));
    for (int e = 0; e < experts; ++e) ts.push_back(given[given.size() == 1 ? 0 : e]);
  } else if constexpr (O.global == global_scale::per_row) {
    for (std::size_t r = 0; r < static_cast<std::size_t>(experts) * rows; ++r)
      ts.push_back(
          make_tensor_scale<F, O>(slice_amax(x.subspan(r * cols, static_cast<std::size_t>(cols)))));
  } else {
    for (int e = 0; e < experts; ++e)
      ts.push_back(make_tensor_scale<F, O>(slice_amax(x.subspan(e * slice, slice))));
  }
  return ts;
}

} // namespace detail

//! The trainer's fake quantization of `x` (`[experts, rows, cols]` row-major): every block goes
//! through `Quantizer::qdq`, tensor scales per `Quantizer::options.global` (per expert, per row,
//! or `given`: 1 or `experts` entries), stochastic bits of block `b` (global block index) from
//! `philox4x32_10{seed}`. Throws `std::invalid_argument` on a bad shape or missing given scales.
template <class Quantizer>
fake_quantized fake_quant(std::span<const float> x, int experts, int rows, int cols,
                          std::span<const tensor_scale> given = {}, std::uint64_t seed = 0) {
  static_assert(is_block_quantizer<Quantizer>, "quads: fake_quant needs a block_quantizer<F, O>");
  static_assert(
      Quantizer::options.math != scale_math::rcp_approx,
      "quads: scale_math::rcp_approx is GPU-only; the host reference cannot reproduce it");
  using F = typename Quantizer::format;
  constexpr int B = F::block_size;
  detail::check_shape(x.size(), experts, rows, cols, B);
  fake_quantized out;
  out.experts = experts;
  out.rows = rows;
  out.cols = cols;
  out.seed = seed;
  out.quantized = true;
  out.per_row = F::has_tensor_scale && Quantizer::options.global == global_scale::per_row;
  out.tensor_scales = detail::tensor_scales_for<Quantizer>(x, experts, rows, cols, given);
  out.values.resize(x.size());
  const std::size_t blocks = x.size() / B;
  const std::size_t blocks_per_row = static_cast<std::size_t>(cols / B);
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t row = blocks_per_row == 0 ? 0 : b / blocks_per_row;  // global row e*rows+r
    const int e = rows == 0 ? 0 : static_cast<int>(row / static_cast<std::size_t>(rows));
    const int r = rows == 0 ? 0 : static_cast<int>(row % static_cast<std::size_t>(rows));
    float in[B];
    float qd[B];
    for (int i = 0; i < B; ++i) in[i] = x[b * B + i];
    Quantizer::qdq(in, out.scale_of(e, r), qd, Quantizer::bits_for(seed, b));
    for (int i = 0; i < B; ++i) out.values[b * B + i] = qd[i];
  }
  return out;
}

//! The block multipliers `fake_quant` used for `master`, one per block (see `block_multiplier`).
template <class Quantizer>
std::vector<float> block_multipliers(std::span<const float> master, const fake_quantized& fq) {
  constexpr int B = Quantizer::block_size;
  if (master.size() != fq.values.size() || !fq.quantized)
    throw std::invalid_argument("quads: block_multipliers needs the master tensor of a "
                                "fake-quantized tensor");
  const std::size_t blocks = master.size() / B;
  const std::size_t per_row = static_cast<std::size_t>(fq.cols / B);
  std::vector<float> m(blocks);
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t row = b / per_row;
    const int e = static_cast<int>(row / static_cast<std::size_t>(fq.rows));
    const int r = static_cast<int>(row % static_cast<std::size_t>(fq.rows));
    float in[B];
    for (int i = 0; i < B; ++i) in[i] = master[b * B + i];
    m[b] =
        block_multiplier<Quantizer>(in, fq.scale_of(e, r), Quantizer::bits_for(fq.seed, b));
  }
  return m;
}

//! Applies STE rule `Ste` in place: `grad[i] = apply_ste<Ste>(grad[i], master[i], m_block(i))`.
//! `grad` holds `dL/dQDQ(master)` on entry and `dL/dmaster` on return.
template <class Quantizer, straight_through_estimator Ste, class T>
void apply_ste(std::span<const float> master, std::span<T> grad, const fake_quantized& fq) {
  if (grad.size() != master.size())
    throw std::invalid_argument("quads: apply_ste: gradient and master sizes differ");
  if constexpr (!Ste::needs_multiplier) {
    for (std::size_t i = 0; i < grad.size(); ++i)
      grad[i] = quads::apply_ste<Ste>(grad[i], master[i], 1.0f);
  } else {
    constexpr int B = Quantizer::block_size;
    const std::vector<float> m = block_multipliers<Quantizer>(master, fq);
    for (std::size_t i = 0; i < grad.size(); ++i)
      grad[i] = quads::apply_ste<Ste>(grad[i], master[i], m[i / B]);
  }
}

//! 1 where `ste::clipped` masks the gradient of `master[i]` (the element saturated), else 0.
template <class Quantizer>
std::vector<std::uint8_t> saturation_mask(std::span<const float> master, const fake_quantized& fq) {
  constexpr int B = Quantizer::block_size;
  const std::vector<float> m = block_multipliers<Quantizer>(master, fq);
  std::vector<std::uint8_t> out(master.size());
  for (std::size_t i = 0; i < master.size(); ++i)
    out[i] = ste::clipped::saturated(master[i], m[i / B]) ? 1 : 0;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Policy level
// ---------------------------------------------------------------------------------------------

//! A "fake-quantized" tensor that is passed through unchanged (operand not quantized).
inline fake_quantized pass_through(std::span<const float> x, int experts, int rows, int cols) {
  fake_quantized out;
  out.values.assign(x.begin(), x.end());
  out.experts = experts;
  out.rows = rows;
  out.cols = cols;
  return out;
}

//! The trainer's weight operand under policy `P`: `QDQ(W)` with `P::weight_quantizer`, or `W`.
template <fake_quant_policy P>
fake_quantized fake_quant_weights(std::span<const float> w, int experts, int n, int k,
                                  const fake_quant_args& args = {}) {
  if constexpr (P::quantizes_weights) {
    return fake_quant<typename P::weight_quantizer>(w, experts, n, k, args.weight_given,
                                                    args.weight_seed);
  } else {
    if (w.size() != static_cast<std::size_t>(experts) * n * k)
      throw std::invalid_argument("quads: weight size does not match [experts, n, k]");
    return pass_through(w, experts, n, k);
  }
}

//! The trainer's activation operand of expert group `e` (`rows` x `k`), see `fake_quant_args`.
template <fake_quant_policy P>
fake_quantized fake_quant_activations(std::span<const float> x_group, int e, int rows, int k,
                                      const fake_quant_args& args = {}) {
  if constexpr (P::quantizes_activations) {
    std::span<const tensor_scale> given = args.act_given;
    if (given.size() > 1) given = given.subspan(static_cast<std::size_t>(e), 1);
    return fake_quant<typename P::activation_quantizer>(
        x_group, 1, rows, k, given, args.act_seed + static_cast<std::uint64_t>(e));
  } else {
    return pass_through(x_group, 1, rows, k);
  }
}

//! What the forward pass keeps for the backward pass: the operands it multiplied.
struct linear_saved {
  fake_quantized weights;            //!< `Wop` (`[E, n, k]`) and its scales
  std::vector<fake_quantized> acts;  //!< `Xop` of each expert group and its scales
  fake_quant_args args;
};

template <class Acc>
struct linear_output {
  std::vector<Acc> y;  //!< `[M, n]`
  linear_saved saved;
};

template <class Acc>
struct linear_gradients {
  std::vector<Acc> dx;     //!< `[M, k]`, dL/dx (through the activation STE where quantized)
  std::vector<Acc> dw;     //!< `[E, n, k]`, dL/dW_master (through the weight STE)
  std::vector<Acc> dbias;  //!< `[E, n]`
};

namespace detail {
inline void check_linear(const linear_shape& s, std::size_t x_size, std::size_t w_size,
                         std::size_t bias_size) {
  if (const char* why = s.check()) throw std::invalid_argument(why);
  if (x_size != static_cast<std::size_t>(s.total_rows()) * static_cast<std::size_t>(s.k))
    throw std::invalid_argument("quads: x must hold sum(rows) * k values");
  if (w_size != s.weight_size())
    throw std::invalid_argument("quads: W must hold experts * n * k values");
  if (bias_size != 0 &&
      bias_size != static_cast<std::size_t>(s.experts) * static_cast<std::size_t>(s.n))
    throw std::invalid_argument("quads: bias must be empty or hold experts * n values");
}
} // namespace detail

//! Forward pass `y = Xop Wop^T (+ bias)` of policy `P`, accumulated in `Acc`. `bias` is empty or
//! `[E, n]`. Throws `std::invalid_argument` on inconsistent sizes.
template <class P, class Acc = double>
linear_output<Acc> linear_forward(std::span<const float> x, std::span<const float> w,
                                  std::span<const float> bias, const linear_shape& s,
                                  const fake_quant_args& args = {}) {
  static_assert(check_fake_quant_policy<P>());  // names a missing requirement of P
  detail::check_linear(s, x.size(), w.size(), bias.size());
  linear_output<Acc> out;
  out.saved.args = args;
  out.saved.weights = fake_quant_weights<P>(w, s.experts, s.n, s.k, args);
  out.y.assign(static_cast<std::size_t>(s.total_rows()) * s.n, Acc(0));
  const std::size_t K = static_cast<std::size_t>(s.k);
  const std::size_t N = static_cast<std::size_t>(s.n);
  for (int e = 0; e < s.experts; ++e) {
    const std::size_t r0 = static_cast<std::size_t>(s.row_offset(e));
    const int rows = s.rows[static_cast<std::size_t>(e)];
    out.saved.acts.push_back(fake_quant_activations<P>(
        x.subspan(r0 * K, static_cast<std::size_t>(rows) * K), e, rows, s.k, args));
    const std::vector<float>& xo = out.saved.acts.back().values;
    const float* wo = out.saved.weights.values.data() + static_cast<std::size_t>(e) * N * K;
    for (std::size_t i = 0; i < static_cast<std::size_t>(rows); ++i)
      for (std::size_t j = 0; j < N; ++j) {
        Acc acc = Acc(0);
        for (std::size_t c = 0; c < K; ++c)
          acc += static_cast<Acc>(xo[i * K + c]) * static_cast<Acc>(wo[j * K + c]);
        if (!bias.empty()) acc += static_cast<Acc>(bias[static_cast<std::size_t>(e) * N + j]);
        out.y[(r0 + i) * N + j] = acc;
      }
  }
  return out;
}

//! Backward pass of `linear_forward<P, Acc>` for upstream gradient `dy` (`[M, n]`), with the
//! master `x` and `W` of the forward pass and its `saved` state.
template <class P, class Acc = double>
linear_gradients<Acc> linear_backward(std::span<const float> dy, std::span<const float> x,
                                      std::span<const float> w, const linear_shape& s,
                                      const linear_saved& saved) {
  static_assert(check_fake_quant_policy<P>());
  detail::check_linear(s, x.size(), w.size(), 0);
  const std::size_t K = static_cast<std::size_t>(s.k);
  const std::size_t N = static_cast<std::size_t>(s.n);
  const std::size_t M = static_cast<std::size_t>(s.total_rows());
  if (dy.size() != M * N) throw std::invalid_argument("quads: dy must hold sum(rows) * n values");
  if (saved.acts.size() != static_cast<std::size_t>(s.experts) ||
      saved.weights.values.size() != w.size())
    throw std::invalid_argument("quads: saved state does not belong to this shape");
  linear_gradients<Acc> g;
  g.dx.assign(M * K, Acc(0));
  g.dw.assign(s.weight_size(), Acc(0));
  g.dbias.assign(static_cast<std::size_t>(s.experts) * N, Acc(0));
  for (int e = 0; e < s.experts; ++e) {
    const std::size_t r0 = static_cast<std::size_t>(s.row_offset(e));
    const std::size_t rows = static_cast<std::size_t>(s.rows[static_cast<std::size_t>(e)]);
    const std::vector<float>& xo = saved.acts[static_cast<std::size_t>(e)].values;
    const float* wo = saved.weights.values.data() + static_cast<std::size_t>(e) * N * K;
    const float* dye = dy.data() + r0 * N;
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t c = 0; c < K; ++c) {
        Acc acc = Acc(0);
        for (std::size_t j = 0; j < N; ++j)
          acc += static_cast<Acc>(dye[i * N + j]) * static_cast<Acc>(wo[j * K + c]);
        g.dx[(r0 + i) * K + c] = acc;
      }
    Acc* dwe = g.dw.data() + static_cast<std::size_t>(e) * N * K;
    for (std::size_t j = 0; j < N; ++j) {
      for (std::size_t c = 0; c < K; ++c) {
        Acc acc = Acc(0);
        for (std::size_t i = 0; i < rows; ++i)
          acc += static_cast<Acc>(dye[i * N + j]) * static_cast<Acc>(xo[i * K + c]);
        dwe[j * K + c] = acc;
      }
      Acc b = Acc(0);
      for (std::size_t i = 0; i < rows; ++i) b += static_cast<Acc>(dye[i * N + j]);
      g.dbias[static_cast<std::size_t>(e) * N + j] = b;
    }
    if constexpr (P::quantizes_activations) {
      apply_ste<typename P::activation_quantizer, typename P::activation_gradient, Acc>(
          x.subspan(r0 * K, rows * K), std::span<Acc>(g.dx.data() + r0 * K, rows * K),
          saved.acts[static_cast<std::size_t>(e)]);
    }
  }
  if constexpr (P::quantizes_weights) {
    apply_ste<typename P::weight_quantizer, typename P::weight_gradient, Acc>(
        w, std::span<Acc>(g.dw), saved.weights);
  }
  return g;
}

} // namespace quads::reference
