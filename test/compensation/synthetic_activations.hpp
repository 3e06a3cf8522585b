// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Seeded synthetic activations with LLM-like outliers, for the RAC accuracy tests.
//!
//! The model (fixed per layer, drawn once): per-channel scales `exp(N(0, channel_sigma))`, a few
//! outlier channels multiplied by U(outlier_min, outlier_max). A batch (drawn per call): each
//! token has a magnitude `exp(N(0, token_sigma))`, each element is `N(0, 1) * channel scale *
//! token magnitude`, and with probability `spike_probability` an element is multiplied by
//! U(spike_min, spike_max) (rare token spikes). Calibration and evaluation batches share the model
//! and differ in their tokens.
#pragma once

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace quads_test {

struct activation_model {
  int channels = 0;
  double channel_sigma = 0.75;
  double outlier_fraction = 0.01;
  double outlier_min = 20.0;
  double outlier_max = 100.0;
  double token_sigma = 0.3;
  double spike_probability = 5e-4;
  double spike_min = 10.0;
  double spike_max = 30.0;
  std::vector<double> scale; //!< per channel
  std::vector<int> outlier_channels;

  //! Draws the per-channel scales and outlier channels (at least one outlier channel).
  void draw(std::mt19937_64& g) {
    std::normal_distribution<double> n(0.0, channel_sigma);
    scale.assign(static_cast<std::size_t>(channels), 1.0);
    for (double& s : scale)
      s = std::exp(n(g));
    int count = static_cast<int>(std::lround(outlier_fraction * channels));
    if (count < 1) count = 1;
    std::uniform_int_distribution<int> pick(0, channels - 1);
    std::uniform_real_distribution<double> mult(outlier_min, outlier_max);
    outlier_channels.clear();
    while (static_cast<int>(outlier_channels.size()) < count) {
      const int c = pick(g);
      bool dup = false;
      for (int o : outlier_channels)
        dup = dup || o == c;
      if (dup) continue;
      outlier_channels.push_back(c);
      scale[static_cast<std::size_t>(c)] *= mult(g);
    }
  }

  //! A batch `[rows, channels]` row-major.
  std::vector<float> sample(int rows, std::mt19937_64& g) const {
    std::normal_distribution<double> n(0.0, 1.0), tok(0.0, token_sigma);
    std::uniform_real_distribution<double> u(0.0, 1.0), spike(spike_min, spike_max);
    std::vector<float> x(static_cast<std::size_t>(rows) * channels);
    for (int r = 0; r < rows; ++r) {
      const double t = std::exp(tok(g));
      for (int k = 0; k < channels; ++k) {
        double v = n(g) * scale[static_cast<std::size_t>(k)] * t;
        if (u(g) < spike_probability) v *= spike(g);
        x[static_cast<std::size_t>(r) * channels + k] = static_cast<float>(v);
      }
    }
    return x;
  }
};

//! A Gaussian weight `[n, k]` with per-output-row scales exp(N(0, 0.25)) (so weight blocks vary).
inline std::vector<float> random_weight(int n, int k, std::mt19937_64& g) {
  std::normal_distribution<double> d(0.0, 1.0), row(0.0, 0.25);
  std::vector<float> w(static_cast<std::size_t>(n) * k);
  for (int i = 0; i < n; ++i) {
    const double s = 0.02 * std::exp(row(g));
    for (int j = 0; j < k; ++j)
      w[static_cast<std::size_t>(i) * k + j] = static_cast<float>(d(g) * s);
  }
  return w;
}

} // namespace quads_test
