// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host reference of the composable GEMM (host-only): float64 accumulators of emulated
//!        W4A4, W4A16 and W4A4 + RAC (composition (b)), alpha, and the epilogue chain on the host.
//!
//! The accumulators are `acc[m][n] = sum_k A[m][k] * W[n][k]` in float64 over the dequantized
//! operands *without* their FP32 tensor scales (E2M1 * block scale, exact), which is what the GPU
//! GEMM hands its epilogue (up to fp32 summation). Alongside, `abs_sum[m][n] = sum_k |A W|` bounds
//! the fp32 summation error (`tolerance`). `scaled` applies alpha in float64 (the brief's
//! `y = alpha * acc`); `apply_epilogue` runs an epilogue chain exactly as the GPU epilogue pass
//! does (same fragments, same fp32 node code) on `float(acc)`.
#pragma once

#include <quads/config.hpp>

#include <quads/compensation/reference.hpp>
#include <quads/compensation/residual.hpp>
#include <quads/compensation/selection.hpp>
#include <quads/epilogue/chain.hpp>
#include <quads/epilogue/fragment.hpp>
#include <quads/epilogue/node.hpp>
#include <quads/epilogue/nodes.hpp>
#include <quads/layout/scale_layouts.hpp>
#include <quads/reference/tensor.hpp>
#include <quads/scheme/schemes.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace quads::gemm::reference {

//! float64 accumulators of one GEMM, row-major `[rows, cols]` (rows = M tokens, cols = N).
struct accumulators {
  int rows = 0;
  int cols = 0;
  std::vector<double> acc;      //!< main term (with `shared` RAC: both terms)
  std::vector<double> acc_r;    //!< RAC residual term with `residual_scale::own`; else empty
  std::vector<double> abs_sum;  //!< sum of |products| of both terms (error bounds)
  int k_terms = 0;              //!< products summed per output (K, or K + |S| with RAC)
  bool has_residual() const noexcept { return !acc_r.empty(); }
  std::size_t index(int m, int n) const noexcept {
    return static_cast<std::size_t>(m) * static_cast<std::size_t>(cols) + static_cast<std::size_t>(n);
  }
};

namespace detail {

inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("quads: gemm reference: " + what);
}

//! `x[r][k]` and `w[n][k]` products summed in float64.
inline accumulators matmul_nt(const std::vector<double>& a, const std::vector<double>& w, int M,
                              int N, int K) {
  accumulators out;
  out.rows = M;
  out.cols = N;
  out.k_terms = K;
  out.acc.assign(static_cast<std::size_t>(M) * N, 0.0);
  out.abs_sum.assign(out.acc.size(), 0.0);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const double* ar = a.data() + static_cast<std::size_t>(m) * K;
      const double* wr = w.data() + static_cast<std::size_t>(n) * K;
      double s = 0, sa = 0;
      for (int k = 0; k < K; ++k) {
        const double p = ar[k] * wr[k];
        s += p;
        sa += std::fabs(p);
      }
      out.acc[out.index(m, n)] = s;
      out.abs_sum[out.index(m, n)] = sa;
    }
  return out;
}

} // namespace detail

//! Dequantized values of expert `expert` of `q` without the tensor scale: `e2m1 * block scale`,
//! `[rows, cols]` float64 (exact).
template <block_scaled_format Format, scale_layout Layout>
std::vector<double> unscaled_values(const quads::reference::quantized_tensor<Format, Layout>& q,
                                    int expert = 0) {
  detail::require(expert >= 0 && expert < q.experts, "expert out of range");
  constexpr int B = Format::block_size;
  const auto layout = q.scale_layout();
  std::vector<double> out(static_cast<std::size_t>(q.rows) * q.cols);
  const std::size_t first = static_cast<std::size_t>(expert) * q.rows * (q.cols / 2);
  for (int r = 0; r < q.rows; ++r)
    for (int k = 0; k < q.cols; ++k) {
      const std::uint8_t byte =
          q.data[first + static_cast<std::size_t>(r) * (q.cols / 2) + static_cast<std::size_t>(k / 2)];
      const std::uint8_t code = static_cast<std::uint8_t>((byte >> ((k & 1) * 4)) & 0xfu);
      const double s = Format::decode_scale(q.scales[layout.offset(expert, r, k / B)]);
      out[static_cast<std::size_t>(r) * q.cols + k] = static_cast<double>(decode_e2m1(code)) * s;
    }
  return out;
}

//! Emulated W4A4: `a` `[M, K]` and `w` `[N, K]` quantized (expert 0 of each; the formats may
//! differ). Throws `std::invalid_argument` if K differs.
template <block_scaled_format FA, scale_layout LA, block_scaled_format FW, scale_layout LW>
accumulators w4a4(const quads::reference::quantized_tensor<FA, LA>& a,
                  const quads::reference::quantized_tensor<FW, LW>& w) {
  detail::require(a.cols == w.cols, "activation and weight K differ");
  return detail::matmul_nt(unscaled_values(a), unscaled_values(w), a.rows, w.rows, a.cols);
}

//! W4A16: dense activations `a` (`[M, K]`, fp32 holding the 16-bit values the GPU reads) times
//! the quantized weight `w` `[N, K]`.
template <block_scaled_format FW, scale_layout LW>
accumulators w4a16(std::span<const float> a, int M,
                   const quads::reference::quantized_tensor<FW, LW>& w) {
  detail::require(M >= 0 && a.size() == static_cast<std::size_t>(M) * w.cols,
                  "activations must hold M * K values");
  return detail::matmul_nt(std::vector<double>(a.begin(), a.end()), unscaled_values(w), M, w.rows,
                           w.cols);
}

//! W4A4 + RAC, composition (b): the main term over K plus, for every selected block kb (residual
//! slot j), `Q(r)_j . Q(W)_kb`. With `residual_scale::shared` both terms go to `acc` (one alpha);
//! with `own` the residual term goes to `acc_r` (alpha_r in the epilogue: `rac_residual`).
template <block_scaled_format F, scale_layout LA, scale_layout LW>
accumulators w4a4_rac(const compensation::reference::rac_activation<F, LA>& a,
                      const quads::reference::quantized_tensor<F, LW>& w,
                      const compensation::channel_selection& sel) {
  constexpr int B = F::block_size;
  detail::require(w.cols == a.channels && w.experts == 1 && sel.channels == a.channels &&
                      sel.selected == a.selected && sel.block_size == B,
                  "weight / selection do not match the RAC activation");
  const int M = a.rows, N = w.rows, K = a.channels, Kp = a.augmented_channels(), nkb = K / B;
  const std::vector<int> slot = sel.slot_table();
  std::vector<double> A(static_cast<std::size_t>(M) * Kp);
  for (int r = 0; r < M; ++r)
    for (int kb = 0; kb < Kp / B; ++kb) {
      const auto pb = a.block(r, kb);
      for (int i = 0; i < B; ++i)
        A[static_cast<std::size_t>(r) * Kp + static_cast<std::size_t>(kb) * B + i] =
            static_cast<double>(decode_e2m1(block_quantizer<F>::code_at(pb, i))) *
            F::decode_scale(pb.scale);
    }
  const std::vector<double> W = unscaled_values(w);
  const bool own = a.residual == compensation::residual_scale::own && F::has_tensor_scale;
  accumulators out;
  out.rows = M;
  out.cols = N;
  out.k_terms = Kp;
  out.acc.assign(static_cast<std::size_t>(M) * N, 0.0);
  out.abs_sum.assign(out.acc.size(), 0.0);
  if (own) out.acc_r.assign(out.acc.size(), 0.0);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const double* ar = A.data() + static_cast<std::size_t>(m) * Kp;
      const double* wr = W.data() + static_cast<std::size_t>(n) * K;
      double s = 0, sr = 0, sa = 0;
      for (int k = 0; k < K; ++k) {
        s += ar[k] * wr[k];
        sa += std::fabs(ar[k] * wr[k]);
      }
      for (int kb = 0; kb < nkb; ++kb) {
        const int j = slot[static_cast<std::size_t>(kb)];
        if (j < 0) continue;
        for (int i = 0; i < B; ++i) {
          const double p = ar[K + j * B + i] * wr[kb * B + i];
          sr += p;
          sa += std::fabs(p);
        }
      }
      const std::size_t o = out.index(m, n);
      if (own) {
        out.acc[o] = s;
        out.acc_r[o] = sr;
      } else {
        out.acc[o] = s + sr;
      }
      out.abs_sum[o] = sa;
    }
  return out;
}

//! `alpha(m, n)` of an `epilogue::alpha_source` in float64 (pointers into host memory).
inline double alpha_at(const epilogue::alpha_source& s, int m, int n) {
  double f = s.alpha;
  if (s.a_mode != epilogue::scale_source::none)
    f *= epilogue::alpha_source::pick(s.a, s.a_mode, m, n, s.expert_of_row);
  if (s.w_mode != epilogue::scale_source::none)
    f *= epilogue::alpha_source::pick(s.w, s.w_mode, m, n, s.expert_of_row);
  return f;
}

//! `y = alpha(m, n) * acc [+ alpha_r(m, n) * acc_r]` in float64: the GEMM's exact result
//! (before any further epilogue node).
inline std::vector<double> scaled(const accumulators& acc, const epilogue::alpha_source& alpha,
                                  const epilogue::alpha_source* alpha_r = nullptr) {
  detail::require(!acc.has_residual() || alpha_r != nullptr,
                  "the accumulators carry a residual term: pass its alpha");
  std::vector<double> y(acc.acc.size());
  for (int m = 0; m < acc.rows; ++m)
    for (int n = 0; n < acc.cols; ++n) {
      const std::size_t o = acc.index(m, n);
      y[o] = alpha_at(alpha, m, n) * acc.acc[o];
      if (acc.has_residual()) y[o] += alpha_at(*alpha_r, m, n) * acc.acc_r[o];
    }
  return y;
}

//! A bound on |fp32 GEMM - float64 reference| of the *unscaled* accumulator at (m, n): the
//! products are exact (both operands have <= 6 significant bits), so only the additions round.
//! Each of the `k_terms / 16` MMA steps, each split partial and the fold multiply adds at most a
//! few units of 2^-24 relative to the running magnitude (tensor cores may truncate instead of
//! round, hence 2^-22 per step); `abs_sum` bounds every running magnitude. Generous by design and
//! not yet validated on the device.
inline double tolerance(const accumulators& acc, int m, int n, int splits = 1) {
  const double steps = static_cast<double>(acc.k_terms) / 16.0 + splits + 4.0;
  return steps * std::ldexp(1.0, -22) * acc.abs_sum[acc.index(m, n)];
}

//! Runs the epilogue chain `Epi` over the accumulators on the host, as the GPU epilogue pass
//! does: row by row, fragments of `epilogue::fragment_width<Epi>` columns, inputs
//! `float(acc)` and `float(acc_r)`. Node pointers must point to host memory. Throws
//! `std::invalid_argument` when `Epi::check` (if any) refuses the arguments.
template <class Epi>
void apply_epilogue(const accumulators& acc, const typename Epi::arguments& args) {
  static_assert(epilogue::check_epilogue_node<Epi>());
  constexpr int W = epilogue::fragment_width<Epi>;
  if (const char* why = epilogue::check_arguments<Epi>(args, acc.rows, acc.cols))
    throw std::invalid_argument(why);
  const typename Epi::params p = Epi::to_params(args);
  for (int m = 0; m < acc.rows; ++m)
    for (int c = 0; c < acc.cols; c += W) {
      epilogue::fragment<W> f{};
      f.row = m;
      f.col = c;
      f.count = acc.cols - c < W ? acc.cols - c : W;
      for (int i = 0; i < f.count; ++i) {
        f.v[i] = static_cast<float>(acc.acc[acc.index(m, c + i)]);
        f.r[i] = acc.has_residual() ? static_cast<float>(acc.acc_r[acc.index(m, c + i)]) : 0.0f;
      }
      (void)epilogue::apply_node<Epi>(f, p);
    }
}

} // namespace quads::gemm::reference
