// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief A host emulation of the streaming decode kernel (`stream_mainloop` in
//!        quads/gemm/decode.cuh), warp by warp and lane by lane.
//!
//! It mirrors the kernel's data movement at the byte level: each warp's cp.async ring (the
//! lanes' 16-byte code copies and 4-byte scale copies, zero-fill for rows beyond N and the tail of
//! K, the 8-byte path when K % 32 != 0, the byte-wise scale path when K / B % 4 != 0), the read
//! back (`ring_read`: codes of rows g, g + 8 and the lane's scale bytes read from other lanes'
//! copies), the activation staging of every (token, octet) unit of the staged token slots (the
//! slots and values the kernel's first fill and slab refills write, not their thread maps) into
//! the resident buffer or 4-chunk slabs, the MMAs (from the PTX fragment tables, as decode_emulation.hpp), the
//! C tile each warp writes into its drained ring (`cw[m * 16 + n]`, read back by `c_at`), and the
//! cluster reduction in split order. RAC with at most 4 tokens uses the kernel's residual columns
//! (the residual of token n staged as MMA column n + 4; no residual buffer or MMA; columns 4-7
//! reduced as the residual partials), more tokens a residual buffer whose MMAs accumulate apart
//! (the kernel stages the residuals of 5-8 tokens in a second token tile instead: the same
//! products in the same order); either way, for the shared scale, the residual partials join the
//! main sum after the reduction. What it cannot show: that the device code matches it.
#pragma once

#include "decode_emulation.hpp"

#include <quads/gemm/decode_layout.hpp>
#include <quads/gemm/dequant.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace quads_gemm_test {

//! Runs the streaming kernel's algorithm on the host for `plan`; `stages` the ring depth.
//! `resident` is accepted for symmetry with the launcher and has no effect here.
template <class Lane, class WF, class AF = WF>
emu_result emulate_stream(const emu_problem& p, const quads::gemm::decode_plan& plan, bool resident,
                          int stages = quads::gemm::stream_layout::stages) {
  using SL = quads::gemm::stream_layout;
  using DL = quads::gemm::decode_layout;
  using WL = quads::gemm::fp4_loader<WF, Lane>;
  using AL = quads::gemm::fp4_loader<AF, Lane>;
  using detail::u4;
  constexpr int WB = WF::block_size;
  constexpr int AB = AF::block_size;
  constexpr int scale_per_chunk = DL::chunk_k / WB;
  const int M = p.M, N = p.N, K = p.K;
  const std::size_t row_bytes = static_cast<std::size_t>(K / 2);
  const int w_scale_cols = K / WB;
  const bool aligned = K % DL::chunk_k == 0;
  const bool vec16 = K % 32 == 0;
  const bool scale_vec = aligned || w_scale_cols % 4 == 0;
  const int fold = WL::fold_log2 + (p.kind == act_kind::dense ? 0 : AL::fold_log2);
  const int nt = M > 8 ? 2 : 1;
  const int splits = plan.splits;
  const bool rac_cols = p.kind == act_kind::rac && M <= 4;  // as decode_gemm decides

  auto stage_octet = [&](int m, int k) { return detail::stage_octet<Lane, AF>(p, m, k); };
  auto stage_residual = [&](int m, int k) { return detail::stage_residual<Lane, AF>(p, m, k); };
  // cp.async of `bytes` with `src_bytes` read (rest zero)
  auto copy = [](std::uint8_t* dst, const std::uint8_t* src, int bytes, int src_bytes) {
    for (int i = 0; i < bytes; ++i) dst[i] = i < src_bytes ? src[i] : std::uint8_t{0};
  };

  const int n128 = (N + SL::rows_per_cta - 1) / SL::rows_per_cta;
  const int mtiles = (M + SL::tokens_per_cta - 1) / SL::tokens_per_cta;
  emu_result r;
  r.acc.assign(static_cast<std::size_t>(M) * N, 0.0f);
  if (p.own) r.acc_r.assign(r.acc.size(), 0.0f);
  const int chunk_slots = nt * DL::words_per_lane * 32;

  for (int bz = 0; bz < mtiles; ++bz)
    for (int by = 0; by < n128; ++by) {
      const int n_cta = by * SL::rows_per_cta, m0 = bz * SL::tokens_per_cta;
      const int tokens = std::min(SL::tokens_per_cta, M - m0);
      // C tiles of every rank (split): [rank][warp][2][16 m][16 n] floats
      std::vector<float> ctile(static_cast<std::size_t>(splits) * SL::warps * 2 * 256, 0.0f);
      for (int split = 0; split < splits; ++split) {
        const int chunk_begin = split * plan.chunks_per_split;
        const int chunk_end = std::min(chunk_begin + plan.chunks_per_split, plan.chunks);
        const int nchunks = std::max(chunk_end - chunk_begin, 0);
        // activation slots of every chunk of the range, chunk i at i * chunk_slots: the kernel's
        // resident buffer; with slabs the kernel reuses two 4-chunk buffers (its barriers keep
        // that equivalent, which this emulation does not test)
        (void)resident;
        std::vector<u4> act(static_cast<std::size_t>(std::max(nchunks, 1)) * chunk_slots);
        std::vector<u4> res(act.size());
        std::vector<int> flag(static_cast<std::size_t>(std::max(nchunks, 1)), 0);
        auto buf_index = [&](int i) { return i * chunk_slots; };
        for (int i = 0; i < nchunks; ++i) {
          for (int tid = 0; tid < SL::threads; ++tid) {
            const int st_n = tid / 16, st_o = tid % 16;
            if (st_n >= (rac_cols ? 4 : 8 * nt)) continue;
            const int k = (chunk_begin + i) * DL::chunk_k + 8 * st_o;
            const bool valid = st_n < tokens && k < K;
            const int slot = buf_index(i) + SL::stage_slot(nt, 0, st_n, st_o);
            act[static_cast<std::size_t>(slot)] = valid ? stage_octet(m0 + st_n, k) : u4{};
            const u4 rv = valid && p.kind == act_kind::rac ? stage_residual(m0 + st_n, k) : u4{};
            // residual columns: 16 slots on, i.e. lane (st_n + 4) * 4 + st_o / 4 of the same word
            if (rac_cols) act[static_cast<std::size_t>(slot + 16)] = rv;
            else res[static_cast<std::size_t>(slot)] = rv;
          }
          if (p.kind == act_kind::rac) {
            const int kb0 = (chunk_begin + i) * DL::chunk_k / AB;
            for (int b = 0; b < DL::chunk_k / AB; ++b)
              if (kb0 + b < K / AB && p.slot[kb0 + b] >= 0) flag[static_cast<std::size_t>(i)] = 1;
          }
        }
        for (int warp = 0; warp < SL::warps; ++warp) {
          const int n0 = n_cta + warp * SL::rows_per_warp;
          double acc[2][16][8] = {}, acc_r[2][16][8] = {};
          if (n0 < N) {
            std::vector<std::uint8_t> ring(static_cast<std::size_t>(stages) * SL::stage_bytes, 0xEE);
            auto issue = [&](int i) {  // the kernel's issue(i), all 32 lanes
              std::uint8_t* st = ring.data() + (i % stages) * SL::stage_bytes;
              for (int lane = 0; lane < 32; ++lane) {
                const int g = lane / 4, t = lane % 4;
                const int kseg = DL::word_k(chunk_begin + i, t, 0);
                for (int rr = 0; rr < 2; ++rr) {
                  const int n = n0 + g + 8 * rr;
                  const bool ok = n < N;
                  const std::uint8_t* src = p.w_data + static_cast<std::size_t>(ok ? n : 0) * row_bytes + kseg / 2;
                  std::uint8_t* dst = st + lane * 32 + rr * 16;
                  if (aligned || vec16) {
                    copy(dst, src, 16, ok && kseg < K ? 16 : 0);
                  } else {
                    copy(dst, src, 8, ok && kseg < K ? 8 : 0);
                    copy(dst + 8, src + 8, 8, ok && kseg + 16 < K ? 8 : 0);
                  }
                }
                const int r_s = g + 8 * (t / 2), half = t % 2;
                const int nS = n0 + r_s;
                const bool okS = nS < N && 4 * half < scale_per_chunk;
                const int first_block = (chunk_begin + i) * scale_per_chunk + 4 * half;
                int valid = okS ? w_scale_cols - first_block : 0;
                valid = std::clamp(valid, 0, 4);
                const std::uint8_t* src =
                    p.w_scales + static_cast<std::size_t>(okS ? nS : 0) * w_scale_cols + (valid > 0 ? first_block : 0);
                copy(st + SL::stage_code_bytes + r_s * 8 + 4 * half, src, 4, valid);
                (void)scale_vec;  // the byte-wise path stores the same bytes
              }
            };
            for (int i = 0; i < std::min(stages - 1, nchunks); ++i) issue(i);
            for (int i = 0; i < nchunks; ++i) {
              // ring_read(i) for all lanes, then the stage is refilled with chunk i + stages - 1
              u4 q[32][2];
              std::uint32_t sc[32][2];
              const std::uint8_t* st = ring.data() + (i % stages) * SL::stage_bytes;
              for (int lane = 0; lane < 32; ++lane) {
                const int g = lane / 4, t = lane % 4;
                for (int rr = 0; rr < 2; ++rr) {
                  const std::uint8_t* c = st + lane * 32 + rr * 16;
                  q[lane][rr] = u4{detail::load32(c), detail::load32(c + 4), detail::load32(c + 8), detail::load32(c + 12)};
                  const std::uint8_t* ss = st + SL::stage_code_bytes + (g + 8 * rr) * 8;
                  sc[lane][rr] = WB == 16 ? static_cast<std::uint32_t>(ss[2 * t] | (ss[2 * t + 1] << 8))
                                          : static_cast<std::uint32_t>(ss[t]);
                }
              }
              if (i + stages - 1 < nchunks) issue(i + stages - 1);
              const int first = buf_index(i);
              for (int w = 0; w < DL::words_per_lane; ++w) {
                const int b = (w * 8) / WB;
                std::uint32_t ag[32][4], ag8[32][4];
                for (int lane = 0; lane < 32; ++lane) {
                  WL::dequant_word(q[lane][0].word(w), WL::multiplier2(static_cast<std::uint8_t>(sc[lane][0] >> (8 * b))), ag[lane]);
                  WL::dequant_word(q[lane][1].word(w), WL::multiplier2(static_cast<std::uint8_t>(sc[lane][1] >> (8 * b))), ag8[lane]);
                }
                for (int j = 0; j < nt; ++j)
                  for (int h = 0; h < 2; ++h) {
                    std::uint32_t A[32][4], B[32][2], BR[32][2];
                    for (int lane = 0; lane < 32; ++lane) {
                      A[lane][0] = ag[lane][2 * h];
                      A[lane][1] = ag8[lane][2 * h];
                      A[lane][2] = ag[lane][2 * h + 1];
                      A[lane][3] = ag8[lane][2 * h + 1];
                      const int slot = first + (j * DL::words_per_lane + w) * 32 + lane;
                      const u4 bv = act[static_cast<std::size_t>(slot)];
                      const u4 br = res[static_cast<std::size_t>(slot)];
                      B[lane][0] = bv.word(2 * h);
                      B[lane][1] = bv.word(2 * h + 1);
                      BR[lane][0] = br.word(2 * h);
                      BR[lane][1] = br.word(2 * h + 1);
                    }
                    detail::mma_emulated<Lane>(acc[j], A, B);
                    if (p.kind == act_kind::rac && !rac_cols && flag[static_cast<std::size_t>(i)])
                      detail::mma_emulated<Lane>(acc_r[j], A, BR);
                  }
              }
            }
          }
          // C fragments -> cw[m * 16 + n] (residual at + 256)
          float* cw = ctile.data() + (static_cast<std::size_t>(split) * SL::warps + warp) * 512;
          for (int j = 0; j < 2; ++j)
            for (int row = 0; row < 16; ++row)
              for (int col = 0; col < 8; ++col) {
                const int m = 8 * j + col;
                cw[m * 16 + row] = static_cast<float>(std::ldexp(acc[j][row][col], fold));
                cw[256 + m * 16 + row] = static_cast<float>(std::ldexp(acc_r[j][row][col], fold));
              }
        }
      }
      // cluster reduction in split order, per output element of the tile
      for (int m = 0; m < tokens; ++m)
        for (int nl = 0; nl < SL::rows_per_cta; ++nl) {
          const int col = n_cta + nl;
          if (col >= N) continue;
          float v = 0.0f, vr = 0.0f;
          const int r_at = rac_cols ? (m + 4) * 16 : 256 + m * 16;  // residual column or C tile
          for (int q = 0; q < splits; ++q) {
            const float* base = ctile.data() + (static_cast<std::size_t>(q) * SL::warps + nl / 16) * 512;
            v = q == 0 ? base[m * 16 + nl % 16] : v + base[m * 16 + nl % 16];
            vr = q == 0 ? base[r_at + nl % 16] : vr + base[r_at + nl % 16];
          }
          if (p.kind == act_kind::rac && !p.own) v = v + vr;  // shared scale: residual joins
          const std::size_t o = static_cast<std::size_t>(m0 + m) * N + col;
          r.acc[o] = v;
          if (p.own) r.acc_r[o] = vr;
        }
    }
  return r;
}

} // namespace quads_gemm_test
