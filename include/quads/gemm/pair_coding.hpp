// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Pair-coded NVFP4 weights (host + device): an offline, word-local re-coding of the
//!        packed E2M1 codes that the decode GEMM dequantizes to fp16 in 2 integer instructions
//!        per lane pair instead of ~4, and block scales converted by `cvt.f16x2.e4m3x2`.
//!
//! Why. The decode GEMM is issue-bound, not memory-bound (docs/history/gemm.md, "Where the time
//! goes"): the plain loader (`fp4_loader`, dequant.hpp) spends ~15 integer instructions and 4
//! `HMUL2` per word of 8 codes, plus ~5 per block scale. A pair of fp16 lanes needs the bits
//! `S E1 E0 M` of two codes at the positions `M_lane = {15, 11, 10, 9}` of each half
//! (`e2m1 * 2^-14` exactly, see dequant.hpp); no placement of 4 such pairs in one word lets a
//! single rotate + mask extract every pair (a search over all rotations shows the bit pattern
//! cannot tile a word), so the plain layout pays a shift and an and-or per field.
//!
//! What. Pair `i` of a word is decoded as `pair_mask & (rotl(q, a_i) ^ rotl(q, b_i))` with the
//! rotation pairs of `pair_rotations` (one `SHF` + one `LOP3` per pair, one of them a single
//! rotation: 8 integer instructions per word). That map is linear over GF(2) and invertible
//! (checked at compile time), so every word of plain codes has exactly one pair-coded word:
//! `encode_word` applies the inverse, offline (host `encode_pair_coded`, or the device kernel
//! in `pair_coding.cuh`). Only the 32 bits inside each word change: rows, the scale bytes and
//! their layout stay as they are, so any plain NVFP4 weight (a `quantized_tensor`, the quantize
//! kernels' output, an expert stack) becomes pair-coded in one pass and decodes to the same
//! values. The pairs come out as `unpack_word` makes them (codes (i, i + 4) in (low, high)
//! lanes), so the activation side of the GEMM is unchanged.
//!
//! Lane values: pair lanes hold `e2m1 * 2^-14`; the multiplier is the block scale itself
//! (`cvt.rn.f16x2.e4m3x2`, exact: every UE4M3 value is an fp16), so the product is
//! `e2m1 * s * 2^-14`, a multiple of 2^-24 below 2^-2: exact in fp16 (subnormals included; the
//! fp16 MMA consumes subnormals, which the plain fp16 path already relies on). The GEMM folds
//! 2^14 into its final multiply. fp16 lanes and NVFP4 (UE4M3) only: bf16 lanes would need a
//! different pattern and MXFP4's UE8M0 scales do not fit fp16.
#pragma once

#include <quads/config.hpp>

#include <quads/detail/float_bits.hpp>
#include <quads/format/e4m3.hpp>
#include <quads/gemm/dequant.hpp>
#include <quads/scheme/schemes.hpp>

#include <cuda/std/cstdint>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>

namespace quads::gemm {

//! A block-scaled format whose packed codes are pair-coded (this file). As a weight format of
//! the decode GEMM it selects `pair_coded_loader`; everything else (block size, scales, tensor
//! scale) is the base format's.
template <block_scaled_format Base>
struct pair_coded : Base {
  static_assert(is_two_level<Base>,
                "quads: pair coding is for NVFP4 weights (UE4M3 block scales); MXFP4's UE8M0 "
                "scales do not fit the fp16 lanes it decodes to");
  using base_format = Base;
};

template <class F>
inline constexpr bool is_pair_coded = false;
template <class B>
inline constexpr bool is_pair_coded<pair_coded<B>> = true;

//! The format of the values behind a weight format (`Base` for `pair_coded<Base>`).
template <class F>
struct value_format {
  using type = F;
};
template <class B>
struct value_format<pair_coded<B>> {
  using type = B;
};
template <class F>
using value_format_t = typename value_format<F>::type;

namespace pair_coding {

using word = ::cuda::std::uint32_t;

//! Bits of a pair of fp16 lanes that carry a code: sign 15, E1 E0 M at 11..9 (and +16).
inline constexpr word pair_mask = 0x8E008E00u;
//! Rotations (left) of the decoder: pair i = pair_mask & (rotl(q, a) ^ rotl(q, b)); b < 0 means
//! the single rotation rotl(q, a). Found by exhaustive search over up to four distinct rotations
//! (none with three exists); `inverse_table` below proves invertibility at compile time.
inline constexpr int pair_rotations[4][2] = {{2, -1}, {0, 6}, {0, 9}, {0, 13}};

QUADS_API constexpr word rotl(word x, int r) noexcept {
  r &= 31;
  return r == 0 ? x : static_cast<word>((x << r) | (x >> (32 - r)));
}

//! The decoder's pair i of a coded word (what the GEMM computes, see `decode_word`).
template <int I>
QUADS_API constexpr word decode_pair(word q) noexcept {
  static_assert(I >= 0 && I < 4);
  constexpr int a = pair_rotations[I][0], b = pair_rotations[I][1];
  if constexpr (b < 0) return pair_mask & rotl(q, a);
  else return pair_mask & (rotl(q, a) ^ rotl(q, b));
}

//! The 4 fp16 lane pairs of a coded word: pair i holds codes (i, i + 4) as (low, high) lanes,
//! value `e2m1 * 2^-14`, as `unpack_word<fp16_lane>` returns them from the plain word.
QUADS_API constexpr void decode_word(word q, word (&p)[4]) noexcept {
  p[0] = decode_pair<0>(q);
  p[1] = decode_pair<1>(q);
  p[2] = decode_pair<2>(q);
  p[3] = decode_pair<3>(q);
}

namespace detail {

//! Code-carrying bit j (0..7) of a lane pair: 9, 10, 11, 15, 25, 26, 27, 31 (a function, not
//! an array, so device code can use it).
QUADS_API constexpr int pattern(int j) noexcept {
  return (j % 4 == 3 ? 15 : 9 + j % 4) + 16 * (j / 4);
}

//! Compresses the decoder's 4 pairs into one 32-bit vector (pair i -> bits 8i .. 8i + 7).
QUADS_API constexpr word gather(const word (&p)[4]) noexcept {
  word v = 0;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) v |= ((p[i] >> pattern(j)) & 1u) << (8 * i + j);
  return v;
}

//! The decoder as a linear map q -> gather(decode_word(q)).
QUADS_API constexpr word forward(word q) noexcept {
  word p[4]{};
  decode_word(q, p);
  return gather(p);
}

struct inverse {
  word column[32]{};  //!< column[j] = the coded word whose compressed decode is bit j alone
  bool invertible = false;
};

//! Gauss-Jordan over GF(2) on the forward map's 32 images of the unit words.
consteval inverse make_inverse() {
  word rows[32]{};  // rows[j]: forward-image bits; aug[j]: which unit words were combined
  word aug[32]{};
  for (int j = 0; j < 32; ++j) {
    rows[j] = forward(word{1} << j);
    aug[j] = word{1} << j;
  }
  inverse inv;
  // find, for every output bit b, a combination of inputs whose image is exactly bit b
  for (int b = 0; b < 32; ++b) {
    int piv = -1;
    for (int j = b; j < 32; ++j)
      if ((rows[j] >> b) & 1u) {
        piv = j;
        break;
      }
    if (piv < 0) return inv;
    const word tr = rows[piv], ta = aug[piv];
    rows[piv] = rows[b];
    aug[piv] = aug[b];
    rows[b] = tr;
    aug[b] = ta;
    for (int j = 0; j < 32; ++j)
      if (j != b && ((rows[j] >> b) & 1u)) {
        rows[j] ^= rows[b];
        aug[j] ^= aug[b];
      }
  }
  for (int b = 0; b < 32; ++b) inv.column[b] = aug[b];  // rows[b] == 1 << b now
  inv.invertible = true;
  return inv;
}

} // namespace detail

//! The inverse of the decoder (host constant; device code receives it as a kernel argument).
inline constexpr detail::inverse inverse_table = detail::make_inverse();
static_assert(inverse_table.invertible,
              "quads: the pair-coding rotations do not give an invertible map");

//! The compressed target of a plain word of 8 codes (code j in bits 4j .. 4j + 3): what the
//! decoder must produce, i.e. `gather` of `unpack_word<fp16_lane>(plain)`.
QUADS_API constexpr word target_of(word plain) noexcept {
  word p[4]{};
  unpack_word<fp16_lane>(plain, p);
  return detail::gather(p);
}

//! The pair-coded word that decodes to the same pairs as the plain word `plain`, given the
//! inverse table (`inverse_table`; device code gets a copy as a kernel argument).
QUADS_API constexpr word encode_word(word plain, const detail::inverse& inv) noexcept {
  const word t = target_of(plain);
  word q = 0;
  for (int b = 0; b < 32; ++b)
    if ((t >> b) & 1u) q ^= inv.column[b];
  return q;
}
//! The same with the host's table.
constexpr word encode_word(word plain) noexcept { return encode_word(plain, inverse_table); }

//! The plain word a coded word decodes to (the inverse of `encode_word`; tests and export).
QUADS_API constexpr word decode_to_plain(word q) noexcept {
  word p[4]{};
  decode_word(q, p);
  word plain = 0;
  for (int i = 0; i < 4; ++i) {
    const word lo = p[i] & 0xffffu, hi = p[i] >> 16;
    const word c_lo = ((lo >> 9) & 7u) | ((lo >> 12) & 8u);
    const word c_hi = ((hi >> 9) & 7u) | ((hi >> 12) & 8u);
    plain |= (c_lo << (4 * i)) | (c_hi << (4 * (i + 4)));
  }
  return plain;
}

} // namespace pair_coding

namespace pair_coding::detail {

//! out word i = f(in word i) over little-endian 32-bit words (host), with the size checks of
//! `encode_pair_coded`; `what` names the caller in the error.
template <class F>
void map_words(std::span<const std::uint8_t> in, std::span<std::uint8_t> out, F f,
               const char* what) {
  if (in.size() != out.size() || in.size() % 4 != 0)
    throw std::invalid_argument(what);
  for (std::size_t i = 0; i < in.size(); i += 4) {
    std::uint32_t w;
    std::memcpy(&w, in.data() + i, 4);
    w = f(w);
    std::memcpy(out.data() + i, &w, 4);
  }
}

} // namespace pair_coding::detail

//! Pair-codes packed NVFP4 codes on the host: `coded` word i = `encode_word(plain word i)`
//! (little-endian 32-bit words, i.e. 8 codes of one row: rows are K / 2 bytes and K is a
//! multiple of 16). Any packed tensor works: a matrix, an expert stack, a slice; the scales are
//! not touched. `plain` and `coded` may be the same memory. Throws `std::invalid_argument` if
//! the sizes differ or are not a multiple of 4 bytes.
inline void encode_pair_coded(std::span<const std::uint8_t> plain, std::span<std::uint8_t> coded) {
  pair_coding::detail::map_words(
      plain, coded, [](std::uint32_t w) { return pair_coding::encode_word(w); },
      "quads: encode_pair_coded needs equal sizes that are a multiple of 4 bytes");
}

//! The inverse of `encode_pair_coded` (back to plain packed codes), same contract.
inline void decode_pair_coded(std::span<const std::uint8_t> coded, std::span<std::uint8_t> plain) {
  pair_coding::detail::map_words(
      coded, plain, [](std::uint32_t w) { return pair_coding::decode_to_plain(w); },
      "quads: decode_pair_coded needs equal sizes that are a multiple of 4 bytes");
}

//! The operand loader of pair-coded NVFP4 weights (fp16 lanes): the interface of `fp4_loader`
//! (`fold_log2`, `multiplier2`, `dequant_word`, `dequant_one`).
template <block_scaled_format Format>
  requires is_pair_coded<Format>
struct pair_coded_loader {
  using format = Format;
  using lane = fp16_lane;
  static constexpr int block_size = Format::block_size;
  static constexpr int fold_log2 = 14;

  //! fp16 bits of the block scale itself (exact).
  QUADS_API static constexpr ::cuda::std::uint16_t multiplier(::cuda::std::uint8_t byte) noexcept {
    // UE4M3 read as fp16 bits `byte << 7` is s * 2^-8; s has <= 4 significant bits and lies in
    // [2^-9, 448], a normal fp16, so s = (s * 2^-8) * 2^8 is exact in float and in fp16.
    return ::quads::gemm::detail::float_to_lane<fp16_lane>(
        ::quads::detail::mul_rn(::quads::gemm::detail::ue4m3_times_2_pow_minus_8(byte), 256.0f));
  }
  //! Both lanes set to the block scale (one `cvt.rn.f16x2.e4m3x2` on sm_89+).
  QUADS_API static ::cuda::std::uint32_t multiplier2(::cuda::std::uint8_t byte) noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    const ::cuda::std::uint16_t two = static_cast<::cuda::std::uint16_t>((byte & 0x7fu) * 0x0101u);
    ::cuda::std::uint32_t d;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(two));
    return d;
#else
    const ::cuda::std::uint32_t m = multiplier(byte);
    return m | (m << 16);
#endif
  }
  //! The 4 dequantized pairs of a coded word, lanes `e2m1 * s * 2^-14`.
  QUADS_API static void dequant_word(::cuda::std::uint32_t q, ::cuda::std::uint32_t m2,
                                     ::cuda::std::uint32_t (&out)[4]) noexcept {
    ::cuda::std::uint32_t p[4];
    pair_coding::decode_word(q, p);
    for (int i = 0; i < 4; ++i) out[i] = ::quads::gemm::detail::mul_lanes<fp16_lane>(p[i], m2);
  }
  //! The value one plain code dequantizes to through the coded path (as float).
  QUADS_API static float dequant_one(::cuda::std::uint8_t code, ::cuda::std::uint8_t byte) noexcept {
    const ::cuda::std::uint32_t d = ::quads::gemm::detail::mul_lanes<fp16_lane>(
        e2m1_lane<fp16_lane>(code), multiplier(byte));
    return ::quads::gemm::detail::lane_to_float<fp16_lane>(
        static_cast<::cuda::std::uint16_t>(d & 0xffffu));
  }
};

//! The operand loader of a weight format in the GEMM kernels: `fp4_loader` for plain codes,
//! `pair_coded_loader` (fp16 lanes only) for pair-coded ones.
template <class Format, mma_lane Lane>
struct weight_loader {
  using type = fp4_loader<Format, Lane>;
};
template <block_scaled_format Base, mma_lane Lane>
struct weight_loader<pair_coded<Base>, Lane> {
  static_assert(std::same_as<Lane, fp16_lane>,
                "quads: pair-coded weights dequantize to fp16 lanes; use fp16_lane (and fp16 "
                "activations for W4A16)");
  using type = pair_coded_loader<pair_coded<Base>>;
};
template <class Format, mma_lane Lane>
using weight_loader_t = typename weight_loader<Format, Lane>::type;

} // namespace quads::gemm
