// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: a scale layout without `coords(offset)` used by the reference; the
//! `scale_layout` concept rejects it. Positive twin: with coords.
// expect: scale_layout
// expect: l.coords(off)
#include <quads/reference/tensor.hpp>

#include <cstddef>
#include <vector>

struct my_layout {
  int rows = 0;
  int cols = 0;
  std::size_t size() const noexcept { return static_cast<std::size_t>(rows) * cols; }
  std::size_t offset(int r, int c) const noexcept { return static_cast<std::size_t>(c) * rows + r; }
#ifndef QUADS_COMPILE_FAIL
  quads::scale_coord coords(std::size_t off) const noexcept {
    return {static_cast<int>(off % rows), static_cast<int>(off / rows), off < size()};
  }
#endif
};

std::size_t use(const std::vector<float>& x) {
  return quads::reference::quantize<quads::nvfp4, quads::quant_options{}, my_layout>(x, 1, 16)
      .scales.size();
}
