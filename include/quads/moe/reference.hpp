// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host reference of the MoE expert-MLP layer (host-only): the same stages as the GPU
//!        layer (quads/moe/layer.cuh) from the same quantized operands, float64 accumulation.
//!
//! Stages (each a function, so a test can feed one stage with the GPU's output of the previous
//! one and compare "from the same quantized operands"):
//! 1. `quantize_input`: x `[T, H]` -> operand rows (NVFP4 via `quads::reference::quantize`, or
//!    `[Q(x) | Q(r_S)]` via `compensation::reference::quantize_activation`; bf16 values for the
//!    bf16 / W4A16 policies); byte-identical to the GPU kernels.
//! 2. `gather`: grouped row r takes token `pair_of_row[r] / k`.
//! 3. `grouped_accumulate`: `acc[r][n] = sum_k A[r][k] W_e[n][k]` in float64 over unscaled values
//!    (E2M1 * block scale; no tensor scales), plus the RAC residual products (composition (b),
//!    shared scale) of the row's slot table; the `gemm::reference::accumulators` layout.
//! 4. `gate_up` / `down`: the accumulators through the layer's epilogue chain on the host
//!    (`gemm::reference::apply_epilogue`, the node code the GPU runs).
//! 5. `combine`: `out[t][c] = sum_j Y[row_of_pair[t k + j]][c]`, j = 0 .. k-1, fp32 left to
//!    right (bit-identical to the GPU's combine given the same Y).
#pragma once

#include <quads/compensation/reference.hpp>
#include <quads/compensation/selection.hpp>
#include <quads/epilogue/fragment.hpp>
#include <quads/gemm/reference.hpp>
#include <quads/moe/layer.hpp>
#include <quads/moe/routing.hpp>
#include <quads/reference/tensor.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

namespace quads::moe::reference {

using gemm::reference::accumulators;

//! Activation rows on the host: NVFP4 (`data` rows * (K + S) / 2 bytes, `scales` rows * (K + S)
//! / B linear) or dense (`dense` rows * K values, bf16-representable).
struct operand {
  int rows = 0;
  int cols = 0;     //!< K
  int selected = 0; //!< |S| (RAC residual channels per row)
  bool fp4 = false;
  std::vector<std::uint8_t> data;
  std::vector<std::uint8_t> scales;
  std::vector<float> dense;

  int row_cols() const noexcept { return cols + selected; }
  std::size_t row_bytes() const noexcept { return static_cast<std::size_t>(row_cols() / 2); }
  std::size_t row_scales() const noexcept { return static_cast<std::size_t>(row_cols() / block); }

  //! Unscaled values `[rows, K + S]` (E2M1 * block scale, exact), or the dense values.
  std::vector<double> unscaled() const {
    const int C = row_cols();
    std::vector<double> out(static_cast<std::size_t>(rows) * C);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < C; ++c) {
        const std::size_t o = static_cast<std::size_t>(r) * C + c;
        if (!fp4) {
          out[o] = dense[static_cast<std::size_t>(r) * cols + c];
          continue;
        }
        const std::uint8_t byte = data[static_cast<std::size_t>(r) * row_bytes() + c / 2];
        const std::uint8_t code = static_cast<std::uint8_t>((byte >> ((c & 1) * 4)) & 0xfu);
        const std::uint8_t s = scales[static_cast<std::size_t>(r) * row_scales() + c / block];
        out[o] = static_cast<double>(decode_e2m1(code)) * nvfp4::decode_scale(s);
      }
    return out;
  }
};

//! fp32 -> the nearest bf16 value (as fp32): what a bf16 tensor holds.
inline float round_bf16(float x) {
  return ::quads::detail::bf16_bits_to_float(::quads::detail::float_to_bf16_bits(x));
}

//! The layer's expert weights on the host. `gate_up` `[E, 2I, H]` with gate/up rows interleaved
//! (`gemm::interleave_gate_up`), `down` `[E, H, I]`, per-expert tensor scales (`tensor_scales`,
//! E entries). For the bf16 policy `gate_up_bf16` / `down_bf16` (same shapes, interleaved, bf16
//! values) are used instead.
struct layer_weights {
  layer_shape shape{};
  quads::reference::quantized_tensor<nvfp4, linear_scales> gate_up;
  quads::reference::quantized_tensor<nvfp4, linear_scales> down;
  std::vector<float> gate_up_bf16;
  std::vector<float> down_bf16;
};

//! Calibrated activation scales and RAC channel sets.
struct layer_numerics {
  tensor_scale x_scale{};                      //!< given tensor scale of x (one per layer)
  std::vector<tensor_scale> h_scales;          //!< 1 (per layer) or E (per expert) for h
  compensation::channel_selection gate_up_sel; //!< QUADS: one set, K = H
  std::vector<compensation::channel_selection> down_sel; //!< QUADS: E sets, K = I
  epilogue::scale_source h_mode() const noexcept {
    return h_scales.size() > 1 ? epilogue::scale_source::expert : epilogue::scale_source::tensor;
  }
  int down_selected() const { return down_sel.empty() ? 0 : down_sel.front().selected; }
};

//! Per-expert slot tables `[E, K / B]` of the down channel sets (all |S| equal; throws if not).
inline std::vector<int> down_slot_tables(const layer_numerics& n, int I) {
  std::vector<int> out;
  for (const auto& s : n.down_sel) {
    if (s.channels != I || s.selected != n.down_selected() || s.permuted())
      throw std::invalid_argument("quads: moe: down channel sets must be unpermuted, K = I, "
                                  "with equal |S|");
    const auto t = s.slot_table();
    out.insert(out.end(), t.begin(), t.end());
  }
  return out;
}

//! Stage 1: x `[T, H]` (fp32 holding bf16 values) -> the policy's input operand.
inline operand quantize_input(layer_policy policy, std::span<const float> x, int T, int H,
                              const layer_numerics& num) {
  operand o;
  o.rows = T;
  o.cols = H;
  if (!fp4_activations(policy)) {
    o.dense.assign(x.begin(), x.end());
    for (float& v : o.dense)
      v = round_bf16(v);
    return o;
  }
  o.fp4 = true;
  const std::span<const tensor_scale> given(&num.x_scale, 1);
  if (policy == layer_policy::naive_w4a4) {
    auto q = quads::reference::quantize<nvfp4, activation_options>(x, T, H, {1, given, 0});
    o.data = std::move(q.data);
    o.scales = std::move(q.scales);
  } else {
    auto q = compensation::reference::quantize_activation<nvfp4, activation_options>(
        x, T, num.gate_up_sel, {compensation::residual_scale::shared, given, 0});
    o.selected = q.selected;
    o.data = std::move(q.data);
    o.scales = std::move(q.scales);
  }
  return o;
}

//! Stage 2: grouped row r = token `pair_of_row[r] / k` of `in`.
inline operand gather(const operand& in, const routing_result& r) {
  operand o = in;
  const int n = r.pairs();
  o.rows = n;
  o.data.clear();
  o.scales.clear();
  o.dense.clear();
  for (int row = 0; row < n; ++row) {
    const std::size_t t = static_cast<std::size_t>(r.pair_of_row[row] / r.top_k);
    if (in.fp4) {
      o.data.insert(o.data.end(), in.data.begin() + t * in.row_bytes(),
                    in.data.begin() + (t + 1) * in.row_bytes());
      o.scales.insert(o.scales.end(), in.scales.begin() + t * in.row_scales(),
                      in.scales.begin() + (t + 1) * in.row_scales());
    } else {
      o.dense.insert(o.dense.end(), in.dense.begin() + t * in.cols,
                     in.dense.begin() + (t + 1) * in.cols);
    }
  }
  return o;
}

//! Stage 3: float64 accumulators of the grouped GEMM `A W_e^T` (see the file comment).
//! `weight_of(e)` returns expert e's unscaled `[N, K]` values. `slot`: null, or slot tables with
//! `slot_stride` ints per expert (0: one table for all experts).
template <class WeightOf>
accumulators grouped_accumulate(const operand& a, const routing_result& r, int N,
                                WeightOf&& weight_of, const int* slot = nullptr,
                                int slot_stride = 0) {
  const int K = a.cols, C = a.row_cols(), nkb = K / block;
  if (a.rows != r.pairs()) throw std::invalid_argument("quads: moe: operand rows != pairs");
  const std::vector<double> A = a.unscaled();
  accumulators out;
  out.rows = a.rows;
  out.cols = N;
  out.k_terms = C;
  out.acc.assign(static_cast<std::size_t>(a.rows) * N, 0.0);
  out.abs_sum.assign(out.acc.size(), 0.0);
  for (int e = 0; e < r.experts; ++e) {
    const int r0 = r.offsets[e], r1 = r.offsets[e + 1];
    if (r0 == r1) continue;
    const std::vector<double> W = weight_of(e);
    const int* st = slot != nullptr ? slot + static_cast<std::size_t>(slot_stride) * e : nullptr;
    for (int row = r0; row < r1; ++row) {
      const double* ar = A.data() + static_cast<std::size_t>(row) * C;
      for (int n = 0; n < N; ++n) {
        const double* wr = W.data() + static_cast<std::size_t>(n) * K;
        double s = 0, sa = 0;
        for (int k = 0; k < K; ++k) {
          const double p = ar[k] * wr[k];
          s += p;
          sa += std::fabs(p);
        }
        if (st != nullptr)
          for (int kb = 0; kb < nkb; ++kb) {
            const int j = st[kb];
            if (j < 0) continue;
            for (int i = 0; i < block; ++i) {
              const double p = ar[K + j * block + i] * wr[kb * block + i];
              s += p;
              sa += std::fabs(p);
            }
          }
        out.acc[out.index(row, n)] = s;
        out.abs_sum[out.index(row, n)] = sa;
      }
    }
  }
  return out;
}

//! The gate_up stage's outputs on the host.
struct gate_up_result {
  accumulators acc;
  std::vector<float> h_pre; //!< [rows, I] fp32 SwiGLU output (before quantization)
  operand h;                //!< the down GEMM's activation operand
};

//! Unscaled weights of expert e (NVFP4 or bf16 values), `[N, K]`.
inline std::vector<double> expert_values(const layer_weights& w, bool gate_up, layer_policy p,
                                         int e) {
  if (fp4_weights(p)) return gemm::reference::unscaled_values(gate_up ? w.gate_up : w.down, e);
  const int N = gate_up ? 2 * w.shape.intermediate : w.shape.hidden;
  const int K = gate_up ? w.shape.hidden : w.shape.intermediate;
  const std::vector<float>& src = gate_up ? w.gate_up_bf16 : w.down_bf16;
  const std::size_t n = static_cast<std::size_t>(N) * K;
  return std::vector<double>(src.begin() + static_cast<std::ptrdiff_t>(n * e),
                             src.begin() + static_cast<std::ptrdiff_t>(n * (e + 1)));
}

//! alpha of the gate_up GEMM: gs_x (NVFP4 activations) * gs_w[e] (NVFP4 weights).
inline epilogue::alpha_source gate_up_alpha(layer_policy p, const tensor_scale* x_scale,
                                            const tensor_scale* w_scales,
                                            const int* expert_of_row) {
  epilogue::alpha_source a{};
  if (fp4_activations(p)) {
    a.a = x_scale;
    a.a_mode = epilogue::scale_source::tensor;
  }
  if (fp4_weights(p)) {
    a.w = w_scales;
    a.w_mode = epilogue::scale_source::expert;
  }
  a.expert_of_row = expert_of_row;
  return a;
}

//! alpha of the down GEMM: gs_h (per layer or per expert) * gs_w[e].
inline epilogue::alpha_source down_alpha(layer_policy p, const tensor_scale* h_scales,
                                         epilogue::scale_source h_mode,
                                         const tensor_scale* w_scales, const int* expert_of_row) {
  epilogue::alpha_source a{};
  if (fp4_activations(p)) {
    a.a = h_scales;
    a.a_mode = h_mode;
  }
  if (fp4_weights(p)) {
    a.w = w_scales;
    a.w_mode = epilogue::scale_source::expert;
  }
  a.expert_of_row = expert_of_row;
  return a;
}

//! Quantizes fp32 h rows with the layer's node (the GPU epilogue's code): used by `gate_up`, and
//! by tests to check the GPU's h bytes against the GPU's own h_pre values bit for bit.
inline operand quantize_h(std::span<const float> h_pre, int rows, int I, const layer_numerics& num,
                          const routing_result& r, const std::vector<int>& slots, bool rac) {
  operand h;
  h.rows = rows;
  h.cols = I;
  h.fp4 = true;
  h.selected = rac ? num.down_selected() : 0;
  h.data.assign(static_cast<std::size_t>(rows) * h.row_bytes(), 0);
  h.scales.assign(static_cast<std::size_t>(rows) * h.row_scales(), 0);
  accumulators acc;
  acc.rows = rows;
  acc.cols = I;
  acc.k_terms = 1;
  acc.acc.assign(h_pre.begin(), h_pre.end());
  acc.abs_sum.assign(acc.acc.size(), 0.0);
  using node = quantize_expert_output<activation_quantizer>;
  node::arguments q{h.data.data(),
                    h.scales.data(),
                    num.h_scales.data(),
                    num.h_mode(),
                    r.expert_of_row.data(),
                    rac ? slots.data() : nullptr,
                    h.selected,
                    rows,
                    I,
                    0};
  gemm::reference::apply_epilogue<epilogue::chain<node>>(acc, {q});
  return h;
}

//! Stage 3 + 4 for gate_up: accumulators, SwiGLU, h (NVFP4 [+ residual] or bf16).
inline gate_up_result gate_up(layer_policy p, const operand& a1, const routing_result& r,
                              const layer_weights& w, const layer_numerics& num) {
  const int I = w.shape.intermediate, n = r.pairs();
  gate_up_result g;
  std::vector<int> gu_slot;
  if (p == layer_policy::quads_rac) gu_slot = num.gate_up_sel.slot_table();
  g.acc = grouped_accumulate(
      a1, r, 2 * I, [&](int e) { return expert_values(w, true, p, e); },
      gu_slot.empty() ? nullptr : gu_slot.data(), 0);
  g.h_pre.assign(static_cast<std::size_t>(n) * I, 0.0f);
  const epilogue::alpha_source alpha =
      gate_up_alpha(p, &num.x_scale, w.gate_up.tensor_scales.data(), r.expert_of_row.data());
  g.h.rows = n;
  g.h.cols = I;
  if (fp4_activations(p)) {
    const bool rac = p == layer_policy::quads_rac;
    const std::vector<int> slots = rac ? down_slot_tables(num, I) : std::vector<int>{};
    g.h.fp4 = true;
    g.h.selected = rac ? num.down_selected() : 0;
    g.h.data.assign(static_cast<std::size_t>(n) * g.h.row_bytes(), 0);
    g.h.scales.assign(static_cast<std::size_t>(n) * g.h.row_scales(), 0);
    quantize_expert_output<activation_quantizer>::arguments q{g.h.data.data(),
                                                              g.h.scales.data(),
                                                              num.h_scales.data(),
                                                              num.h_mode(),
                                                              r.expert_of_row.data(),
                                                              rac ? slots.data() : nullptr,
                                                              g.h.selected,
                                                              n,
                                                              I,
                                                              0};
    gemm::reference::apply_epilogue<gate_up_fp4_epilogue>(g.acc,
                                                          {alpha, {}, {g.h_pre.data(), I}, q});
  } else {
    std::vector<bf16_t> hb(static_cast<std::size_t>(n) * I);
    gemm::reference::apply_epilogue<gate_up_bf16_epilogue>(
        g.acc, {alpha, {}, {g.h_pre.data(), I}, {hb.data(), I}});
    g.h.dense.resize(hb.size());
    for (std::size_t i = 0; i < hb.size(); ++i)
      g.h.dense[i] = ::quads::detail::bf16_bits_to_float(hb[i].bits);
  }
  return g;
}

//! The down stage's outputs on the host.
struct down_result {
  accumulators acc;
  std::vector<float> y; //!< [rows, H] fp32: alpha * acc * weight_of_row
};

//! Stage 3 + 4 for down: `Y = alpha * (h W_dn[e]^T) * weight_of_row`.
inline down_result down(layer_policy p, const operand& h, const routing_result& r,
                        const layer_weights& w, const layer_numerics& num) {
  const int H = w.shape.hidden, I = w.shape.intermediate;
  down_result d;
  std::vector<int> slots;
  if (p == layer_policy::quads_rac) slots = down_slot_tables(num, I);
  d.acc = grouped_accumulate(
      h, r, H, [&](int e) { return expert_values(w, false, p, e); },
      slots.empty() ? nullptr : slots.data(), I / block);
  d.y.assign(static_cast<std::size_t>(r.pairs()) * H, 0.0f);
  const epilogue::alpha_source alpha = down_alpha(
      p, num.h_scales.data(), num.h_mode(), w.down.tensor_scales.data(), r.expert_of_row.data());
  gemm::reference::apply_epilogue<down_epilogue>(
      d.acc, {alpha, {r.weight_of_row.data()}, {d.y.data(), H}});
  return d;
}

//! Stage 5: `out[t][c] = sum_j Y[row_of_pair[t k + j]][c]` (fp32, j ascending).
inline std::vector<float> combine(std::span<const float> y, const routing_result& r, int H) {
  std::vector<float> out(static_cast<std::size_t>(r.tokens) * H, 0.0f);
  for (int t = 0; t < r.tokens; ++t)
    for (int c = 0; c < H; ++c) {
      float s = 0.0f;
      for (int j = 0; j < r.top_k; ++j) {
        const std::size_t row = static_cast<std::size_t>(r.row_of_pair[t * r.top_k + j]);
        s = ::quads::detail::add_rn(s, y[row * H + c]);
      }
      out[static_cast<std::size_t>(t) * H + c] = s;
    }
  return out;
}

//! The whole layer on the host.
struct layer_result {
  routing_result routing;
  operand x;  //!< stage 1
  operand a1; //!< stage 2
  gate_up_result gu;
  down_result dn;
  std::vector<float> out; //!< [T, H] fp32 (the GPU also stores it rounded to bf16)
};

inline layer_result forward(layer_policy p, std::span<const float> x, std::span<const float> logits,
                            int T, const routing_config& rc, const layer_weights& w,
                            const layer_numerics& num) {
  layer_result L;
  L.routing = route(logits, T, rc);
  L.x = quantize_input(p, x, T, w.shape.hidden, num);
  L.a1 = gather(L.x, L.routing);
  L.gu = gate_up(p, L.a1, L.routing, w, num);
  L.dn = down(p, L.gu.h, L.routing, w, num);
  L.out = combine(L.dn.y, L.routing, w.shape.hidden);
  return L;
}

} // namespace quads::moe::reference
