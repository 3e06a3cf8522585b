// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The decode GEMM's tiling and fragment maps (host + device) and its launch plan
//!        (split-K, workspace size; host).
//!
//! Overview (docs/gemm.md, "Decode kernels"). `y[M, N] = A[M, K] . W[N, K]^T` with the weights on
//! the MMA's M side and the tokens on its N side (`mma.sync.m16n8k16`, fp32 accumulation):
//! - a CTA has 4 warps; warp `v` owns weight rows `n0 = 64 * blockIdx.x + 16 * v .. + 16`; the CTA
//!   owns tokens `16 * blockIdx.y .. + 16` (two n8 tiles) and K chunks of split `blockIdx.z`;
//! - a K chunk is 128 values. In a chunk, lane (g = lane / 4, t = lane % 4) loads 16 bytes of
//!   weight rows `n0 + g` and `n0 + g + 8`: the 32 codes at k = 32 t .. 32 t + 31, i.e. 4 words
//!   of 8 codes (`word_k`). Word w gives 4 pairs (codes i, i + 4: `unpack_word`); MMA step
//!   (w, h) takes pairs 2h (MMA columns 2t, 2t+1) and 2h+1 (MMA columns 2t+8, 2t+9) of both rows.
//!   So the MMA's k index kk maps to the logical k `word_k(chunk, t, w) + pair_k(kk)`: a
//!   permutation inside the chunk, applied identically to both operands;
//! - the activation tile of a chunk is staged in shared memory already in fragment order: slot
//!   `act_slot(chunk, j, w, lane)` (16 bytes) holds the 4 pairs of token `8 j + g` at the octet
//!   `word_k(chunk, t, w) .. + 8`, so each B fragment is one conflict-free 16-byte load;
//! - split-K: each split owns `chunks_per_split` consecutive chunks and writes its fp32 partial
//!   sums (multiplied by 2^fold, exact) to a workspace; an epilogue pass sums the partials in
//!   split order (`reduction::deterministic`) or the splits `atomicAdd` into one zeroed buffer
//!   (`reduction::atomic`: fewer bytes, summation order depends on scheduling), then runs the
//!   epilogue chain on fragments of consecutive columns.
#pragma once

#include <quads/config.hpp>

#include <cuda/std/cstddef>
#include <cuda/std/cstdint>

namespace quads::gemm {

//! How split-K partial sums are combined.
enum class reduction : ::cuda::std::uint8_t {
  deterministic,  //!< partials per split in the workspace, summed in split order (default)
  atomic,         //!< fp32 atomicAdd into one zeroed buffer; order depends on scheduling
};

//! Compile-time tiling of the decode mainloop (see the file comment).
struct decode_layout {
  static constexpr int warps = 4;
  static constexpr int threads = 32 * warps;
  static constexpr int rows_per_warp = 16;               //!< MMA M: weight rows
  static constexpr int rows_per_cta = rows_per_warp * warps;
  static constexpr int tokens_per_cta = 16;              //!< two MMA n8 tiles
  static constexpr int chunk_k = 128;                    //!< K per chunk
  static constexpr int words_per_lane = 4;               //!< 4 words of 8 codes per row/chunk
  static constexpr int slab_chunks = 4;                  //!< chunks staged per shared-memory pass
  //! 16-byte slots of one staged slab (per operand: activation, and the RAC residual).
  static constexpr int slab_slots = slab_chunks * 2 * words_per_lane * 32;

  //! First logical k of word w of lane-group position t in chunk `chunk`.
  QUADS_API static constexpr int word_k(int chunk, int t, int w) noexcept {
    return chunk * chunk_k + 32 * t + 8 * w;
  }
  //! Offset inside the word's octet of MMA column kk of step h (pairs 2h / 2h+1, lanes lo/hi).
  QUADS_API static constexpr int pair_k(int h, int kk) noexcept {
    // kk in {2t, 2t+1, 2t+8, 2t+9} -> pair (2h + (kk >= 8)), lane (kk & 1)
    const int pair = 2 * h + (kk >= 8 ? 1 : 0);
    return pair + ((kk & 1) ? 4 : 0);
  }
  //! Shared-memory slot (16-byte units) of chunk `c` (slab-local), n8 tile j, word w, lane.
  QUADS_API static constexpr int act_slot(int c, int j, int w, int lane) noexcept {
    return ((c * 2 + j) * words_per_lane + w) * 32 + lane;
  }
  //! The slot a staging unit (token `n` of the tile, octet `o` of slab-local chunk `c`) fills.
  QUADS_API static constexpr int stage_slot(int c, int n, int o) noexcept {
    return act_slot(c, n / 8, o % 4, (n % 8) * 4 + o / 4);
  }
};

//! Compile-time tiling of the dense decode kernel (`decode_gemm`, the "streaming" mainloop):
//! the fragment maps of `decode_layout` (word_k, act_slot, stage_slot), but 8 warps (128 weight
//! rows) per CTA, each warp streaming its 16 rows through a private `stages`-deep cp.async ring
//! in shared memory (no CTA barrier per chunk), activations staged per slab of `slab_chunks(nt)`
//! chunks in two alternating buffers (one barrier per slab), and split-K across the CTAs of a
//! thread-block cluster (at most `max_splits`), reduced through distributed shared memory in
//! split order, followed by the epilogue in the same kernel.
struct stream_layout {
  static constexpr int warps = 8;
  static constexpr int threads = 32 * warps;
  static constexpr int rows_per_warp = 16;
  static constexpr int rows_per_cta = rows_per_warp * warps;
  static constexpr int tokens_per_cta = 16;
  //! RAC with at most this many tokens in a tile: the residual of token n is staged as MMA column
  //! n + rac_col_tokens of the tile's n8 token tile (no residual buffer, one MMA per step).
  static constexpr int rac_col_tokens = 4;
  //! Dense RAC calls of 5-8 tokens: the residual of token n is staged as column n of the second
  //! n8 tile (no residual buffer; the MMAs of a 16-token call).
  static constexpr int rac_tile_tokens = 8;
  //! Tokens a call (or grouped m-tile) with `ntiles` n8 token tiles may hold and still stage its
  //! RAC residuals in spare MMA columns (one tile: 4; two tiles: 8); more tokens take a residual
  //! buffer. The launchers and the kernel read the placement from here only.
  QUADS_API static constexpr int rac_col_capacity(int ntiles) noexcept {
    return ntiles == 2 ? rac_tile_tokens : rac_col_tokens;
  }
  //! Whether a streaming-kernel instantiation stages RAC residuals in a residual buffer (a second
  //! MMA per step) rather than in spare MMA columns: RAC operands without the `ResidualColumns`
  //! form, in two token tiles or in a grouped launch. The kernel's compile-time placement and both
  //! launchers' shared-memory sizes read it from here.
  QUADS_API static constexpr bool residual_buffer(bool rac, bool residual_columns, int ntiles,
                                                  bool grouped) noexcept {
    return rac && !residual_columns && (ntiles == 2 || grouped);
  }
  //! n8 token tiles of a dense streaming call or grouped m-tile of `rows` <= 16 tokens: one while
  //! its tokens (and, with `rac`, its RAC residual columns) fit one tile, else two. RAC with 5-8
  //! rows takes the second tile for its residuals; 9-16 rows take a residual buffer.
  QUADS_API static constexpr int token_tiles(int rows, bool rac = false) noexcept {
    return rows > 8 || (rac && rows > rac_col_capacity(1)) ? 2 : 1;
  }
  static constexpr int chunk_k = decode_layout::chunk_k;
  //! Chunks per activation slab in slab mode with `ntiles` n8 token tiles: 8 with one tile (the
  //! two buffers take 32 KB, one CTA barrier per 8 chunks), 4 with two (16 KB each, twice that
  //! with a RAC residual buffer, so that two CTAs fit an SM).
  QUADS_API static constexpr int slab_chunks(int ntiles) noexcept { return ntiles == 1 ? 8 : 4; }
  static constexpr int stages = 3;  // ring3 beat 4 and 5 (and 6) in the 23:58 UTC H200 bench
  static constexpr int max_splits = 8;          //!< portable cluster size
  static constexpr int default_max_splits = 4;  //!< plan_decode's cap (clusters pack into GPCs)
  static constexpr int max_resident_chunks = 64;
  //! Dynamic shared memory asked for one CTA at most: the 227 KB opt-in limit less 1 KB for the
  //! kernel's static shared memory (the limit counts both; the H200 refused 227 KB + 256 B).
  static constexpr int max_smem_bytes = 226 * 1024;
  static constexpr int two_per_sm_bytes = 112 * 1024;  //!< at most this for two CTAs per SM
  //! Bytes of one ring stage of one warp: 32 lanes x 2 rows x 16 code bytes, 16 rows x 8 scale
  //! bytes.
  static constexpr int stage_code_bytes = 32 * 2 * 16;
  static constexpr int stage_bytes = stage_code_bytes + 16 * 8;
  static constexpr int ring_bytes = warps * stages * stage_bytes;
  //! Bytes of one activation slab buffer with `ntiles` n8 tiles.
  QUADS_API static constexpr int slab_bytes(int ntiles) noexcept {
    return slab_chunks(ntiles) * ntiles * decode_layout::words_per_lane * 32 * 16;
  }
  //! Dynamic shared memory of one CTA: two slab buffers (twice with RAC) and the rings.
  QUADS_API static constexpr int smem_bytes(int ntiles, bool rac, int ring_stages = stages) noexcept {
    return 2 * slab_bytes(ntiles) * (rac ? 2 : 1) + warps * ring_stages * stage_bytes;
  }
  //! Dynamic shared memory with the activations of `chunks` chunks resident (one buffer).
  QUADS_API static constexpr int resident_bytes(int ntiles, bool rac, int chunks,
                                                int ring_stages = stages) noexcept {
    return chunks * ntiles * decode_layout::words_per_lane * 32 * 16 * (rac ? 2 : 1) +
           warps * ring_stages * stage_bytes;
  }
  //! Slot (16-byte units) in a slab buffer with `ntiles` tiles: chunk c, tile j, word w, lane.
  QUADS_API static constexpr int act_slot(int ntiles, int c, int j, int w, int lane) noexcept {
    return ((c * ntiles + j) * decode_layout::words_per_lane + w) * 32 + lane;
  }
  //! The slot a staging unit (token n of the tile, octet o of slab-local chunk c) fills.
  QUADS_API static constexpr int stage_slot(int ntiles, int c, int n, int o) noexcept {
    return act_slot(ntiles, c, n / 8, o % 4, (n % 8) * 4 + o / 4);
  }

  // Split-K reduction (push form): output fragment f of a CTA tile (token m, columns of width W:
  // f = m * rows_per_cta / W + column / W) belongs to split `f % splits` at local index
  // `f / splits`; every split stores its partial of f into the owner's receive area, slot
  // (which, source split, local index), W floats each; `which` 1 is the RAC residual.
  //! Local fragments per split (the same for every split of a cluster).
  QUADS_API static constexpr int reduce_locals(int W, int splits) noexcept {
    return (tokens_per_cta * (rows_per_cta / W) + splits - 1) / splits;
  }
  //! First float of the receive slot (which, source split `src`, local index `lf`).
  QUADS_API static constexpr int reduce_slot(int W, int splits, int which, int src, int lf) noexcept {
    return ((which * splits + src) * reduce_locals(W, splits) + lf) * W;
  }
  //! Floats of the receive area, for `which_count` accumulators (at most, over 1..max_splits).
  QUADS_API static constexpr int reduce_floats(int W, int which_count) noexcept {
    return which_count * (tokens_per_cta * (rows_per_cta / W) + max_splits) * W;
  }
};

//! Compile-time tuning of the streaming kernel: ring stages per warp and the minimum resident
//! CTAs per SM asked of the register allocator (`__launch_bounds__`). The default is what
//! `decode_gemm` uses unless a tuning is named explicitly (the benchmark compares some).
//! `FixedTiles`: the number of n8 token tiles, a template parameter of the kernel (0: chosen by
//! the launcher from M, 1 for M <= 8 and 2 above, RAC operands 1 for M <= 4 and 2 above; 1 or 2:
//! the call must have that M). Experimental knob (the benchmark runs it as a variant): `DualAcc` accumulates even and
//! odd words of a chunk in two accumulator sets (shorter MMA dependency chains; a different fp32
//! summation order, within the same error bound).
template <int Stages = stream_layout::stages, int MinBlocks = 2, int FixedTiles = 0,
          bool DualAcc = false>
struct stream_tuning {
  static_assert(Stages >= 2, "quads: the ring needs at least two stages");
  static_assert(FixedTiles >= 0 && FixedTiles <= 2, "quads: FixedTiles is 0, 1 or 2");
  static constexpr int stages = Stages;
  static constexpr int min_blocks = MinBlocks;
  static constexpr int fixed_tiles = FixedTiles;
  static constexpr bool dual_acc = DualAcc;
};

//! How to run one decode GEMM: split-K factor and workspace size (host side).
struct decode_plan {
  int M = 0;
  int N = 0;
  int K = 0;
  int splits = 1;
  int chunks = 0;            //!< ceil(K / chunk_k)
  int chunks_per_split = 0;
  reduction mode = reduction::deterministic;
  bool residual = false;     //!< a second accumulator (RAC composition (b), `own` scale)
  ::cuda::std::size_t workspace_bytes = 0;

  //! Floats between split partials (deterministic) in the workspace.
  constexpr ::cuda::std::size_t partial_floats() const noexcept {
    return static_cast<::cuda::std::size_t>(M) * static_cast<::cuda::std::size_t>(N);
  }
  //! Partials the workspace holds per accumulator: `splits` (deterministic) or 1 (atomic).
  constexpr int stored_partials() const noexcept {
    return mode == reduction::deterministic ? splits : 1;
  }
  //! Offset (floats) of the residual accumulator's region.
  constexpr ::cuda::std::size_t residual_offset() const noexcept {
    return partial_floats() * static_cast<::cuda::std::size_t>(stored_partials());
  }
};

//! Options of `plan_decode`. `splits = 0` picks one: the fewest that put a CTA of
//! `stream_layout` on at least 90 % of the SMs, at most `stream_layout::default_max_splits`
//! (small clusters pack into the GPCs; explicit splits up to `max_splits` run as clusters too,
//! more on the fallback path), each split keeping at least 4 chunks (512 values of K).
struct decode_options {
  int splits = 0;
  reduction mode = reduction::deterministic;
};

//! The plan for `y[M, N] = A[M, K] W[N, K]^T` on a GPU with `sm_count` SMs. Shapes are not
//! checked here (the launcher does); non-positive sizes give an empty plan (`chunks = 0`).
constexpr decode_plan plan_decode(int M, int N, int K, bool residual, decode_options opt = {},
                                  int sm_count = 132) noexcept {
  decode_plan p;
  p.M = M;
  p.N = N;
  p.K = K;
  p.mode = opt.mode;
  p.residual = residual;
  if (M <= 0 || N <= 0 || K <= 0) return p;
  using L = decode_layout;
  p.chunks = (K + L::chunk_k - 1) / L::chunk_k;
  using S = stream_layout;
  const long tiles = static_cast<long>((N + S::rows_per_cta - 1) / S::rows_per_cta) *
                     ((M + S::tokens_per_cta - 1) / S::tokens_per_cta);
  int splits = opt.splits;
  if (splits <= 0) {
    // the fewest splits that give ~one CTA per SM (>= 90 % of the SMs busy): more splits cost
    // more per-CTA prologue/epilogue than they win in parallelism (H200, 02:36 UTC: 8192x8192
    // at 2 splits 33 us, at 4 splits 42 us; 14336x4096 at 1 split 32 us, at 2 splits 28 us)
    const long sms = sm_count > 0 ? sm_count : 1;
    const long want = (9L * sms + 10L * tiles - 1) / (10L * tiles);
    int cap = p.chunks / 4 > 1 ? p.chunks / 4 : 1;
    if (cap > S::default_max_splits) cap = S::default_max_splits;
    splits = want < 1 ? 1 : (want > cap ? cap : static_cast<int>(want));
  }
  if (splits > p.chunks) splits = p.chunks;
  p.chunks_per_split = (p.chunks + splits - 1) / splits;
  p.splits = (p.chunks + p.chunks_per_split - 1) / p.chunks_per_split;  // no empty split
  const ::cuda::std::size_t per = p.partial_floats() * static_cast<::cuda::std::size_t>(p.stored_partials());
  p.workspace_bytes = per * (residual ? 2u : 1u) * sizeof(float);
  return p;
}

} // namespace quads::gemm
