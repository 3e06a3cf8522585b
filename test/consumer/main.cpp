// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief A consumer program: includes the umbrella header, quantizes a small matrix with the
//! host reference and checks the round trip. Built by the consumer tests against quads used as
//! a Meson subproject and as an installed package found through pkg-config.
#include <quads/quads.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  constexpr int rows = 4, cols = 64;
  std::vector<float> x(rows * cols);
  for (int i = 0; i < rows * cols; ++i) x[static_cast<std::size_t>(i)] = std::sin(0.37f * static_cast<float>(i));
  const auto q = quads::reference::quantize<quads::nvfp4, quads::quant_options{}, quads::swizzled_128x4>(x, rows, cols);
  const auto y = quads::reference::dequantize<quads::nvfp4>(q);
  double err = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) err = std::fmax(err, std::fabs(static_cast<double>(x[i]) - y[i]));
  std::printf("quads %d.%d.%d consumer: %zu scale bytes, max |x - qdq(x)| = %g\n", QUADS_VERSION_MAJOR,
              QUADS_VERSION_MINOR, QUADS_VERSION_PATCH, q.scales.size(), err);
  // |x| <= 1, so the coarsest grid step is 2 * (1 / 6) and the error stays below a third
  return q.scales.size() == 512 && err > 0.0 && err < 1.0 / 3.0 ? 0 : 1;
}
