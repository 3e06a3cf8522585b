// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief What the two emulation tests (decode and streaming kernel) share: the emulated problem
//!        of each operand kind, and the comparison with the float64 reference.
#pragma once

#include <doctest/doctest.h>

#include "decode_emulation.hpp"
#include "gemm_fixtures.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace quads_gemm_test {

//! |emulated - reference| within float rounding of the per-split conversions (the emulated MMA
//! sums in float64, so this is far tighter than the GPU tolerance).
inline void check_close(const std::vector<float>& got, const std::vector<double>& want,
                        const std::vector<double>& abs_sum, int splits, const std::string& what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = (splits + 1) * std::ldexp(1.0, -23) * abs_sum[i] + 1e-300;
    if (std::fabs(got[i] - want[i]) > tol) {
      FAIL_CHECK(what << ": element " << i << " got " << got[i] << " want " << want[i]
                      << " (tolerance " << tol << ")");
      return;
    }
  }
}

//! The weights part of a problem `[M, N, K]` (packed weights `w` of `qt::quantize`).
template <class W>
emu_problem weights_problem(const W& w, int M, int N, int K) {
  emu_problem p;
  p.M = M;
  p.N = N;
  p.K = K;
  p.w_data = w.data.data();
  p.w_scales = w.scales.data();
  return p;
}

//! W times packed FP4 activations `a` (`qt::quantize` of `[M, K]`, linear scales).
template <class W, class Format, class Layout>
emu_problem fp4_problem(const W& w, const quads::reference::quantized_tensor<Format, Layout>& a,
                        int M, int N, int K) {
  emu_problem p = weights_problem(w, M, N, K);
  p.kind = act_kind::fp4;
  p.a_data = a.data.data();
  p.a_scales = a.scales.data();
  p.a_row_bytes = K / 2;
  p.a_scale_cols = K / Format::block_size;
  return p;
}

//! W times dense 16-bit activations (`bits`, `[M, K]`).
template <class W>
emu_problem dense_problem(const W& w, const std::uint16_t* bits, int M, int N, int K) {
  emu_problem p = weights_problem(w, M, N, K);
  p.kind = act_kind::dense;
  p.a_dense = bits;
  return p;
}

//! W times the RAC operand `[Q(x) | Q(r_S)]` of `rac` with its slot table `slot`.
template <class W>
emu_problem rac_emu_problem(const W& w, const rac_problem& rac, const std::vector<int>& slot,
                            bool own, int M, int N, int K) {
  emu_problem p = weights_problem(w, M, N, K);
  p.kind = act_kind::rac;
  p.a_data = rac.act.data.data();
  p.a_scales = rac.act.scales.data();
  p.a_row_bytes = rac.act.augmented_channels() / 2;
  p.a_scale_cols = rac.act.augmented_channels() / 16;
  p.slot = slot.data();
  p.own = own;
  return p;
}

} // namespace quads_gemm_test
