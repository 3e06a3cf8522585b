// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief A host emulation of the decode GEMM kernel (quads/gemm/decode.cuh), lane by lane, with
//!        the MMA computed from the PTX ISA's fragment layout of mma.m16n8k16.
//!
//! It mirrors the kernel's loops (CTAs, splits, slabs, staging into the fragment-ordered shared
//! memory, per-lane weight loads and dequantization, the C-fragment write-out, the epilogue
//! pass's split-ordered sum) and uses the same index maps (`decode_layout`) and loaders, but an
//! MMA written independently from the PTX layout tables (in float64, so products and sums are
//! exact for the test sizes). If the kernel's index maps were inconsistent (a permutation of k
//! applied differently to the two operands, a wrong slot), the emulated result would differ from
//! the float64 reference by O(1), not by rounding. What it cannot show: that the device code
//! matches this emulation (that needs a GPU run).
#pragma once

#include <quads/gemm/decode_layout.hpp>
#include <quads/gemm/dequant.hpp>
#include <quads/scheme/schemes.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace quads_gemm_test {

enum class act_kind { dense, fp4, rac };

//! The operands as the kernel sees them (host memory).
struct emu_problem {
  int M = 0, N = 0, K = 0;
  const std::uint8_t* w_data = nullptr;
  const std::uint8_t* w_scales = nullptr;
  act_kind kind = act_kind::dense;
  const std::uint16_t* a_dense = nullptr;  //!< [M, K] 16-bit bits
  const std::uint8_t* a_data = nullptr;    //!< packed codes, a_row_bytes per row
  const std::uint8_t* a_scales = nullptr;  //!< a_scale_cols per row
  int a_row_bytes = 0, a_scale_cols = 0;
  const int* slot = nullptr;
  bool own = false;
};

struct emu_result {
  std::vector<float> acc;    //!< [M, N] after the split-ordered sum (what the epilogue sees)
  std::vector<float> acc_r;  //!< residual accumulator (own), else empty
};

namespace detail {

struct u4 {
  std::uint32_t x = 0, y = 0, z = 0, w = 0;
  std::uint32_t word(int i) const { return i == 0 ? x : (i == 1 ? y : (i == 2 ? z : w)); }
};

inline std::uint32_t load32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

//! The staged octet of activations for token `m`, logical k .. k + 8, in fragment lane order
//! (what both kernels write to shared memory).
template <class Lane, class AF>
u4 stage_octet(const emu_problem& p, int m, int k) {
  using AL = quads::gemm::fp4_loader<AF, Lane>;
  std::uint32_t out[4];
  if (p.kind == act_kind::dense) {
    std::uint16_t x[8];
    for (int i = 0; i < 8; ++i) x[i] = p.a_dense[static_cast<std::size_t>(m) * p.K + k + i];
    quads::gemm::pair_octet(x, out);
  } else {
    const std::uint32_t q = load32(p.a_data + static_cast<std::size_t>(m) * p.a_row_bytes + k / 2);
    const std::uint8_t s = p.a_scales[static_cast<std::size_t>(m) * p.a_scale_cols + k / AF::block_size];
    AL::dequant_word(q, AL::multiplier2(s), out);
  }
  return u4{out[0], out[1], out[2], out[3]};
}

//! The RAC residual octet for logical k of token `m` (zero when k's block is not selected).
template <class Lane, class AF>
u4 stage_residual(const emu_problem& p, int m, int k) {
  using AL = quads::gemm::fp4_loader<AF, Lane>;
  constexpr int AB = AF::block_size;
  const int j = p.slot[k / AB];
  if (j < 0) return u4{};
  const int kr = p.K + j * AB + k % AB;
  const std::uint32_t q = load32(p.a_data + static_cast<std::size_t>(m) * p.a_row_bytes + kr / 2);
  const std::uint8_t s = p.a_scales[static_cast<std::size_t>(m) * p.a_scale_cols + p.K / AB + j];
  std::uint32_t out[4];
  AL::dequant_word(q, AL::multiplier2(s), out);
  return u4{out[0], out[1], out[2], out[3]};
}

template <class Lane>
double lane_value(std::uint32_t reg, int half) {
  return quads::gemm::detail::lane_to_float<Lane>(static_cast<std::uint16_t>(half ? reg >> 16 : reg & 0xffffu));
}

//! D[16][8] += A[16][16] B[16][8] from the 32 lanes' registers, by the PTX ISA layout of
//! mma.m16n8k16 (.bf16/.f16): A reg r holds (row g + 8 * (r & 1), col 2t + 8 * (r >> 1) + half),
//! B reg r holds (row 2t + 8 r + half, col g), the lower half being the lower index.
template <class Lane>
void mma_emulated(double (&d)[16][8], const std::uint32_t (&a)[32][4], const std::uint32_t (&b)[32][2]) {
  double A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int r = 0; r < 4; ++r)
      for (int h = 0; h < 2; ++h)
        A[g + 8 * (r & 1)][2 * t + 8 * (r >> 1) + h] = lane_value<Lane>(a[lane][r], h);
    for (int r = 0; r < 2; ++r)
      for (int h = 0; h < 2; ++h) B[2 * t + 8 * r + h][g] = lane_value<Lane>(b[lane][r], h);
  }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double s = 0;
      for (int k = 0; k < 16; ++k) s += A[i][k] * B[k][j];
      d[i][j] += s;
    }
}

} // namespace detail

//! Runs the decode kernel's algorithm on the host for `plan` (deterministic reduction).
template <class Lane, class WF, class AF = WF>
emu_result emulate_decode(const emu_problem& p, const quads::gemm::decode_plan& plan) {
  using DL = quads::gemm::decode_layout;
  using WL = quads::gemm::fp4_loader<WF, Lane>;
  using AL = quads::gemm::fp4_loader<AF, Lane>;
  using detail::u4;
  constexpr int WB = WF::block_size;
  constexpr int AB = AF::block_size;
  constexpr int blocks_per_lane = 32 / WB;
  const int M = p.M, N = p.N, K = p.K;
  const std::size_t MN = static_cast<std::size_t>(M) * N;
  std::vector<float> ws(MN * plan.splits, 0.0f), ws_r(p.own ? MN * plan.splits : 0, 0.0f);
  const int fold = WL::fold_log2 + (p.kind == act_kind::dense ? 0 : AL::fold_log2);
  const int row_bytes = K / 2;

  auto stage_octet = [&](int m, int k) { return detail::stage_octet<Lane, AF>(p, m, k); };
  auto stage_residual = [&](int m, int k) { return detail::stage_residual<Lane, AF>(p, m, k); };

  const int gx = (N + DL::rows_per_cta - 1) / DL::rows_per_cta;
  const int gy = (M + DL::tokens_per_cta - 1) / DL::tokens_per_cta;
  std::vector<u4> act(DL::slab_slots), res(DL::slab_slots);
  for (int split = 0; split < plan.splits; ++split)
    for (int by = 0; by < gy; ++by)
      for (int bx = 0; bx < gx; ++bx) {
        const int m0 = by * DL::tokens_per_cta;
        const int chunk_begin = split * plan.chunks_per_split;
        const int chunk_end = std::min(chunk_begin + plan.chunks_per_split, plan.chunks);
        const int tokens = std::min(DL::tokens_per_cta, M - m0);
        const int ntiles = tokens > 8 ? 2 : 1;
        double acc[DL::warps][2][16][8] = {};
        double acc_r[DL::warps][2][16][8] = {};
        for (int slab = chunk_begin; slab < chunk_end; slab += DL::slab_chunks) {
          const int nch = std::min(DL::slab_chunks, chunk_end - slab);
          // staging
          for (int u = 0; u < DL::tokens_per_cta * nch * 16; ++u) {
            const int n = u / (nch * 16), oc = u % (nch * 16);
            const int c = oc / 16, o = oc % 16;
            const int m = m0 + n, k = (slab + c) * DL::chunk_k + 8 * o;
            u4 v{}, rv{};
            if (m < M && k < K) {
              v = stage_octet(m, k);
              if (p.kind == act_kind::rac) rv = stage_residual(m, k);
            }
            act[static_cast<std::size_t>(DL::stage_slot(c, n, o))] = v;
            res[static_cast<std::size_t>(DL::stage_slot(c, n, o))] = rv;
          }
          for (int warp = 0; warp < DL::warps; ++warp) {
            const int n0 = bx * DL::rows_per_cta + warp * DL::rows_per_warp;
            if (n0 >= N) continue;
            // per-lane weight loads
            u4 wq[DL::slab_chunks][32][2] = {};
            std::uint8_t sc[DL::slab_chunks][32][2][blocks_per_lane] = {};
            for (int c = 0; c < nch; ++c)
              for (int lane = 0; lane < 32; ++lane)
                for (int r = 0; r < 2; ++r) {
                  const int g = lane / 4, t = lane % 4;
                  const int n = n0 + g + 8 * r;
                  const int kseg = DL::word_k(slab + c, t, 0);
                  if (n >= N || kseg >= K) continue;
                  const std::uint8_t* ptr = p.w_data + static_cast<std::size_t>(n) * row_bytes + kseg / 2;
                  u4 v{};
                  v.x = detail::load32(ptr);
                  v.y = detail::load32(ptr + 4);
                  if (kseg + 16 < K) {
                    v.z = detail::load32(ptr + 8);
                    v.w = detail::load32(ptr + 12);
                  }
                  wq[c][lane][r] = v;
                  for (int b = 0; b < blocks_per_lane; ++b)
                    if (kseg + b * WB < K)
                      sc[c][lane][r][b] = p.w_scales[static_cast<std::size_t>(n) * (K / WB) + (kseg + b * WB) / WB];
                }
            for (int c = 0; c < nch; ++c) {
              bool any_residual = false;
              if (p.kind == act_kind::rac)
                for (int b = 0; b < DL::chunk_k / AB; ++b) {
                  const int kb = (slab + c) * DL::chunk_k / AB + b;
                  if (kb < K / AB && p.slot[kb] >= 0) any_residual = true;
                }
              for (int w = 0; w < DL::words_per_lane; ++w) {
                const int b = (w * 8) / WB;
                std::uint32_t ag[32][4], ag8[32][4];
                for (int lane = 0; lane < 32; ++lane) {
                  WL::dequant_word(wq[c][lane][0].word(w), WL::multiplier2(sc[c][lane][0][b]), ag[lane]);
                  WL::dequant_word(wq[c][lane][1].word(w), WL::multiplier2(sc[c][lane][1][b]), ag8[lane]);
                }
                for (int j = 0; j < ntiles; ++j)
                  for (int h = 0; h < 2; ++h) {
                    std::uint32_t A[32][4], B[32][2], BR[32][2];
                    for (int lane = 0; lane < 32; ++lane) {
                      A[lane][0] = ag[lane][2 * h];
                      A[lane][1] = ag8[lane][2 * h];
                      A[lane][2] = ag[lane][2 * h + 1];
                      A[lane][3] = ag8[lane][2 * h + 1];
                      const u4 bv = act[static_cast<std::size_t>(DL::act_slot(c, j, w, lane))];
                      const u4 br = res[static_cast<std::size_t>(DL::act_slot(c, j, w, lane))];
                      B[lane][0] = bv.word(2 * h);
                      B[lane][1] = bv.word(2 * h + 1);
                      BR[lane][0] = br.word(2 * h);
                      BR[lane][1] = br.word(2 * h + 1);
                    }
                    detail::mma_emulated<Lane>(acc[warp][j], A, B);
                    if (p.kind == act_kind::rac && any_residual)
                      detail::mma_emulated<Lane>(p.own ? acc_r[warp][j] : acc[warp][j], A, BR);
                  }
              }
            }
          }
        }
        // write-out of the C fragments: row = weight row n, col = token m
        for (int warp = 0; warp < DL::warps; ++warp) {
          const int n0 = bx * DL::rows_per_cta + warp * DL::rows_per_warp;
          for (int j = 0; j < ntiles; ++j)
            for (int row = 0; row < 16; ++row)
              for (int col = 0; col < 8; ++col) {
                const int n = n0 + row, m = m0 + 8 * j + col;
                if (n >= N || m >= M) continue;
                const std::size_t o = static_cast<std::size_t>(split) * MN + static_cast<std::size_t>(m) * N + n;
                ws[o] = static_cast<float>(std::ldexp(acc[warp][j][row][col], fold));
                if (p.own) ws_r[o] = static_cast<float>(std::ldexp(acc_r[warp][j][row][col], fold));
              }
        }
      }
  emu_result r;
  r.acc.assign(MN, 0.0f);
  if (p.own) r.acc_r.assign(MN, 0.0f);
  for (std::size_t i = 0; i < MN; ++i) {
    float s = ws[i], sr = p.own ? ws_r[i] : 0.0f;
    for (int q = 1; q < plan.splits; ++q) {
      s += ws[static_cast<std::size_t>(q) * MN + i];
      if (p.own) sr += ws_r[static_cast<std::size_t>(q) * MN + i];
    }
    r.acc[i] = s;
    if (p.own) r.acc_r[i] = sr;
  }
  return r;
}

} // namespace quads_gemm_test
