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

namespace qg = quads::gemm;
namespace qt = quads_gemm_test;

namespace {

// M: one partial n8 tile, 16 tokens, two token tiles; N: a partial warp, a partial CTA, two
// CTAs; K: one block, 8-byte rows (K % 32 == 16), scale rows of 5 / 33 bytes, whole chunks.
const qt::emu_shape shapes[] = {
    {1, 16, 16, 1, 3},    {3, 48, 80, 1, 2},    {16, 144, 528, 3, 3},  {17, 48, 640, 2, 4},
    {5, 130, 1024, 4, 5}, {9, 272, 2048, 5, 3}, {2, 16, 16 * 33, 1, 3}, {40, 16, 384, 3, 2},
};

struct stream_emulator {
  template <class Lane, class WF>
  static qt::emu_result run(const qt::emu_problem& p, const qg::decode_plan& plan,
                            const qt::emu_shape& s) {
    return qt::emulate_stream<Lane, WF>(p, plan, true, s.stages);
  }
};
constexpr qt::emulation_cases<stream_emulator> cases{"stream_emulation"};

} // namespace

TEST_SUITE("gemm.stream_emulation") {

TEST_CASE("the streaming kernel's emulation (W4A4 NVFP4, bf16 lanes) matches the float64 reference") {
  cases.w4a4<qg::bf16_lane>(shapes);
}

TEST_CASE("the streaming kernel's emulation (W4A4 NVFP4, fp16 lanes) matches the float64 reference") {
  cases.w4a4<qg::fp16_lane>(shapes);
}

TEST_CASE("the streaming kernel's emulation (W4A16 bf16) matches the float64 reference") {
  cases.w4a16(shapes);
}

TEST_CASE("the streaming kernel's emulation (MXFP4, 32-blocks) matches the float64 reference") {
  const qt::emu_shape mx[] = {{1, 16, 32, 1, 3}, {3, 48, 96, 1, 2}, {16, 80, 160, 2, 3},
                              {19, 144, 1056, 3, 4}, {4, 16, 512, 2, 3}};
  cases.w4a4<qg::bf16_lane, quads::mxfp4>(mx);
}

TEST_CASE("the streaming kernel's emulation of RAC (b), shared and own, matches the reference") {
  cases.rac(shapes);
}

} // TEST_SUITE
