// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The RAC accuracy experiment shared by the host and GPU tests: relative error of the
//!        compensated output against the unquantized-activation output, per selector, permutation,
//!        residual scale and ratio.
#pragma once

#include <quads/compensation/calibration.hpp>
#include <quads/compensation/reference.hpp>
#include <quads/reference/tensor.hpp>

#include "synthetic_activations.hpp"

#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace quads_test {

namespace qc = quads::compensation;

//! Calibration and evaluation batches from one activation model, and one weight.
struct rac_experiment {
  int K = 1024;
  int N = 256;
  int rows_cal = 1024;
  int rows_eval = 256;
  activation_model model;
  std::vector<float> x_cal, x_eval, w;

  explicit rac_experiment(std::mt19937_64& g, int k = 1024) : K(k) {
    model.channels = K;
    model.draw(g);
    x_cal = model.sample(rows_cal, g);
    x_eval = model.sample(rows_eval, g);
    w = random_weight(N, K, g);
  }
};

inline const std::vector<double>& rac_ratios() {
  static const std::vector<double> r = {0.0, 0.125, 0.25, 0.5, 1.0};
  return r;
}

//! Relative error of y (composition (b), float64) against x_perm * Q(W_perm)^T, for an activation
//! operand made by `quantize(x_eval, sel, residual) -> rac_activation` (host reference or GPU).
template <class Quantize>
double rac_error(const rac_experiment& e, const qc::channel_selection& sel,
                 qc::residual_scale residual, Quantize&& quantize) {
  using F = quads::nvfp4;
  const auto qw = qc::reference::quantize_weight<F>(e.w, e.N, sel);
  const auto wdq = quads::reference::dequantize<F>(qw);
  const auto xp = qc::reference::permute_columns(e.x_eval, e.rows_eval, sel);
  const auto ref = qc::reference::gemm_dense(xp, wdq, e.rows_eval, e.N, e.K);
  const auto a = quantize(e.x_eval, sel, residual);
  const auto y = qc::reference::gemm_residual<double>(a, qw, sel);
  return qc::reference::relative_error(y, ref);
}

//! One row of the table: errors for every ratio of `rac_ratios()`.
struct rac_row {
  std::string selector, perm, residual;
  std::vector<double> err;
};

//! Runs the whole grid with the given statistics; prints a Markdown table to stdout.
template <class Quantize>
std::vector<rac_row> rac_table(const rac_experiment& e, const qc::channel_statistics& st,
                               Quantize&& quantize, const char* title) {
  std::vector<rac_row> rows;
  auto run = [&](auto selector, qc::permutation p, qc::residual_scale rs) {
    rac_row row{decltype(selector)::name, qc::to_string(p), qc::to_string(rs), {}};
    for (double ratio : rac_ratios()) {
      const auto sel = qc::select_channels(selector, st, ratio, p);
      row.err.push_back(rac_error(e, sel, rs, quantize));
    }
    rows.push_back(row);
  };
  for (auto rs : {qc::residual_scale::shared, qc::residual_scale::own})
    for (auto p :
         {qc::permutation::none, qc::permutation::selected_to_end, qc::permutation::sorted}) {
      run(qc::by_quant_error{}, p, rs);
      run(qc::by_max_abs{}, p, rs);
      run(qc::random_channels{12345}, p, rs);
    }
  std::printf("\n%s (K=%d, N=%d, %d calibration / %d evaluation tokens)\n\n", title, e.K, e.N,
              e.rows_cal, e.rows_eval);
  std::printf("| selector | permutation | residual scale |");
  for (double r : rac_ratios())
    std::printf(" %g %% |", 100 * r);
  std::printf(" 0%% / 100%% |\n|---|---|---|");
  for (std::size_t i = 0; i <= rac_ratios().size(); ++i)
    std::printf("---|");
  std::printf("\n");
  for (const auto& r : rows) {
    std::printf("| %s | %s | %s |", r.selector.c_str(), r.perm.c_str(), r.residual.c_str());
    for (double v : r.err)
      std::printf(" %.3f %% |", 100 * v);
    std::printf(" %.1fx |\n", r.err.front() / r.err.back());
  }
  std::fflush(stdout);
  return rows;
}

inline const rac_row& find_row(const std::vector<rac_row>& rows, const std::string& selector,
                               const std::string& perm, const std::string& residual) {
  for (const auto& r : rows)
    if (r.selector == selector && r.perm == perm && r.residual == residual) return r;
  throw std::runtime_error("no such row");
}

} // namespace quads_test
