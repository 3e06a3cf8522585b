// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The host calibrator: statistics against a direct float64 computation, chunked order,
//!        decay and reset, and that error-based ranking finds the channels with the largest error.

#include <doctest/doctest.h>

#include <quads/compensation/calibration.hpp>
#include <quads/reference/tensor.hpp>

#include <test_support/seed.hpp>

#include <test_support/generators.hpp>

#include "synthetic_activations.hpp"

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

namespace qc = quads::compensation;
using nvq = quads::block_quantizer<quads::nvfp4>;

TEST_SUITE("compensation.calibration") {

  TEST_CASE(
      "the calibrator's sums equal a float64 sum of the QDQ errors up to fp32 chunk rounding") {
    auto g = quads_test::rng("calibration.direct");
    const int K = 128, rows = 200; // 4 chunks, the last partial
    quads_test::activation_model m;
    m.channels = K;
    m.draw(g);
    qc::calibrator<nvq> cal(K);
    std::vector<double> want_err(K, 0.0), want_max(K, 0.0);
    for (int batch = 0; batch < 3; ++batch) {
      const auto x = m.sample(rows, g);
      cal.observe(x, rows);
      const auto xq = quads::reference::qdq<quads::nvfp4>(x, rows, K);
      for (int r = 0; r < rows; ++r)
        for (int k = 0; k < K; ++k) {
          const double d = static_cast<double>(x[static_cast<std::size_t>(r) * K + k]) -
                           xq[static_cast<std::size_t>(r) * K + k];
          want_err[static_cast<std::size_t>(k)] += d * d;
          want_max[static_cast<std::size_t>(k)] =
              std::fmax(want_max[static_cast<std::size_t>(k)],
                        std::fabs(x[static_cast<std::size_t>(r) * K + k]));
        }
    }
    const auto& st = cal.statistics();
    CHECK(st.tokens == 3.0 * rows);
    for (int k = 0; k < K; ++k) {
      CHECK(st.max_abs[static_cast<std::size_t>(k)] == want_max[static_cast<std::size_t>(k)]);
      // fp32 partial sums over 64 rows: relative error below 64 * 2^-24 (plus the squares'
      // rounding).
      CHECK(std::fabs(st.sq_error[static_cast<std::size_t>(k)] -
                      want_err[static_cast<std::size_t>(k)]) <=
            1e-5 * want_err[static_cast<std::size_t>(k)] + 1e-30);
    }
  }

  TEST_CASE("decay scales the statistics and reset clears them") {
    auto g = quads_test::rng("calibration.decay");
    const int K = 64;
    qc::calibrator<nvq> cal(K);
    const auto x = quads_test::normal_values(g, 32 * K);
    cal.observe(x, 32);
    const auto before = cal.statistics();
    cal.decay(0.5);
    for (int k = 0; k < K; ++k) {
      CHECK(cal.statistics().sq_error[static_cast<std::size_t>(k)] ==
            0.5 * before.sq_error[static_cast<std::size_t>(k)]);
      CHECK(cal.statistics().max_abs[static_cast<std::size_t>(k)] ==
            0.5 * before.max_abs[static_cast<std::size_t>(k)]);
    }
    CHECK(cal.statistics().tokens == 16.0);
    cal.observe(x, 32); // max(0.5 * old, new) = new
    for (int k = 0; k < K; ++k)
      CHECK(cal.statistics().max_abs[static_cast<std::size_t>(k)] ==
            before.max_abs[static_cast<std::size_t>(k)]);
    cal.reset();
    for (int k = 0; k < K; ++k)
      CHECK(cal.statistics().sq_error[static_cast<std::size_t>(k)] == 0.0);
    CHECK(cal.statistics().tokens == 0.0);
    CHECK_THROWS_AS(cal.decay(1.5), std::invalid_argument);
    CHECK_THROWS_AS(cal.observe(x, 31), std::invalid_argument);
    CHECK_THROWS_AS(qc::calibrator<nvq>(40), std::invalid_argument);
  }

  TEST_CASE("per-row and given tensor scales are honoured") {
    auto g = quads_test::rng("calibration.scales");
    const int K = 64, rows = 70;
    const auto x = quads_test::normal_values(g, static_cast<std::size_t>(rows) * K);
    using per_row =
        quads::block_quantizer<quads::nvfp4,
                               quads::quant_options{.global = quads::global_scale::per_row}>;
    using given =
        quads::block_quantizer<quads::nvfp4,
                               quads::quant_options{.global = quads::global_scale::given}>;
    qc::calibrator<per_row> a(K);
    a.observe(x, rows);
    const auto xq =
        quads::reference::qdq<quads::nvfp4,
                              quads::quant_options{.global = quads::global_scale::per_row}>(x, rows,
                                                                                            K);
    double e0 = 0;
    for (int r = 0; r < rows; ++r) {
      const double d = static_cast<double>(x[static_cast<std::size_t>(r) * K]) -
                       xq[static_cast<std::size_t>(r) * K];
      e0 += d * d;
    }
    CHECK(a.statistics().sq_error[0] == doctest::Approx(e0).epsilon(1e-5));
    qc::calibrator<given> b(K), c(K);
    b.observe(x, rows, quads::tensor_scale{1.0f, 1.0f});
    c.observe(x, rows, quads::tensor_scale{1024.0f, 1.0f / 1024.0f});
    CHECK(b.statistics().sq_error != c.statistics().sq_error);
  }

  TEST_CASE("error-based statistics single out the channels sharing blocks with outliers") {
    auto g = quads_test::rng("calibration.outliers");
    const int K = 256, rows = 256;
    quads_test::activation_model m;
    m.channels = K;
    m.channel_sigma = 0.1;
    m.spike_probability = 0;
    m.scale.assign(K, 1.0);
    m.outlier_channels = {37};
    m.scale[37] = 60.0;
    qc::calibrator<nvq> cal(K);
    cal.observe(m.sample(rows, g), rows);
    const auto sel = qc::select_channels(qc::by_quant_error{}, cal.statistics(), 1.0 / 16,
                                         qc::permutation::none);
    CHECK(sel.blocks == std::vector<int>{2}); // channel 37 lives in block 2
    // The victims (channels of block 2 other than 37) have far larger error than channels
    // elsewhere.
    const auto& e = cal.statistics().sq_error;
    CHECK(e[33] > 20 * e[100]);
  }

} // TEST_SUITE
