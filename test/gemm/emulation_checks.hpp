// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief What the two emulation tests (decode and streaming kernel) share: the emulated problem
//!        of each operand kind, the comparison with the float64 reference, and the test cases
//!        themselves (W4A4, W4A16, MXFP4, RAC), run with either emulator.
#pragma once

#include <doctest/doctest.h>

#include "decode_emulation.hpp"
#include "gemm_fixtures.hpp"

#include <quads/compensation/residual.hpp>
#include <quads/gemm/decode_layout.hpp>
#include <quads/gemm/reference.hpp>

#include <cmath>
#include <cstdint>
#include <span>
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

//! A test shape; `stages` is the ring depth of the streaming emulation (unused by the other).
struct emu_shape {
  int M, N, K, splits, stages = 3;
};

//! The cases every emulator runs. `Emu::template run<Lane, WF>(problem, plan, shape)` emulates one
//! call; `tag` names the emulator in the random seed's name ("gemm.<tag>.w4a4.bf16") and in the
//! failure messages.
template <class Emu>
struct emulation_cases {
  const char* tag;

  //! W4A4 with both operands in format `F` (K a multiple of its block size in `shapes`).
  template <class Lane, class F = quads::nvfp4>
  void w4a4(std::span<const emu_shape> shapes) const {
    const std::string what = quads::is_two_level<F> ? std::string("w4a4.") + Lane::name : "mxfp4";
    auto g = quads_test::rng(std::string("gemm.") + tag + "." + what);
    for (const emu_shape s : shapes) {
      CAPTURE(s.M);
      CAPTURE(s.N);
      CAPTURE(s.K);
      CAPTURE(s.splits);
      const auto w = quantize<F>(random_matrix(g, s.N, s.K), s.N, s.K);
      const auto a = quantize<F>(random_matrix(g, s.M, s.K), s.M, s.K);
      const auto plan = quads::gemm::plan_decode(s.M, s.N, s.K, false, {s.splits});
      const auto got = Emu::template run<Lane, F>(fp4_problem(w, a, s.M, s.N, s.K), plan, s);
      const auto ref = quads::gemm::reference::w4a4(a, w);
      check_close(got.acc, ref.acc, ref.abs_sum, plan.splits, std::string(tag) + " " + what);
    }
  }

  void w4a16(std::span<const emu_shape> shapes) const {
    auto g = quads_test::rng(std::string("gemm.") + tag + ".w4a16");
    for (const emu_shape s : shapes) {
      CAPTURE(s.K);
      const auto w = quantize<quads::nvfp4>(random_matrix(g, s.N, s.K), s.N, s.K);
      const auto a = to_dense16<quads::gemm::bf16_lane>(random_matrix(g, s.M, s.K));
      const auto plan = quads::gemm::plan_decode(s.M, s.N, s.K, false, {s.splits});
      const auto got = Emu::template run<quads::gemm::bf16_lane, quads::nvfp4>(
          dense_problem(w, a.bits.data(), s.M, s.N, s.K), plan, s);
      const auto ref = quads::gemm::reference::w4a16(a.values, s.M, w);
      check_close(got.acc, ref.acc, ref.abs_sum, plan.splits, std::string(tag) + " w4a16");
    }
  }

  //! RAC (b) with every other block selected (~50 %), shared and own residual scale.
  void rac(std::span<const emu_shape> shapes) const {
    auto g = quads_test::rng(std::string("gemm.") + tag + ".rac");
    for (const auto mode : {quads::compensation::residual_scale::shared,
                            quads::compensation::residual_scale::own}) {
      for (const emu_shape s : shapes) {
        if (s.K < 48) continue;
        CAPTURE(s.M);
        CAPTURE(s.K);
        CAPTURE(quads::compensation::to_string(mode));
        const auto w = quantize<quads::nvfp4>(random_matrix(g, s.N, s.K), s.N, s.K);
        const auto rac = make_rac(random_matrix(g, s.M, s.K), s.M, s.K, 2, 1, mode);
        const auto slot = rac.sel.slot_table();
        const bool own = mode == quads::compensation::residual_scale::own;
        const auto plan = quads::gemm::plan_decode(s.M, s.N, s.K, own, {s.splits});
        const auto got = Emu::template run<quads::gemm::bf16_lane, quads::nvfp4>(
            rac_emu_problem(w, rac, slot, own, s.M, s.N, s.K), plan, s);
        const auto ref = quads::gemm::reference::w4a4_rac(rac.act, w, rac.sel);
        check_close(got.acc, ref.acc, ref.abs_sum, plan.splits, std::string(tag) + " rac main");
        if (own)
          check_close(got.acc_r, ref.acc_r, ref.abs_sum, plan.splits,
                      std::string(tag) + " rac residual");
      }
    }
  }
};

} // namespace quads_gemm_test
