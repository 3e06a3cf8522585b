// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host tests of the decode kernel's algorithm (tiling, k permutation, staging slots,
//!        fragments, split-K, tails) through a lane-by-lane emulation against the float64
//!        reference, and of the split-K plan.
#include <doctest/doctest.h>

#include "decode_emulation.hpp"
#include "emulation_checks.hpp"
#include "gemm_fixtures.hpp"

#include <quads/gemm/decode_layout.hpp>

#include <cstddef>
#include <vector>

namespace qg = quads::gemm;
namespace qt = quads_gemm_test;

namespace {

// M covers one partial n8 tile, a full 16-token tile and two token tiles; N covers a partial
// warp, a partial CTA and two CTAs; K covers a single block, odd multiples of 16 (8-byte rows),
// multiples of 32 with a partial last chunk, and several slabs; splits 1..3.
const qt::emu_shape shapes[] = {
    {1, 16, 16, 1},  {3, 48, 48, 1},   {16, 80, 144, 2},  {17, 48, 528, 3},
    {5, 130, 160, 2}, {40, 16, 1024, 3}, {8, 64, 2080, 4}, {2, 16, 16 * 33, 1},
};

struct decode_emulator {
  template <class Lane, class WF>
  static qt::emu_result run(const qt::emu_problem& p, const qg::decode_plan& plan,
                            const qt::emu_shape&) {
    return qt::emulate_decode<Lane, WF>(p, plan);
  }
};
constexpr qt::emulation_cases<decode_emulator> cases{"emulation"};

} // namespace

TEST_SUITE("gemm.emulation") {

TEST_CASE("emulated W4A4 NVFP4 with bf16 lanes matches the float64 reference") {
  cases.w4a4<qg::bf16_lane>(shapes);
}

TEST_CASE("emulated W4A4 NVFP4 with fp16 lanes matches the float64 reference") {
  cases.w4a4<qg::fp16_lane>(shapes);
}

TEST_CASE("emulated W4A16 (dense bf16 activations) matches the float64 reference") {
  cases.w4a16(shapes);
}

TEST_CASE("emulated MXFP4 W4A4 (bf16 lanes, 32-blocks) matches the float64 reference") {
  const qt::emu_shape mx[] = {{1, 16, 32, 1}, {3, 48, 96, 1}, {16, 80, 160, 2}, {19, 48, 1056, 3}};
  cases.w4a4<qg::bf16_lane, quads::mxfp4>(mx);
}

TEST_CASE("emulated W4A4 + RAC composition (b) matches the float64 reference, shared and own") {
  cases.rac(shapes);
}

TEST_CASE("the k permutation inside a chunk is a bijection shared by both operands") {
  using DL = qg::decode_layout;
  // every logical k of a chunk is reached exactly once by (t, w, h, kk)
  int seen[DL::chunk_k] = {};
  for (int t = 0; t < 4; ++t)
    for (int w = 0; w < DL::words_per_lane; ++w)
      for (int h = 0; h < 2; ++h)
        for (int kk : {2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9})
          ++seen[DL::word_k(0, t, w) + DL::pair_k(h, kk)];
  for (int k = 0; k < DL::chunk_k; ++k) CHECK(seen[k] == 1);
  // every shared-memory slot of a slab is filled by exactly one staging unit
  std::vector<int> filled(DL::slab_slots, 0);
  for (int c = 0; c < DL::slab_chunks; ++c)
    for (int n = 0; n < DL::tokens_per_cta; ++n)
      for (int o = 0; o < 16; ++o) ++filled[static_cast<std::size_t>(DL::stage_slot(c, n, o))];
  for (int f : filled) CHECK(f == 1);
}

TEST_CASE("plan_decode splits K without empty splits and sizes the workspace") {
  for (int K : {16, 48, 128, 144, 1024, 4096, 14336})
    for (int splits : {0, 1, 2, 3, 5, 8, 64})
      for (const auto mode : {qg::reduction::deterministic, qg::reduction::atomic}) {
        const auto p = qg::plan_decode(16, 4096, K, true, {splits, mode});
        CAPTURE(K);
        CAPTURE(splits);
        CHECK(p.chunks == (K + 127) / 128);
        CHECK(p.splits >= 1);
        CHECK(p.splits <= p.chunks);
        CHECK((p.splits - 1) * p.chunks_per_split < p.chunks);  // the last split is not empty
        CHECK(p.splits * p.chunks_per_split >= p.chunks);
        const std::size_t parts = mode == qg::reduction::deterministic ? p.splits : 1;
        CHECK(p.workspace_bytes == 2 * parts * 16 * 4096 * sizeof(float));
        // the launcher re-plans with the plan's own split count: it must be a fixed point
        const auto again = qg::plan_decode(16, 4096, K, true, {p.splits, mode});
        CHECK(again.splits == p.splits);
        CHECK(again.chunks_per_split == p.chunks_per_split);
      }
  // automatic: small layers get split, big ones do not need to
  CHECK(qg::plan_decode(1, 4096, 4096, false).splits > 1);
  CHECK(qg::plan_decode(16, 28672, 4096, false).splits <= 2);
}

} // TEST_SUITE
