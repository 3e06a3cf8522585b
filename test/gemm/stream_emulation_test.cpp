// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host tests of the streaming decode kernel's algorithm through its byte-level emulation
//!        (stream_emulation.hpp) against the float64 reference: W4A4 NVFP4 (bf16 and fp16
//!        lanes), W4A16, MXFP4 and RAC (b) shared / own, odd shapes (partial warps, CTAs and
//!        chunks, 8-byte rows, scale rows not a multiple of 4 bytes), 1-5 splits, ring depths 2-5;
//!        RAC at M <= 4 (M = 1, 2, 3 below) runs the residual-column path.
#include <doctest/doctest.h>

#include "emulation_checks.hpp"
#include "gemm_fixtures.hpp"
#include "stream_emulation.hpp"

#include <quads/gemm/decode_layout.hpp>
#include <quads/gemm/reference.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace qg = quads::gemm;
namespace qgr = quads::gemm::reference;
namespace qt = quads_gemm_test;

namespace {

struct shape {
  int M, N, K, splits, stages;
};

// M: one partial n8 tile, 16 tokens, two token tiles; N: a partial warp, a partial CTA, two
// CTAs; K: one block, 8-byte rows (K % 32 == 16), scale rows of 5 / 33 bytes, whole chunks.
const shape shapes[] = {
    {1, 16, 16, 1, 3},    {3, 48, 80, 1, 2},    {16, 144, 528, 3, 3},  {17, 48, 640, 2, 4},
    {5, 130, 1024, 4, 5}, {9, 272, 2048, 5, 3}, {2, 16, 16 * 33, 1, 3}, {40, 16, 384, 3, 2},
};

template <class Lane>
void run_w4a4() {
  auto g = quads_test::rng(std::string("gemm.stream_emulation.w4a4.") + Lane::name);
  for (const shape s : shapes) {
    CAPTURE(s.M);
    CAPTURE(s.N);
    CAPTURE(s.K);
    CAPTURE(s.splits);
    const auto w = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
    const auto a = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.M, s.K), s.M, s.K);
    const auto plan = qg::plan_decode(s.M, s.N, s.K, false, {s.splits});
    const auto p = qt::fp4_problem(w, a, s.M, s.N, s.K);
    const auto got = qt::emulate_stream<Lane, quads::nvfp4>(p, plan, true, s.stages);
    const auto ref = qgr::w4a4(a, w);
    qt::check_close(got.acc, ref.acc, ref.abs_sum, plan.splits, "stream w4a4");
  }
}

} // namespace

TEST_SUITE("gemm.stream_emulation") {

TEST_CASE("the streaming kernel's emulation (W4A4 NVFP4, bf16 lanes) matches the float64 reference") {
  run_w4a4<qg::bf16_lane>();
}

TEST_CASE("the streaming kernel's emulation (W4A4 NVFP4, fp16 lanes) matches the float64 reference") {
  run_w4a4<qg::fp16_lane>();
}

TEST_CASE("the streaming kernel's emulation (W4A16 bf16) matches the float64 reference") {
  auto g = quads_test::rng("gemm.stream_emulation.w4a16");
  for (const shape s : shapes) {
    CAPTURE(s.K);
    const auto w = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
    const auto a = qt::to_dense16<qg::bf16_lane>(qt::random_matrix(g, s.M, s.K));
    const auto plan = qg::plan_decode(s.M, s.N, s.K, false, {s.splits});
    const auto p = qt::dense_problem(w, a.bits.data(), s.M, s.N, s.K);
    const auto got = qt::emulate_stream<qg::bf16_lane, quads::nvfp4>(p, plan, false, s.stages);
    const auto ref = qgr::w4a16(a.values, s.M, w);
    qt::check_close(got.acc, ref.acc, ref.abs_sum, plan.splits, "stream w4a16");
  }
}

TEST_CASE("the streaming kernel's emulation (MXFP4, 32-blocks) matches the float64 reference") {
  auto g = quads_test::rng("gemm.stream_emulation.mxfp4");
  const shape mx[] = {{1, 16, 32, 1, 3}, {3, 48, 96, 1, 2}, {16, 80, 160, 2, 3}, {19, 144, 1056, 3, 4}, {4, 16, 512, 2, 3}};
  for (const shape s : mx) {
    CAPTURE(s.K);
    const auto w = qt::quantize<quads::mxfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
    const auto a = qt::quantize<quads::mxfp4>(qt::random_matrix(g, s.M, s.K), s.M, s.K);
    const auto plan = qg::plan_decode(s.M, s.N, s.K, false, {s.splits});
    const auto p = qt::fp4_problem(w, a, s.M, s.N, s.K);
    const auto got = qt::emulate_stream<qg::bf16_lane, quads::mxfp4>(p, plan, true, s.stages);
    const auto ref = qgr::w4a4(a, w);
    qt::check_close(got.acc, ref.acc, ref.abs_sum, plan.splits, "stream mxfp4");
  }
}

TEST_CASE("the streaming kernel's emulation of RAC (b), shared and own, matches the reference") {
  auto g = quads_test::rng("gemm.stream_emulation.rac");
  for (const auto mode : {quads::compensation::residual_scale::shared,
                          quads::compensation::residual_scale::own}) {
    for (const shape s : shapes) {
      if (s.K < 48) continue;
      CAPTURE(s.K);
      const auto w = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
      const auto rac = qt::make_rac(qt::random_matrix(g, s.M, s.K), s.M, s.K, 2, 1, mode);
      const auto slot = rac.sel.slot_table();
      const bool own = mode == quads::compensation::residual_scale::own;
      const auto plan = qg::plan_decode(s.M, s.N, s.K, own, {s.splits});
      const auto p = qt::rac_emu_problem(w, rac, slot, own, s.M, s.N, s.K);
      const auto got = qt::emulate_stream<qg::bf16_lane, quads::nvfp4>(p, plan, true, s.stages);
      const auto ref = qgr::w4a4_rac(rac.act, w, rac.sel);
      qt::check_close(got.acc, ref.acc, ref.abs_sum, plan.splits, "stream rac main");
      if (own) qt::check_close(got.acc_r, ref.acc_r, ref.abs_sum, plan.splits, "stream rac residual");
    }
  }
}

} // TEST_SUITE
