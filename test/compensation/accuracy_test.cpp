// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief RAC accuracy on synthetic LLM-like activations (the error-vs-ratio table of docs/rac.md).

#include <doctest/doctest.h>

#include <test_support/seed.hpp>

#include "rac_experiment.hpp"

namespace qc = quads::compensation;

TEST_SUITE("compensation.accuracy") {

  TEST_CASE("the compensated output error falls with the ratio and error-based selection wins") {
    auto g = quads_test::rng("rac.accuracy");
    const quads_test::rac_experiment e(g);
    qc::calibrator<quads::block_quantizer<quads::nvfp4>> cal(e.K);
    cal.observe(e.x_cal, e.rows_cal);
    auto host = [](const std::vector<float>& x, const qc::channel_selection& sel,
                   qc::residual_scale rs) {
      return qc::reference::quantize_activation<quads::nvfp4>(
          x, static_cast<int>(x.size()) / sel.channels, sel, {.residual = rs});
    };
    const auto rows = quads_test::rac_table(e, cal.statistics(), host, "Host reference");
    // The claims, for the default configuration (error-based, no permutation, shared scale).
    const auto& def = quads_test::find_row(rows, "quant_error", "none", "shared");
    for (std::size_t i = 1; i < def.err.size(); ++i)
      CHECK(def.err[i] < def.err[i - 1]);
    CHECK(def.err.back() * 8 <= def.err.front());
    CHECK(def.err[2] < quads_test::find_row(rows, "max_abs", "none", "shared").err[2]);
  }

} // TEST_SUITE
