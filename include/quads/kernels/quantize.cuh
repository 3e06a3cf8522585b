// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GPU quantize and one-pass QDQ (fake-quant) of `[rows, K]` tensors and `[E, N, K]` stacks.
//!
//! Every block goes through `Quantizer::quantize` (`Quantizer = block_quantizer<Format, Options>`,
//! the one QDQ path), so results are byte-identical to `quads::reference::quantize` for every
//! scheme and option the host reference supports; `scale_math::rcp_approx` runs here too (the
//! host cannot reproduce it). Stochastic rounding draws block `b`'s bits from
//! `philox4x32_10{seed}` at `b = (expert * rows + row) * (cols / block_size) + col_block`, as the
//! reference does.
//!
//! Kernels:
//! - block kernel (global scale given, per tensor, or none): a grid-stride loop in which each
//!   thread owns whole blocks (nvfp4 + bf16: 32 B in, two 16-byte loads; 8 B of codes out, one
//!   8-byte store; one scale byte), two blocks per iteration for more loads in flight (one when
//!   a block per thread fits in one wave: small calls); grid sized to what is resident on the
//!   device, experts on gridDim.y; QDQ always, quantize for small calls (<= 128 blocks per SM);
//! - pair kernel (quantize with nearest-even rounding and the amax -> 6 rule, 32-byte blocks,
//!   `cols / block_size` even, 16-byte aligned codes): the block kernel's work with each thread
//!   owning two consecutive blocks of a row, so one index split, one 16-byte code store and one
//!   2-byte scale store serve both (at 8192 x 8192 bf16 on the H200: 57.5 us against 75 us);
//! - the turbo path (NVFP4 default recipe with bf16 / fp16 input, see `turbo_blocks` and
//!   kernels/common.cuh) inside the block and pair kernels: packed NaN-propagating block amax,
//!   per-CTA multiplier table, sign nibbles by byte permutes, encoder sum read as codes, QDQ
//!   values without a decoder; the pair kernel's turbo loop advances by the grid stride without
//!   dividing (8192 x 8192 bf16 swizzled on the H200, 2026-11-30: 50.1 us, 81% of copy
//!   bandwidth, against 58.0 us; QDQ 76.1 us, 83%, against 87.3 us);
//! - half-block kernel (small MXFP4 calls from bf16 / fp16): two threads per 32-element block;
//! - row kernel (`global_scale::per_row`, and the fused producers): one CTA per row computes the
//!   row amax, then quantizes the row (the second read hits L1/L2);
//! - `global_scale::per_tensor` runs the amax kernel first (`amax_workspace`), and the quantize
//!   kernel turns the amax into the scale with `make_tensor_scale` (one code path).
//! The swizzled layout's padding bytes are written as zero by the same kernels.
#pragma once

#include <quads/kernels/amax.cuh>
#include <quads/kernels/common.cuh>

#include <quads/quant/random_bits.hpp>

#include <algorithm>

namespace quads::kernels {

namespace detail {

inline constexpr int block_threads = 256;

//! The per-expert tensor scale of the non-per-row modes.
template <class Quantizer>
struct scale_source {
  const tensor_scale* given = nullptr;
  int given_count = 0;
  const float* amax = nullptr; //!< per_tensor: amax of each expert
  tensor_scale* out = nullptr; //!< optional copy-out, one per expert

  QUADS_DEVICE_API tensor_scale get(int e) const {
    using F = typename Quantizer::format;
    constexpr quant_options O = Quantizer::options;
    if constexpr (!F::has_tensor_scale) {
      (void)e;
      return tensor_scale{};
    } else if constexpr (O.global == global_scale::given) {
      return given[given_count == 1 ? 0 : e];
    } else {
      return make_tensor_scale<F, O>(amax[e]);
    }
  }
};

//! One quantized block as 32-bit words of codes (element 8w + i in nibble i of word w, i.e. the
//! bytes of `packed_block::codes` in little-endian order) and the scale byte.
template <int B>
struct block_words {
  std::uint32_t w[B / 8];
  std::uint8_t scale;
};

//! The fast path applies to nearest-even rounding with the amax -> 6 rule (any format, any
//! scale math): block amax, then `Quantizer::scale_for` (the core's scale rule), then
//! the core's `encode_e2m1_not_nan` on `mul_rn(x, multiplier)`, which is `Quantizer::encode`
//! for every non-NaN value (when a scaled value is NaN, the core's `encode_e2m1` is used).
//! Stochastic rounding and four-over-six go through `Quantizer::quantize` itself.
template <class Quantizer>
inline constexpr bool fast_path_applies =
    Quantizer::options.round == rounding::nearest_even&& Quantizer::options.block_rule ==
    block_scale_rule::amax_to_6;

//! Quantizes `U` blocks in two phases so their latency chains overlap: scales of all blocks,
//! then the scaled values of all blocks, then one NaN test and the encoder for all of them
//! (`index[j]` is block j's global index, used by stochastic rounding). `v` is overwritten.
//! `Fast = false` forces `Quantizer::quantize` (for comparisons).
template <class Quantizer, int U, bool Fast = fast_path_applies<Quantizer>>
QUADS_DEVICE_API void quantize_blocks(float (&v)[U][Quantizer::block_size], tensor_scale ts,
                                      std::uint64_t seed, const std::uint64_t (&index)[U],
                                      block_words<Quantizer::block_size> (&out)[U]) {
  constexpr int B = Quantizer::block_size;
  if constexpr (Fast && fast_path_applies<Quantizer>) {
    (void)seed;
    (void)index;
    float m[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const block_scale sc = Quantizer::scale_for(block_amax(v[j]), ts);
      out[j].scale = sc.byte;
      m[j] = sc.multiplier;
    }
    float check = 0.0f;
#pragma unroll
    for (int j = 0; j < U; ++j) {
#pragma unroll
      for (int i = 0; i < B; ++i)
        v[j][i] = quads::detail::mul_rn(v[j][i], m[j]);
      check = __fadd_rn(check, tree_sum(v[j]));
    }
    if (check == check) {
#pragma unroll
      for (int j = 0; j < U; ++j)
#pragma unroll
        for (int w = 0; w < B / 8; ++w)
          out[j].w[w] = encode_e2m1x8_not_nan(reinterpret_cast<const float(&)[8]>(v[j][8 * w]));
    } else { // a NaN somewhere: the core encoder, which maps NaN to +6
#pragma unroll
      for (int j = 0; j < U; ++j)
#pragma unroll
        for (int w = 0; w < B / 8; ++w)
          out[j].w[w] = encode_e2m1x8(reinterpret_cast<const float(&)[8]>(v[j][8 * w]));
    }
  } else {
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const packed_block<typename Quantizer::format> pb =
          Quantizer::quantize(v[j], ts, Quantizer::bits_for(seed, index[j]));
      out[j].scale = pb.scale;
#pragma unroll
      for (int w = 0; w < B / 8; ++w)
        out[j].w[w] = static_cast<std::uint32_t>(pb.codes[4 * w]) |
                      (static_cast<std::uint32_t>(pb.codes[4 * w + 1]) << 8) |
                      (static_cast<std::uint32_t>(pb.codes[4 * w + 2]) << 16) |
                      (static_cast<std::uint32_t>(pb.codes[4 * w + 3]) << 24);
    }
  }
}

//! `quantize_blocks` of one block into `out` (`v` is kept).
template <class Quantizer>
QUADS_DEVICE_API void quantize_block(const float (&v)[Quantizer::block_size], tensor_scale ts,
                                     std::uint64_t seed, std::uint64_t index,
                                     block_words<Quantizer::block_size>& out) {
  constexpr int B = Quantizer::block_size;
  float w[1][B];
#pragma unroll
  for (int i = 0; i < B; ++i)
    w[0][i] = v[i];
  const std::uint64_t idx[1] = {index};
  block_words<B> q[1];
  quantize_blocks<Quantizer, 1>(w, ts, seed, idx, q);
  out = q[0];
}

//! Whether the turbo block path (kernels/common.cuh) applies to fp32 values
//! (`turbo_block_f32`): NVFP4-like two-level 16-element blocks, nearest-even, amax -> 6, IEEE
//! scale math.
template <class Quantizer>
// clang-format off
inline constexpr bool turbo_f32_applies =
    fast_path_applies<Quantizer> && is_two_level<typename Quantizer::format> &&
    Quantizer::options.math == scale_math::ieee_divide && Quantizer::block_size == 16;
// clang-format on

//! Whether the turbo path applies to raw `T` words (`turbo_blocks`): `turbo_f32_applies` and
//! bf16 / fp16 input.
template <class Quantizer, class T>
inline constexpr bool turbo_applies =
    turbo_f32_applies<Quantizer> &&
    (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>);

//! Per-CTA state of the turbo path for one tensor scale.
struct turbo_ctx {
  float k;           //!< `ts.encode * RN(1/6)`, the core's factor of the scale byte
  float td;          //!< `ts.decode`
  const float* mtab; //!< 128 multipliers by scale byte, then 128 multipliers / 8 (shared memory)
  bool ok;           //!< multipliers > 0, k finite > 0, ts.decode not NaN (else the generic path)
};

//! Floats of shared memory of a turbo table (`make_turbo_ctx`).
inline constexpr int turbo_table_floats = 256;

//! `scale_for`'s multiplier of UE4M3 byte `b` under a tensor scale whose decode factor is
//! `decode`, `rcp_rn_satfinite(decode_ue4m3(b) * decode)`, and the multiplier / 8 for the
//! saturating encoder (kernels/common.cuh), NaN where that is not exact (subnormal), which sends
//! such blocks to the unsaturated encoder.
QUADS_DEVICE_API void turbo_multipliers(std::uint8_t b, float decode, float& m, float& m8) {
  m = quads::detail::rcp_rn_satfinite(quads::detail::mul_rn(decode_ue4m3(b), decode));
  const float h = quads::detail::mul_rn(m, 0.125f);
  m8 = h >= 1.17549435e-38f ? h : __uint_as_float(0x7fc00000u);
}

//! The turbo path's factor of the scale byte, `ts.encode * RN(1/6)`, and whether `ts` admits the
//! turbo path at all: a NaN ts.decode, or a NaN scale byte (from k = 0, Inf or NaN), would make
//! values NaN, whose sign the sign-OR of QDQ would not match; such scales take the generic path.
QUADS_DEVICE_API float turbo_k(tensor_scale ts, bool& ok) {
  constexpr float inv6 = quads::detail::div_rn(1.0f, e2m1_max);
  const float k = quads::detail::mul_rn(ts.encode, inv6);
  ok = ts.decode == ts.decode && k > 0.0f && k <= quads::detail::flt_max;
  return k;
}

//! Fills the multiplier table (`tab`: `turbo_table_floats` floats of shared memory) with
//! `turbo_multipliers` of every UE4M3 byte (multipliers, then multipliers / 8). Every thread of
//! the CTA must call it (it synchronises).
template <class Quantizer>
QUADS_DEVICE_API turbo_ctx make_turbo_ctx(tensor_scale ts, float* tab) {
  bool good = true;
  for (int b = static_cast<int>(threadIdx.x); b < 128; b += static_cast<int>(blockDim.x)) {
    float m, m8;
    turbo_multipliers(static_cast<std::uint8_t>(b), ts.decode, m, m8);
    tab[b] = m;
    tab[128 + b] = m8;
    good = good && m > 0.0f;
  }
  bool k_ok;
  const float k = turbo_k(ts, k_ok);
  good = good && k_ok;
  const bool ok = __syncthreads_and(good) != 0;
  return {k, ts.decode, tab, ok};
}

//! The turbo path for `U` blocks of 16 elements of `T` (raw words): scale bytes and either the
//! code words (`Codes`) or the magnitudes of the dequantized values (`Values`; the value is
//! `Quantizer::decode` of the code, whose sign is x's since the multiplier, the scale and
//! `ts.decode` are positive: `put_values` narrows the magnitude and ORs in x's sign bit, which
//! equals the RNE cast of the signed value). Returns false (and writes nothing useful) when a
//! block holds a NaN; the caller then takes the generic path. Requires `c.ok`.
template <class Quantizer, class T, int U, bool Codes, bool Values, pack_mul P = pack_mul::constant>
QUADS_DEVICE_API bool turbo_blocks(const raw_block<T, 16> (&raw)[U], const turbo_ctx& c,
                                   block_words<16> (&q)[U], float (&vals)[U][16]) {
  using F = typename Quantizer::format;
  float amax[U];
  bool nan = false;
#pragma unroll
  for (int j = 0; j < U; ++j) {
    amax[j] = block_amax_nan16<T, 16>(raw[j]);
    nan = nan || amax[j] != amax[j];
  }
  if (nan) return false;
  float m[U], m8[U], sf[U];
  bool sat = true;
#pragma unroll
  for (int j = 0; j < U; ++j) {
    const std::uint8_t byte = encode_ue4m3(quads::detail::mul_rn(amax[j], c.k));
    q[j].scale = byte;
    m[j] = c.mtab[byte];
    m8[j] = c.mtab[128 + byte];
    // every |x| * m of the block below 7 (and m / 8 exact): the saturating encoder applies
    sat = sat && quads::detail::mul_rn(amax[j], m8[j]) < 0.875f;
    if constexpr (Values) sf[j] = F::decode_scale(byte);
  }
  if (sat) {
#pragma unroll
    for (int j = 0; j < U; ++j) {
      float v[16];
      widen(raw[j], v);
      float sf8 = 0.0f;
      if constexpr (Values) sf8 = quads::detail::mul_rn(sf[j], 8.0f); // exact
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        std::uint32_t bf[8];
        float sum[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          sat_encode(v[8 * w + i], m8[j], bf[i], sum[i]);
          if constexpr (Values) // (value / 8) * (8 * scale): the same product, one rounding
            vals[j][8 * w + i] =
                quads::detail::mul_rn(quads::detail::mul_rn(sat_value(bf[i], sum[i]), sf8), c.td);
        }
        if constexpr (Codes)
          q[j].w[w] = sat_pack<P>(bf, sum) |
                      sign_nibbles16(raw[j].w[w].x, raw[j].w[w].y, raw[j].w[w].z, raw[j].w[w].w);
      }
    }
    return true;
  }
#pragma unroll
  for (int j = 0; j < U; ++j) {
    float v[16];
    widen(raw[j], v);
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      std::uint32_t acc = 0;
      if constexpr (Codes)
        acc = sign_nibbles16(raw[j].w[w].x, raw[j].w[w].y, raw[j].w[w].z, raw[j].w[w].w) -
              e2m1_turbo_bias;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float s = quads::detail::mul_rn(v[8 * w + i], m[j]);
        if constexpr (Codes) acc += e2m1_turbo_t(s) << (4 * i);
        if constexpr (Values) // |value|: the sign is x's, ORed in by `put_values`
          vals[j][8 * w + i] =
              quads::detail::mul_rn(quads::detail::mul_rn(e2m1_turbo_q(s), sf[j]), c.td);
      }
      if constexpr (Codes) q[j].w[w] = acc;
    }
  }
  return true;
}

//! NaN-propagating fp32 max (`max.NaN.f32`).
QUADS_DEVICE_API float fmax_nan(float a, float b) {
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

//! The turbo path for one block of 16 fp32 values: `Quantizer::quantize`'s code words and scale
//! byte, with the byte's factor `k` and its multipliers from `mult(byte, m, m8)` (false: the
//! multiplier does not admit the turbo path). Returns false when a value is NaN or `mult` refuses
//! (the caller takes the generic path).
template <class Quantizer, pack_mul P = pack_mul::constant, class Mult>
QUADS_DEVICE_API bool turbo_block_f32_with(const float (&v)[16], float k, const Mult& mult,
                                           block_words<16>& q) {
  float t[8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
    t[i] = fmax_nan(fabsf(v[2 * i]), fabsf(v[2 * i + 1]));
#pragma unroll
  for (int w = 4; w >= 1; w /= 2)
#pragma unroll
    for (int i = 0; i < w; ++i)
      t[i] = fmax_nan(t[i], t[i + w]);
  if (t[0] != t[0]) return false;
  const std::uint8_t byte = encode_ue4m3(quads::detail::mul_rn(t[0], k));
  q.scale = byte;
  float m, m8;
  if (!mult(byte, m, m8)) return false;
  if (quads::detail::mul_rn(t[0], m8) < 0.875f) { // the saturating encoder (see turbo_blocks)
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      std::uint32_t bf[8];
      float sum[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        sat_encode(v[8 * w + i], m8, bf[i], sum[i]);
      }
      q.w[w] = sat_pack<P>(bf, sum) | sign_nibbles32(reinterpret_cast<const float(&)[8]>(v[8 * w]));
    }
    return true;
  }
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    std::uint32_t acc = 0u - e2m1_turbo_bias, sgn = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float s = quads::detail::mul_rn(v[8 * w + i], m);
      acc += e2m1_turbo_t(s) << (4 * i);
      sgn |= (__float_as_uint(s) >> (28 - 4 * i)) & (8u << (4 * i));
    }
    q.w[w] = acc | sgn;
  }
  return true;
}

//! `turbo_block_f32_with` for a block quantized with the tensor scale of `c` (e.g. a RAC
//! residual under a shared scale). Requires `c.ok`.
template <class Quantizer, pack_mul P = pack_mul::constant>
QUADS_DEVICE_API bool turbo_block_f32(const float (&v)[16], const turbo_ctx& c,
                                      block_words<16>& q) {
  return turbo_block_f32_with<Quantizer, P>(
      v, c.k,
      [&c](std::uint8_t b, float& m, float& m8) {
        m = c.mtab[b];
        m8 = c.mtab[128 + b];
        return true;
      },
      q);
}

//! `turbo_block_f32_with` without a CTA's multiplier table (a thread on its own, e.g. an epilogue
//! node): the block's multipliers are computed from its scale byte, the codes packed with
//! literal multipliers (`pack_mul::immediate`: no constant-memory read in a latency-bound
//! thread). Returns false also when `ts` or the byte's multiplier do not admit the turbo path.
template <class Quantizer>
QUADS_DEVICE_API bool turbo_block_f32(const float (&v)[16], tensor_scale ts, block_words<16>& q) {
  bool ok;
  const float k = turbo_k(ts, ok);
  return ok && turbo_block_f32_with<Quantizer, pack_mul::immediate>(
                   v, k,
                   [ts](std::uint8_t b, float& m, float& m8) {
                     turbo_multipliers(b, ts.decode, m, m8);
                     return m > 0.0f;
                   },
                   q);
}

//! `turbo_block_f32` (the per-block multipliers, no table) with the block spread over the `G`
//! lanes of `mask`, one value `x` per lane (lane `rank` holds element `rank`; every lane of the
//! group calls it together). Returns false, in every lane, where `turbo_block_f32` does (a NaN
//! value, or a tensor scale / scale byte the turbo path does not admit); otherwise `byte` is the
//! block's scale byte, `code` this element's E2M1 code (the bytes of `turbo_block_f32`: its
//! general encoder, which equals the saturating one where both apply) and `deq` the element's
//! `dequantize_block` value, so that RAC's residual needs no decoder.
template <class Quantizer, int G>
QUADS_DEVICE_API bool turbo_lane_f32(float x, tensor_scale ts, unsigned mask, std::uint8_t& byte,
                                     std::uint32_t& code, float& deq) {
  static_assert(turbo_f32_applies<Quantizer> && G == Quantizer::block_size,
                "quads: turbo_lane_f32 spreads one 16-element NVFP4-like block over 16 lanes");
  using F = typename Quantizer::format;
  bool ok;
  const float k = turbo_k(ts, ok);
  float amax = fabsf(x);
#pragma unroll
  for (int o = G / 2; o >= 1; o /= 2)
    amax = fmax_nan(amax, __shfl_xor_sync(mask, amax, o));
  if (!ok || amax != amax) return false;
  byte = encode_ue4m3(quads::detail::mul_rn(amax, k));
  float m, m8;
  turbo_multipliers(byte, ts.decode, m, m8);
  if (!(m > 0.0f)) return false;
  const float s = quads::detail::mul_rn(x, m);  // keeps x's sign (m > 0)
  const std::uint32_t sign = __float_as_uint(s) & 0x80000000u;
  code = (e2m1_turbo_t(s) - 298u) | (sign >> 28);
  const float mag = e2m1_turbo_q(s);
  deq = quads::detail::mul_rn(
      quads::detail::mul_rn(__uint_as_float(__float_as_uint(mag) | sign), F::decode_scale(byte)),
      ts.decode);
  return true;
}

//! The two code words of a block whose element `rank` (of `G` = 16 lanes in `mask`) holds
//! `code`: word `rank / 8` is returned in every lane of that half of the group.
template <int G>
QUADS_DEVICE_API std::uint32_t lane_code_word(std::uint32_t code, int rank, unsigned mask) {
  std::uint32_t w = code << (4 * (rank % 8));
#pragma unroll
  for (int o = 1; o < 8; o *= 2)
    w |= __shfl_xor_sync(mask, w, o);
  return w;
}

//! The block of `G` lanes gathered into every lane (for the generic path's rare blocks).
template <int G>
QUADS_DEVICE_API void lane_gather(float x, unsigned mask, float (&v)[G]) {
  const int base = __ffs(mask) - 1;
#pragma unroll
  for (int i = 0; i < G; ++i)
    v[i] = __shfl_sync(mask, x, base + i);
}

//! Dequantizes a block: `Quantizer::decode` with the scale decoded once per block:
//! `mul_rn(mul_rn(e2m1(code), decode_scale(byte)), ts.decode)`. `Permute`: the codes through
//! `decode_e2m1_word` (byte permutes; fewer instructions) instead of `decode_e2m1`. Measured on
//! the H200 (2026-11-30 18:08 UTC): RAC's pair kernel 34.4 -> 33.5 us at 12.5 % and 39.5 -> 37.8
//! us at 25 % (bf16 8192 x 4096), but the dequantize kernel 75.1 -> 80.4 us at 8192 x 8192 NVFP4,
//! so only the former uses it.
template <class Quantizer, bool Permute = false>
QUADS_DEVICE_API void dequantize_block(const block_words<Quantizer::block_size>& q, tensor_scale ts,
                                       float (&v)[Quantizer::block_size]) {
  using F = typename Quantizer::format;
  constexpr int B = Quantizer::block_size;
  const float sf = F::decode_scale(q.scale);
  float e[B]; // decode_e2m1 of each code (Permute)
  if constexpr (Permute) {
#pragma unroll
    for (int w = 0; w < B / 8; ++w)
      decode_e2m1_word(q.w[w], reinterpret_cast<float(&)[8]>(e[8 * w]));
  }
#pragma unroll
  for (int i = 0; i < B; ++i) {
    const float d = quads::detail::mul_rn(
        Permute ? e[i] : decode_e2m1(static_cast<std::uint8_t>(q.w[i / 8] >> (4 * (i % 8)))), sf);
    if constexpr (F::has_tensor_scale) {
      v[i] = quads::detail::mul_rn(d, ts.decode);
    } else {
      v[i] = d;
    }
  }
}

//! The codes of two consecutive 16-element blocks as one 16-byte word (the first in the low half).
QUADS_DEVICE_API uint4 pair_codes(const block_words<16> (&q)[2]) {
  return make_uint4(q[0].w[0], q[0].w[1], q[1].w[0], q[1].w[1]);
}

//! Writes packed codes and scale bytes (and, for swizzled scales, the zero padding).
template <class Format, class Layout>
struct quant_sink {
  static constexpr int B = Format::block_size;
  static constexpr bool pads = std::is_same_v<Layout, swizzled_128x4>;
  std::uint8_t* data;
  std::uint8_t* scales;
  Layout layout;           //!< `{rows, cols / B}` of one expert
  std::size_t layout_size; //!< bytes per expert
  int rows;
  int nkb;

  QUADS_DEVICE_API void put(int e, int r, int kb, const block_words<B>& q, tensor_scale) const {
    const std::size_t blk =
        (static_cast<std::size_t>(e) * rows + r) * static_cast<std::size_t>(nkb) + kb;
    if constexpr (B == 16) {
      *reinterpret_cast<uint2*>(data + blk * 8) = make_uint2(q.w[0], q.w[1]);
    } else {
#pragma unroll
      for (int i = 0; i < B / 32; ++i)
        reinterpret_cast<uint4*>(data + blk * (B / 2))[i] =
            make_uint4(q.w[4 * i], q.w[4 * i + 1], q.w[4 * i + 2], q.w[4 * i + 3]);
    }
    scales[static_cast<std::size_t>(e) * layout_size + nonneg_offset(layout, r, kb)] = q.scale;
  }
  static constexpr bool wants_values = false;
  template <class TIn>
  QUADS_DEVICE_API void put_values(int, int, int, const float (&)[B],
                                   const raw_block<TIn, B>&) const {}
  //! Pair path (two consecutive blocks `kb`, `kb + 1` of a row, `kb` even): one 16-byte code
  //! store and one 2-byte scale store (`offset(r, kb + 1) == offset(r, kb) + 1` for both layouts
  //! when `kb` is even, and the offset is even).
  static constexpr bool pairs = B == 16;
  bool pair_ok() const { return nkb % 2 == 0 && aligned(data, 16) && aligned(scales, 2); }
  QUADS_DEVICE_API void put2(int e, int r, int kb, const block_words<B> (&q)[2],
                             tensor_scale ts) const {
    if constexpr (B == 16) {
      const std::size_t blk =
          (static_cast<std::size_t>(e) * rows + r) * static_cast<std::size_t>(nkb) + kb;
      *reinterpret_cast<uint4*>(data + blk * 8) = pair_codes(q);
      *reinterpret_cast<std::uint16_t*>(scales + static_cast<std::size_t>(e) * layout_size +
                                        nonneg_offset(layout, r, kb)) =
          static_cast<std::uint16_t>(q[0].scale | (q[1].scale << 8));
    } else {
      put(e, r, kb, q[0], ts);
      put(e, r, kb + 1, q[1], ts);
    }
  }
  //! `put2` for the turbo pair loop: the codes of pair `p` of expert `e` at byte 16 p of the
  //! expert's codes (rows are contiguous), the scale offset in 32-bit arithmetic (the same value
  //! as `Layout::offset`: one expert's scales are < 2^31 bytes).
  QUADS_DEVICE_API std::uint32_t scale_offset32(std::uint32_t r, std::uint32_t kb) const {
    if constexpr (pads) {
      const std::uint32_t ct = static_cast<std::uint32_t>(layout.col_tiles());
      return ((r >> 7) * ct + (kb >> 2)) * 512u + (r & 31u) * 16u + ((r >> 5) & 3u) * 4u +
             (kb & 3u);
    } else {
      return r * static_cast<std::uint32_t>(nkb) + kb;
    }
  }
  QUADS_DEVICE_API void put2_flat(std::uint8_t* codes_e, std::uint8_t* scales_e, std::uint32_t p,
                                  std::uint32_t r, std::uint32_t kb,
                                  const block_words<B> (&q)[2]) const {
    static_assert(B == 16);
    *reinterpret_cast<uint4*>(codes_e + static_cast<std::size_t>(p) * 16u) = pair_codes(q);
    *reinterpret_cast<std::uint16_t*>(scales_e + scale_offset32(r, kb)) =
        static_cast<std::uint16_t>(q[0].scale | (q[1].scale << 8));
  }
  //! Padding of expert `e` (swizzled only): whole 4-byte words of the padding rows, then the
  //! bytes of the padding columns of real rows; work item `i` of `pad_count()`.
  QUADS_API std::uint32_t pad_words() const {
    if constexpr (pads) {
      return static_cast<std::uint32_t>(layout.row_tiles() * 128 - rows) *
             static_cast<std::uint32_t>(layout.col_tiles());
    } else {
      return 0;
    }
  }
  QUADS_API std::uint32_t pad_count() const {
    if constexpr (pads) {
      return pad_words() + static_cast<std::uint32_t>(rows) *
                               static_cast<std::uint32_t>(layout.col_tiles() * 4 - nkb);
    } else {
      return 0;
    }
  }
  QUADS_DEVICE_API void pad(int e, std::uint32_t i) const {
    if constexpr (pads) {
      std::uint8_t* base = scales + static_cast<std::size_t>(e) * layout_size;
      const std::uint32_t words = pad_words();
      const std::uint32_t ct = static_cast<std::uint32_t>(layout.col_tiles());
      if (i < words) {
        const int r = rows + static_cast<int>(i / ct);
        const int c = static_cast<int>(i % ct) * 4;
        *reinterpret_cast<std::uint32_t*>(base + layout.offset(r, c)) = 0u;
      } else {
        const std::uint32_t j = i - words;
        const std::uint32_t w = ct * 4u - static_cast<std::uint32_t>(nkb);
        base[layout.offset(static_cast<int>(j / w), nkb + static_cast<int>(j % w))] = 0;
      }
    } else {
      (void)e;
      (void)i;
    }
  }
  //! Row kernel helpers: zero the scale words of padding row `r`, and the padding columns of
  //! real row `r`, cooperatively (thread `t` of `n`).
  QUADS_DEVICE_API void pad_row(int e, int r, int t, int n) const {
    if constexpr (pads) {
      std::uint8_t* base = scales + static_cast<std::size_t>(e) * layout_size;
#pragma unroll 1 // an unrolled loop's trip count is a division, hoisted before the row's loads
      for (int c = t; c < layout.col_tiles(); c += n)
        *reinterpret_cast<std::uint32_t*>(base + layout.offset(r, 4 * c)) = 0u;
    } else {
      (void)e, (void)r, (void)t, (void)n;
    }
  }
  QUADS_DEVICE_API void pad_row_tail(int e, int r, int t, int n) const {
    if constexpr (pads) {
      std::uint8_t* base = scales + static_cast<std::size_t>(e) * layout_size;
#pragma unroll 1
      for (int c = nkb + t; c < layout.col_tiles() * 4; c += n)
        base[layout.offset(r, c)] = 0;
    } else {
      (void)e, (void)r, (void)t, (void)n;
    }
  }
};

//! Writes `dequantize(quantize(x))` as `TOut` (RNE from the fp32 dequantized value).
template <class Quantizer, class TOut>
struct qdq_sink {
  using value_type = TOut;
  static constexpr int B = Quantizer::block_size;
  static constexpr bool pads = false;
  TOut* y;
  std::int64_t row_stride;
  std::int64_t expert_stride;

  QUADS_DEVICE_API void put(int e, int r, int kb, const block_words<B>& q, tensor_scale ts) const {
    float v[B];
    dequantize_block<Quantizer>(q, ts, v);
    store_narrow<TOut, B>(
        y + e * expert_stride + r * row_stride + static_cast<std::int64_t>(kb) * B, v);
  }
  //! Turbo path: magnitudes of the dequantized values, and the input's raw words for the signs
  //! (16-bit `TOut` only; the RNE cast is symmetric, so the cast of the magnitude with the sign
  //! bit ORed in is the cast of the signed value).
  static constexpr bool wants_values = true;
  template <class TIn>
  QUADS_DEVICE_API static void value_words(const float (&v)[B], const raw_block<TIn, B>& raw,
                                           raw_block<TOut, B>& o) {
    static_assert(sizeof(TIn) == 2 && sizeof(TOut) == 2);
    narrow_words<TOut, B>(v, o);
#pragma unroll
    for (int i = 0; i < B / 8; ++i) {
      o.w[i].x |= raw.w[i].x & 0x80008000u;
      o.w[i].y |= raw.w[i].y & 0x80008000u;
      o.w[i].z |= raw.w[i].z & 0x80008000u;
      o.w[i].w |= raw.w[i].w & 0x80008000u;
    }
  }
  //! The output words of a block that the turbo path refused (generic quantizer).
  QUADS_DEVICE_API static void code_words(const block_words<B>& q, tensor_scale ts,
                                          raw_block<TOut, B>& o) {
    float v[B];
    dequantize_block<Quantizer>(q, ts, v);
    narrow_words<TOut, B>(v, o);
  }
  //! One 16-byte store (ptxas split plain uint4 stores).
  QUADS_DEVICE_API static void store_word(TOut* p, uint4 w) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w.x), "r"(w.y), "r"(w.z),
                 "r"(w.w)
                 : "memory");
  }
  template <class TIn>
  QUADS_DEVICE_API void put_values(int e, int r, int kb, const float (&v)[B],
                                   const raw_block<TIn, B>& raw) const {
    raw_block<TOut, B> o;
    value_words(v, raw, o);
    TOut* p = y + e * expert_stride + r * row_stride + static_cast<std::int64_t>(kb) * B;
#pragma unroll
    for (int i = 0; i < B / 8; ++i)
      store_word(p + 8 * i, o.w[i]);
  }
  //! No pair kernel: measured about 20% slower for QDQ on the H200 at 8192 x 8192 bf16 than
  //! the block kernel (the pair QDQ kernel needs 64 registers).
  static constexpr bool pairs = false;
  QUADS_API std::uint32_t pad_count() const { return 0; }
  QUADS_DEVICE_API void pad(int, std::uint32_t) const {}
  QUADS_DEVICE_API void pad_row(int, int, int, int) const {}
  QUADS_DEVICE_API void pad_row_tail(int, int, int, int) const {}
};

//! Rows including the swizzled layout's padding rows.
template <class Layout>
inline int padded_rows_of(const Layout& l, int rows) {
  if constexpr (std::is_same_v<Layout, swizzled_128x4>) {
    return l.row_tiles() * 128;
  } else {
    (void)l;
    return rows;
  }
}

//! Blocks per thread per loop iteration: two when a block is 32 bytes, else one.
template <class T, int B>
inline constexpr int blocks_per_iteration = B * sizeof(T) <= 32 ? 2 : 1;

//! The swizzled padding of expert `e` (nothing for other sinks), written by the grid's threads
//! from this thread's grid-stride position (`first`, `stride`) as `Sink::pad`'s words. (16-byte
//! stores of whole 4-row chunks measured no faster for small calls and were removed in the
//! seventh session; docs/history/benchmarks.md "Small calls, sixth session".)
template <class Sink>
QUADS_DEVICE_API void write_padding(const Sink& sink, int e, std::uint32_t first,
                                    std::uint32_t stride) {
  if constexpr (Sink::pads) {
    const std::uint32_t n = sink.pad_count();
    for (std::uint32_t i = first; i < n; i += stride)
      sink.pad(e, i);
  } else {
    (void)sink, (void)e, (void)first, (void)stride;
  }
}

//! The block kernel's body: grid-stride over the blocks of expert `blockIdx.y`, `U` blocks per
//! thread and iteration (`enqueue_block` takes 1 when a block per thread fits in one wave).
//! `Pipelined` (NVFP4 QDQ on the turbo path, U = 1, `enqueue_block` above one wave): the next
//! block is loaded before the current one is encoded, and packed output rows are stored through
//! shared memory.
template <class Quantizer, class T, class Sink, bool Fast, int U, bool Pipelined = false>
QUADS_DEVICE_API void block_kernel_body(const T* x, fast_divmod nkb, std::uint32_t total, int rows,
                                        std::int64_t row_stride, std::int64_t expert_stride,
                                        scale_source<Quantizer> src, Sink sink,
                                        std::uint64_t seed) {
  using F = typename Quantizer::format;
  constexpr int B = F::block_size;
  pdl_enter(); // launched programmatically above the small-call size (`enqueue_block`)
  const int e = static_cast<int>(blockIdx.y);
  const tensor_scale ts = src.get(e);
  if (src.out != nullptr && blockIdx.x == 0 && threadIdx.x == 0) src.out[e] = ts;
  constexpr bool turbo = turbo_applies<Quantizer, T> && Fast;
  __shared__ float turbo_tab[turbo ? turbo_table_floats : 1];
  const T* xe = x + e * expert_stride;
  const std::uint32_t stride = gridDim.x * blockDim.x;
  const std::uint32_t first = blockIdx.x * blockDim.x + threadIdx.x;
  turbo_ctx tc{};
  if constexpr (turbo) {
#pragma unroll
    for (int j = 0; j < U; ++j) { // the first blocks' lines while the table is built
      const std::uint32_t uj = first + j * stride;
      if (uj < total) {
        std::uint32_t r0, k0;
        nkb.divmod(uj, r0, k0);
        prefetch_l1(xe + r0 * row_stride + static_cast<std::int64_t>(k0) * B);
      }
    }
  }
  // the swizzled padding first: independent of the data, it runs while the tensor scale and
  // the first lines are in flight instead of after the last store (small calls' latency)
  write_padding(sink, e, first, stride);
  if constexpr (turbo) tc = make_turbo_ctx<Quantizer>(ts, turbo_tab);
  if constexpr (turbo && Pipelined) {
    static_assert(U == 1 && Sink::wants_values && B == 16, "the pipelined loop serves QDQ");
    if (tc.ok) {
      // Packed rows: a warp's 32 consecutive blocks (1 KB of output) leave through shared memory
      // as two 512-byte contiguous warp stores (a lane's own block takes two 16-byte stores at a
      // 32-byte stride: twice the L2 write requests)
      __shared__ uint4 stage[block_threads / 32][64];
      const bool staged = sink.row_stride == static_cast<std::int64_t>(nkb.divisor) * B;
      uint4* st = stage[threadIdx.x >> 5];
      const std::uint32_t lane = threadIdx.x & 31u;
      typename Sink::value_type* ye = sink.y + e * sink.expert_stride;
      raw_block<T, B> next;
      std::uint32_t n_row = 0, n_kb = 0;
      const auto fetch = [&](std::uint32_t at) {
        nkb.divmod(at, n_row, n_kb);
        load_raw<T, B>(xe + n_row * row_stride + static_cast<std::int64_t>(n_kb) * B, next);
      };
      if (first < total) fetch(first);
      // the next block is loaded before this one is encoded; warp-uniform trip count (the stage
      // is shared by the warp)
      for (std::uint32_t u = first; __any_sync(0xffffffffu, u < total); u += stride) {
        const raw_block<T, B> raw[1] = {next};
        const std::uint32_t row = n_row, kb = n_kb;
        if (u + stride < total) fetch(u + stride);
        raw_block<typename Sink::value_type, B> o{};
        if (u < total) {
          block_words<B> q[1];
          float vals[1][B];
          if (turbo_blocks<Quantizer, T, 1, false, true, pack_mul::constant>(raw, tc, q, vals)) {
            if (staged)
              Sink::value_words(vals[0], raw[0], o);
            else
              sink.put_values(e, static_cast<int>(row), static_cast<int>(kb), vals[0], raw[0]);
          } else {
            float v[1][B];
            widen(raw[0], v[0]);
            const std::uint64_t index[1] = {
                (static_cast<std::uint64_t>(e) * rows + row) * nkb.divisor + kb};
            quantize_blocks<Quantizer, 1, Fast>(v, ts, seed, index, q);
            if (staged)
              Sink::code_words(q[0], ts, o);
            else
              sink.put(e, static_cast<int>(row), static_cast<int>(kb), q[0], ts);
          }
        }
        if (staged) {
          st[2 * lane] = o.w[0];
          st[2 * lane + 1] = o.w[1];
          __syncwarp();
          // word h * 32 + lane of the warp's span: block (u - lane) + h * 16 + lane / 2
#pragma unroll
          for (std::uint32_t h = 0; h < 2; ++h)
            if (u - lane + h * 16u + (lane >> 1) < total)
              Sink::store_word(ye + static_cast<std::size_t>(u - lane) * B + (h * 32u + lane) * 8u,
                               st[h * 32u + lane]);
          __syncwarp();
        }
      }
      return;
    }
  }
  for (std::uint32_t u = first; u < total; u += U * stride) {
    raw_block<T, B> raw[U];
    std::uint32_t row[U], kb[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const std::uint32_t uj = u + j * stride;
      if (j == 0 || uj < total) {
        nkb.divmod(uj, row[j], kb[j]);
        load_raw<T, B>(xe + row[j] * row_stride + static_cast<std::int64_t>(kb[j]) * B, raw[j]);
      } else {
        row[j] = kb[j] = 0;
#pragma unroll
        for (int w = 0; w < raw_block<T, B>::words; ++w)
          raw[j].w[w] = make_uint4(0, 0, 0, 0);
      }
    }
    if constexpr (turbo) {
      if (tc.ok) {
        block_words<B> q[U];
        float vals[U][B];
        // U = 1 only in the one-wave (small-call) instantiation: literal multipliers there
        constexpr pack_mul P = U == 1 ? pack_mul::immediate : pack_mul::constant;
        if (turbo_blocks<Quantizer, T, U, !Sink::wants_values, Sink::wants_values, P>(raw, tc, q,
                                                                                      vals)) {
#pragma unroll
          for (int j = 0; j < U; ++j)
            if (j == 0 || u + j * stride < total) {
              if constexpr (Sink::wants_values)
                sink.put_values(e, static_cast<int>(row[j]), static_cast<int>(kb[j]), vals[j],
                                raw[j]);
              else
                sink.put(e, static_cast<int>(row[j]), static_cast<int>(kb[j]), q[j], ts);
            }
          continue;
        }
      }
    }
    float v[U][B];
    std::uint64_t index[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      widen(raw[j], v[j]);
      index[j] = (static_cast<std::uint64_t>(e) * rows + row[j]) * nkb.divisor + kb[j];
    }
    block_words<B> q[U];
    quantize_blocks<Quantizer, U, Fast>(v, ts, seed, index, q);
#pragma unroll
    for (int j = 0; j < U; ++j)
      if (j == 0 || u + j * stride < total)
        sink.put(e, static_cast<int>(row[j]), static_cast<int>(kb[j]), q[j], ts);
  }
}

//! The block kernel (see `block_kernel_body`).
template <class Quantizer, class T, class Sink, bool Fast = fast_path_applies<Quantizer>,
          int U = blocks_per_iteration<T, Quantizer::block_size>>
__global__ void __launch_bounds__(block_threads)
    block_kernel(const T* x, fast_divmod nkb, std::uint32_t total, int rows,
                 std::int64_t row_stride, std::int64_t expert_stride, scale_source<Quantizer> src,
                 Sink sink, std::uint64_t seed) {
  block_kernel_body<Quantizer, T, Sink, Fast, U>(x, nkb, total, rows, row_stride, expert_stride,
                                                 src, sink, seed);
}

//! The block kernel for the turbo path with a resident-CTA request (`enqueue_block` asks for 2 by
//! default: QDQ measured faster with 2 CTAs of 125 registers than with 3 of 80). A separate
//! kernel because a bound made ptxas spend more registers on the other instantiations (fp32
//! input 40 -> 67, MXFP4 63 -> 112).
template <class Quantizer, class T, class Sink, int MinBlocks = 3,
          int U = blocks_per_iteration<T, Quantizer::block_size>, bool Pipelined = false>
__global__ void __launch_bounds__(block_threads, MinBlocks)
    block_kernel_turbo(const T* x, fast_divmod nkb, std::uint32_t total, int rows,
                       std::int64_t row_stride, std::int64_t expert_stride,
                       scale_source<Quantizer> src, Sink sink, std::uint64_t seed) {
  block_kernel_body<Quantizer, T, Sink, true, U, Pipelined>(x, nkb, total, rows, row_stride,
                                                            expert_stride, src, sink, seed);
}

//! The block kernel to launch (only the chosen one is instantiated), `U` blocks per iteration.
template <class Quantizer, class T, class Sink, int TurboMinBlocks = 3,
          int U = blocks_per_iteration<T, Quantizer::block_size>>
constexpr auto block_kernel_for() {
  if constexpr (turbo_applies<Quantizer, T> && fast_path_applies<Quantizer>)
    return block_kernel_turbo<Quantizer, T, Sink, TurboMinBlocks, U>;
  else
    return block_kernel<Quantizer, T, Sink, fast_path_applies<Quantizer>, U>;
}

//! Whether the half-block kernel applies: 32-element blocks of 16-bit input (MXFP4 from bf16 /
//! fp16: 64 bytes per block) on the fast path, quantized (not QDQ).
template <class Quantizer, class T, class Sink>
inline constexpr bool half_blocks_apply = Quantizer::block_size == 32 &&
                                          sizeof(T) == 2 && fast_path_applies<Quantizer> &&
                                          !Sink::wants_values;

//! Small calls of 32-element blocks of 16-bit input (`half_blocks_apply`): two threads per
//! block, each loading, scaling and encoding 16 values (half the per-thread latency chain of a
//! block per thread, twice the threads); the block amax meets with one shuffle (max is exact and
//! order-independent), both threads take the block's `Quantizer::scale_for`, each stores its 8
//! bytes of codes, the even one the scale byte. The encoder choice (NaN-safe or not) is per
//! half; both encoders give the same codes for every value that is not NaN.
template <class Quantizer, class T, class Sink>
__global__ void __launch_bounds__(block_threads)
    half_block_kernel(const T* x, fast_divmod nkb, std::uint32_t total, int rows,
                      std::int64_t row_stride, std::int64_t expert_stride,
                      scale_source<Quantizer> src, Sink sink) {
  constexpr int B = Quantizer::block_size;
  constexpr int H = B / 2;
  const int e = static_cast<int>(blockIdx.y);
  const tensor_scale ts = src.get(e);
  if (src.out != nullptr && blockIdx.x == 0 && threadIdx.x == 0) src.out[e] = ts;
  const T* xe = x + e * expert_stride;
  const std::uint32_t stride = gridDim.x * blockDim.x; // even: pairs stay together
  const std::uint32_t first = blockIdx.x * blockDim.x + threadIdx.x;
  const std::uint32_t half = threadIdx.x & 1u;
  write_padding(sink, e, first, stride);
  // warp-uniform trip count (the shuffle needs the whole warp)
  for (std::uint32_t t = first; __any_sync(0xffffffffu, (t >> 1) < total); t += stride) {
    const std::uint32_t b = t >> 1;
    const bool active = b < total;
    std::uint32_t row = 0, kb = 0;
    float v[H];
    if (active) {
      nkb.divmod(b, row, kb);
      raw_block<T, H> raw;
      load_raw<T, H>(xe + row * row_stride + static_cast<std::int64_t>(kb) * B + half * H, raw);
      widen(raw, v);
    } else {
#pragma unroll
      for (int i = 0; i < H; ++i)
        v[i] = 0.0f;
    }
    float a = block_amax(v);
    a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 1));
    const block_scale sc = Quantizer::scale_for(a, ts);
#pragma unroll
    for (int i = 0; i < H; ++i)
      v[i] = quads::detail::mul_rn(v[i], sc.multiplier);
    std::uint32_t w[2];
    if (tree_sum(v) == tree_sum(v)) {
#pragma unroll
      for (int j = 0; j < 2; ++j)
        w[j] = encode_e2m1x8_not_nan(reinterpret_cast<const float(&)[8]>(v[8 * j]));
    } else { // a NaN: the core encoder, which maps NaN to +6
#pragma unroll
      for (int j = 0; j < 2; ++j)
        w[j] = encode_e2m1x8(reinterpret_cast<const float(&)[8]>(v[8 * j]));
    }
    if (active) {
      const std::size_t blk =
          (static_cast<std::size_t>(e) * rows + row) * static_cast<std::size_t>(nkb.divisor) + kb;
      *reinterpret_cast<uint2*>(sink.data + blk * (B / 2) + half * 8u) = make_uint2(w[0], w[1]);
      if (half == 0)
        sink.scales[static_cast<std::size_t>(e) * sink.layout_size +
                    nonneg_offset(sink.layout, static_cast<int>(row), static_cast<int>(kb))] =
            sc.byte;
    }
  }
}

//! Whether the pair kernel applies to blocks of `B` elements of `T` (32-byte blocks).
template <class T, int B>
inline constexpr bool pair_blocks = B * sizeof(T) == 32;

//! A block pair's input: 64 contiguous bytes (two blocks of 16-bit values).
template <class T, int B>
struct raw_pair {
  raw_block<T, B> b[2];
};

template <class T, int B>
QUADS_DEVICE_API void load_pair(const T* xp, raw_pair<T, B>& r) {
  load_raw<T, B>(xp, r.b[0]);
  load_raw<T, B>(xp + B, r.b[1]);
}

//! Quantizes a loaded block pair on the turbo path, or with the core functors where the turbo
//! encoder refuses a block (NaN); `b0`: the first block's index (as `quantize_blocks` takes it).
template <class Quantizer, class T>
QUADS_DEVICE_API void turbo_pair(const raw_pair<T, Quantizer::block_size>& in, const turbo_ctx& tc,
                                 tensor_scale ts, std::uint64_t seed, std::uint64_t b0,
                                 block_words<Quantizer::block_size> (&q)[2]) {
  constexpr int B = Quantizer::block_size;
  const raw_block<T, B>(&raw)[2] = in.b;
  float unused[2][B];
  if (!turbo_blocks<Quantizer, T, 2, true, false>(raw, tc, q, unused)) {
    float v[2][B];
    widen(raw[0], v[0]);
    widen(raw[1], v[1]);
    const std::uint64_t index[2] = {b0, b0 + 1};
    quantize_blocks<Quantizer, 2, true>(v, ts, seed, index, q);
  }
}

//! Whether the pair kernel walks row octets (`pair_octet_walk`): swizzled scales, rows of a
//! multiple of 16 blocks (no padding columns), 4-byte aligned scales.
template <class Sink>
QUADS_DEVICE_API bool octet_walk_applies(const Sink& sink) {
  if constexpr (Sink::pads)
    return sink.nkb % 16 == 0 && reinterpret_cast<std::uintptr_t>(sink.scales) % 4 == 0;
  else
    return (void)sink, false;
}

//! Unit `u` of the octet walk as (row octet, 16-block span of the row): `npk` = block pairs per
//! row, a multiple of 8, so `8 u = oct * npk + 8 span` (one multiply-high, no second divisor).
QUADS_DEVICE_API void octet_step(const fast_divmod& npk, std::uint32_t u, std::uint32_t& oct,
                                 std::uint32_t& span) {
  std::uint32_t r8;
  npk.divmod(8u * u, oct, r8);
  span = r8 >> 3;
}

//! Row and block pair of `lane` in the first half of unit (`oct`, `span`): row `lane / 8` of
//! the octet's first four rows (8 rows of a 128-row tile whose scales share 32-byte sectors:
//! r and r + 1 (r even) of each 32-row quarter), block pair `lane % 8` of the span. The second
//! half takes the row 64 below (octet row `lane / 8 + 4`), same pair.
QUADS_DEVICE_API void octet_position(std::uint32_t oct, std::uint32_t span, std::uint32_t lane,
                                     std::uint32_t& row, std::uint32_t& kp) {
  const std::uint32_t rq = lane >> 3;
  row = (oct >> 4) * 128u + (oct & 15u) * 2u + (rq & 1u) + (rq >> 1) * 32u;
  kp = 8u * span + (lane & 7u);
}

//! The turbo pair loop for swizzled scales (`octet_walk_applies`). A 32-byte sector of the
//! 128 x 4 layout holds 4 scale columns of 8 rows: r and r + 1 (r even) of each 32-row quarter of
//! a 128-row tile. Each warp takes such a row octet x 16 blocks per unit, in two halves of four
//! rows x 8 block pairs (a warp's code store: 4 rows x 128 contiguous bytes); after one shuffle
//! every lane holds one row's 4 scale bytes of a sector and the warp stores four whole sectors
//! in one instruction (the row-major walk stores 2 bytes into each of 16 sectors per warp
//! instruction). The padding rows of the last tile store their zero scales in the same walk.
template <class Quantizer, class T, class Sink>
QUADS_DEVICE_API void pair_octet_walk(const T* xe, fast_divmod npk_div, std::int64_t row_stride,
                                      int e, const Sink& sink, const turbo_ctx& tc, tensor_scale ts,
                                      std::uint64_t seed, std::uint32_t first,
                                      std::uint32_t stride) {
  constexpr int B = Quantizer::block_size;
  const std::uint32_t lane = threadIdx.x & 31u;
  const std::uint32_t rq = lane >> 3, slot = lane & 7u;
  const std::uint32_t rows = static_cast<std::uint32_t>(sink.rows);
  const std::uint32_t ct = static_cast<std::uint32_t>(sink.layout.col_tiles());
  const std::uint32_t npk = npk_div.divisor;
  const std::uint32_t units = static_cast<std::uint32_t>(sink.layout.row_tiles()) * 16u * (npk / 8);
  std::uint8_t* codes_e =
      sink.data + static_cast<std::size_t>(e) * rows * static_cast<std::size_t>(npk) * 16u;
  std::uint8_t* scales_e = sink.scales + static_cast<std::size_t>(e) * sink.layout_size;
  // One pair per lane and half unit, the next half's pair loaded before this one is quantized
  // (two pairs in flight per lane). Warp-uniform: every lane of a warp has the same `u`.
  const auto load_at = [&](std::uint32_t row, std::uint32_t kp, raw_pair<T, B>& r) {
    if (row < rows) load_pair(xe + row * row_stride + static_cast<std::int64_t>(kp) * (2 * B), r);
  };
  // quantizes the pair of `row` (codes stored); its two scale bytes, zero for a padding row
  const auto encode = [&](const raw_pair<T, B>& in, std::uint32_t row,
                          std::uint32_t kp) -> std::uint32_t {
    if (row >= rows) return 0u;
    block_words<B> q[2];
    turbo_pair<Quantizer>(in, tc, ts, seed,
                          (static_cast<std::uint64_t>(e) * rows + row) * (2u * npk) + 2u * kp, q);
    *reinterpret_cast<uint4*>(codes_e + (static_cast<std::size_t>(row) * npk + kp) * 16u) =
        pair_codes(q);
    return q[0].scale | (q[1].scale << 8);
  };
  std::uint32_t u = first / 32u;
  const std::uint32_t du = stride / 32u;
  std::uint32_t oct = 0, span = 0, row = rows, kp = 0;
  raw_pair<T, B> next;
  if (u < units) {
    octet_step(npk_div, u, oct, span);
    octet_position(oct, span, lane, row, kp);
    load_at(row, kp, next);
  }
  for (; u < units; u += du) {
    const std::uint32_t c_oct = oct, c_span = span, c_row = row, c_kp = kp;
    raw_pair<T, B> cur = next;
    load_at(c_row + 64u, c_kp, next); // second half: octet row rq + 4
    const std::uint32_t sa = encode(cur, c_row, c_kp);
    cur = next;
    if (u + du < units) {
      octet_step(npk_div, u + du, oct, span);
      octet_position(oct, span, lane, row, kp);
      load_at(row, kp, next);
    }
    const std::uint32_t sb = encode(cur, c_row + 64u, c_kp);
    // a sector's row word: columns 0-1 from the even slot, 2-3 from the odd one; the even lane
    // writes octet row rq, the odd lane octet row rq + 4
    const bool odd = (slot & 1u) != 0;
    const std::uint32_t got = __shfl_xor_sync(0xffffffffu, odd ? sa : sb, 1);
    const std::uint32_t word = odd ? (got | (sb << 16)) : (sa | (got << 16));
    const std::uint32_t atom = (c_oct >> 4) * ct + 4u * c_span + (slot >> 1);
    *reinterpret_cast<std::uint32_t*>(scales_e + atom * 512u + (c_oct & 15u) * 32u +
                                      (rq & 1u) * 16u + ((rq >> 1) + (odd ? 2u : 0u)) * 4u) = word;
  }
}

//! The pair kernel (32-byte blocks, `cols / B` even): grid-stride over pairs of consecutive
//! blocks of a row, so one index split, one 64-byte contiguous load and one sink call
//! (`put2`: one code store, one scale store) serve two blocks.
template <class Quantizer, class T, class Sink, bool Fast = fast_path_applies<Quantizer>,
          int MinBlocks = 0>
__global__ void __launch_bounds__(block_threads, MinBlocks)
    pair_kernel(const T* x, fast_divmod npk, std::uint32_t pairs, int rows, std::int64_t row_stride,
                std::int64_t expert_stride, scale_source<Quantizer> src, Sink sink,
                std::uint64_t seed) {
  using F = typename Quantizer::format;
  constexpr int B = F::block_size;
  pdl_enter(); // launched programmatically above the small-call size (`enqueue_block`)
  const int e = static_cast<int>(blockIdx.y);
  const tensor_scale ts = src.get(e);
  if (src.out != nullptr && blockIdx.x == 0 && threadIdx.x == 0) src.out[e] = ts;
  constexpr bool turbo = turbo_applies<Quantizer, T> && Fast;
  __shared__ float turbo_tab[turbo ? turbo_table_floats : 1];
  const T* xe = x + e * expert_stride;
  const std::uint32_t stride = gridDim.x * blockDim.x;
  const std::uint32_t first = blockIdx.x * blockDim.x + threadIdx.x;
  const std::uint32_t nkb = 2 * npk.divisor;
  turbo_ctx tc{};
  if constexpr (turbo) {
    // the first pair's line while the table is built
    std::uint32_t r0 = 0, k0 = 0;
    if (octet_walk_applies(sink)) {
      std::uint32_t oct, span;
      octet_step(npk, first / 32u, oct, span);
      octet_position(oct, span, threadIdx.x & 31u, r0, k0);
    } else if (first < pairs) {
      npk.divmod(first, r0, k0);
    }
    if (r0 < static_cast<std::uint32_t>(rows) && first < pairs)
      prefetch_l1(xe + r0 * row_stride + static_cast<std::int64_t>(k0) * (2 * B));
    tc = make_turbo_ctx<Quantizer>(ts, turbo_tab);
  }
  if constexpr (turbo && Sink::pads) {
    if (tc.ok && octet_walk_applies(sink)) {
      pair_octet_walk<Quantizer>(xe, npk, row_stride, e, sink, tc, ts, seed, first, stride);
      return;
    }
  }
  if constexpr (turbo) {
    // Turbo loop: (row, pair column) and the input pointer advance by the grid stride without a
    // division; codes at 16 bytes per pair; NaN blocks go through the generic blocks below.
    if (tc.ok && first < pairs) {
      std::uint32_t row, kp, dr, dk;
      npk.divmod(first, row, kp);
      npk.divmod(stride, dr, dk);
      const T* xp = xe + row * row_stride + static_cast<std::int64_t>(kp) * (2 * B);
      const std::int64_t d_same =
          static_cast<std::int64_t>(dr) * row_stride + static_cast<std::int64_t>(dk) * (2 * B);
      const std::int64_t d_wrap =
          d_same + row_stride - static_cast<std::int64_t>(npk.divisor) * (2 * B);
      std::uint8_t* codes_e =
          sink.data + static_cast<std::size_t>(e) * static_cast<std::size_t>(pairs) * 16u;
      std::uint8_t* scales_e = sink.scales + static_cast<std::size_t>(e) * sink.layout_size;
      // the next pair is loaded before this one is quantized (two pairs in flight per thread)
      raw_pair<T, B> next;
      load_pair(xp, next);
      for (std::uint32_t p = first; p < pairs; p += stride) {
        const raw_pair<T, B> cur = next;
        const std::uint32_t row_c = row, kp_c = kp;
        kp += dk;
        row += dr;
        if (kp >= npk.divisor) {
          kp -= npk.divisor;
          ++row;
          xp += d_wrap;
        } else {
          xp += d_same;
        }
        if (p + stride < pairs) load_pair(xp, next);
        block_words<B> q[2];
        turbo_pair<Quantizer>(cur, tc, ts, seed,
                              (static_cast<std::uint64_t>(e) * rows + row_c) * nkb + 2 * kp_c, q);
        sink.put2_flat(codes_e, scales_e, p, row_c, 2 * kp_c, q);
      }
    }
  }
  for (std::uint32_t p = (turbo && tc.ok) ? pairs : first; p < pairs; p += stride) {
    std::uint32_t row, kp;
    npk.divmod(p, row, kp);
    const std::uint32_t kb = 2 * kp;
    raw_pair<T, B> in;
    load_pair(xe + row * row_stride + static_cast<std::int64_t>(kb) * B, in);
    const raw_block<T, B>(&raw)[2] = in.b;
    block_words<B> q[2];
    float v[2][B];
    widen(raw[0], v[0]);
    widen(raw[1], v[1]);
    const std::uint64_t b0 = (static_cast<std::uint64_t>(e) * rows + row) * nkb + kb;
    const std::uint64_t index[2] = {b0, b0 + 1};
    quantize_blocks<Quantizer, 2, Fast>(v, ts, seed, index, q);
    sink.put2(e, static_cast<int>(row), static_cast<int>(kb), q, ts);
  }
  write_padding(sink, e, first, stride);
}

//! Values of the plain input `[experts, rows, cols]`.
//! Producer interface (used by the row kernel): `load` gives a block's input values; producers
//! with `has_state` fold them (`partial`, in block order) into a per-row statistic that the CTA
//! sums deterministically (`cta_sum_ordered`) and `finish_state` turns into the row state;
//! `finish` turns loaded values into the values to quantize (in place).
template <class T, int B>
struct plain_producer {
  static constexpr bool has_state = false;
  const T* x;
  std::int64_t row_stride;
  std::int64_t expert_stride;

  QUADS_DEVICE_API void load(int e, int r, int kb, float (&v)[B]) const {
    raw_block<T, B> raw;
    load_raw<T, B>(x + e * expert_stride + r * row_stride + static_cast<std::int64_t>(kb) * B, raw);
    widen(raw, v);
  }
  QUADS_DEVICE_API float partial(const float (&)[B], float acc) const { return acc; }
  QUADS_DEVICE_API float finish_state(float) const { return 0.0f; }
  QUADS_DEVICE_API void finish(int, float, float (&)[B]) const {}
};

//! `quantize_blocks` for the row kernel: the table-free `turbo_block_f32` where it applies (its
//! dependency chain is about half the generic one's, and the row kernel's small calls wait on
//! it), else, or when a block holds a NaN or `ts` does not admit it, `quantize_blocks`.
template <class Quantizer, int U>
QUADS_DEVICE_API void quantize_row_blocks(float (&v)[U][Quantizer::block_size], tensor_scale ts,
                                          std::uint64_t seed, const std::uint64_t (&index)[U],
                                          block_words<Quantizer::block_size> (&out)[U]) {
  if constexpr (turbo_f32_applies<Quantizer>) {
    bool ok = true;
#pragma unroll
    for (int j = 0; j < U; ++j)
      ok = turbo_block_f32<Quantizer>(v[j], ts, out[j]) && ok;
    if (ok) return;
  }
  quantize_blocks<Quantizer, U>(v, ts, seed, index, out);
}

//! What the row kernel does with each row.
enum class row_mode {
  per_row,   //!< row amax -> row tensor scale (written to `row_scales`), then quantize
  fixed,     //!< tensor scale from `scale_source` (given / per-tensor amax / none)
  amax_only, //!< only the amax of the produced values, atomically into `amax[expert]`
};

//! Blocks per thread that the row kernel keeps in registers (a row of up to
//! `row_cache_blocks * 256` blocks is read from memory once).
inline constexpr int row_cache_blocks = 2;

//! One CTA per row (grid-stride over `experts * padded_rows`; padding rows of a swizzled
//! layout only get their zero scale words). `blockDim.x` is a multiple of 32, <= 256. Thread t
//! owns blocks t, t + n, t + 2n, ...; the first `row_cache_blocks` of them stay in registers
//! between the passes (state, amax, quantize), later ones are loaded again in each pass.
//! `C`: blocks per thread kept in registers (`enqueue_row` takes 1 when a row has at most one
//! block per thread: half the unrolled code and registers of 2, for short rows' latency).
//! Small calls are a chain of latencies (load, CTA max, row scale, encode, store), so nothing
//! runs before the first load that need not (the row split by multiply-high, the padding loops
//! not unrolled) and blocks are encoded by `quantize_row_blocks`. H200, 2026-11-30 20:47 UTC,
//! bf16 per-row NVFP4 swizzled, against the generic encoder and a division first: 1 / 16 / 64 x
//! 4096 4.54-4.58 / 4.72-4.77 / 4.69-4.83 us (cold, isolated) against 4.80-4.90 / 4.99-5.02 /
//! 5.02-5.12; 8192 x 8192 71.8-72.0 against 82.7-82.9 us.
template <class Quantizer, class Producer, class Sink, row_mode Mode, int C = row_cache_blocks>
__global__ void __launch_bounds__(256)
    row_kernel(Producer p, int experts, int rows, fast_divmod prows, int nkb,
               scale_source<Quantizer> src, tensor_scale* row_scales, float* amax_out, Sink sink,
               std::uint64_t seed) {
  using F = typename Quantizer::format;
  constexpr int B = F::block_size;
  __shared__ float red[8];
  __shared__ alignas(16) float redm[2][8]; // cta_max_nonneg, alternating per row
  int parity = 0;
  const int t = static_cast<int>(threadIdx.x);
  const int n = static_cast<int>(blockDim.x);
  if constexpr (Mode == row_mode::fixed) {
    if (src.out != nullptr && blockIdx.x == 0)
      for (int e = t; e < experts; e += n)
        src.out[e] = src.get(e);
  }
  const std::uint32_t total = static_cast<std::uint32_t>(experts) * prows.divisor;
  for (std::uint32_t er = blockIdx.x; er < total; er += gridDim.x) {
    std::uint32_t eu, ru; // by multiply-high: no division before the first load
    prows.divmod(er, eu, ru);
    const int e = static_cast<int>(eu);
    const int r = static_cast<int>(ru);
    if (r >= rows) { // uniform across the CTA
      if constexpr (Mode != row_mode::amax_only) sink.pad_row(e, r, t, n);
      continue;
    }
    float v[C][B];
#pragma unroll
    for (int j = 0; j < C; ++j) {
      const int kb = t + j * n;
      if (kb < nkb) {
        p.load(e, r, kb, v[j]);
      } else {
#pragma unroll
        for (int i = 0; i < B; ++i)
          v[j][i] = 0.0f;
      }
    }
    float state = 0.0f;
    if constexpr (Producer::has_state) {
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < C; ++j)
        if (t + j * n < nkb) acc = p.partial(v[j], acc);
      for (int kb = t + C * n; kb < nkb; kb += n) {
        float w[B];
        p.load(e, r, kb, w);
        acc = p.partial(w, acc);
      }
      state = p.finish_state(cta_sum_ordered(acc, red));
#pragma unroll
      for (int j = 0; j < C; ++j)
        if (t + j * n < nkb) p.finish(t + j * n, state, v[j]);
    }
    tensor_scale ts{};
    if constexpr (Mode == row_mode::fixed) {
      ts = src.get(e);
    } else {
      float m = 0.0f;
#pragma unroll
      for (int j = 0; j < C; ++j)
        m = fmaxf(m, block_amax(v[j])); // unused slots are zeros
      for (int kb = t + C * n; kb < nkb; kb += n) {
        float w[B];
        p.load(e, r, kb, w);
        p.finish(kb, state, w);
        m = fmaxf(m, block_amax(w));
      }
      m = cta_max_nonneg(m, redm[parity]);
      parity ^= 1;
      if constexpr (Mode == row_mode::amax_only) {
        if (t == 0) atomic_max_nonneg(amax_out + e, m);
      } else {
        ts = make_tensor_scale<F, Quantizer::options>(m);
        if (t == 0 && row_scales != nullptr)
          row_scales[static_cast<std::size_t>(e) * rows + r] = ts;
      }
    }
    if constexpr (Mode != row_mode::amax_only) {
      const std::uint64_t row_block =
          (static_cast<std::uint64_t>(e) * rows + r) * static_cast<std::uint64_t>(nkb);
      {
        std::uint64_t index[C];
#pragma unroll
        for (int j = 0; j < C; ++j)
          index[j] = row_block + static_cast<std::uint64_t>(t + j * n);
        block_words<B> q[C];
        quantize_row_blocks<Quantizer, C>(v, ts, seed, index, q);
#pragma unroll
        for (int j = 0; j < C; ++j)
          if (t + j * n < nkb) sink.put(e, r, t + j * n, q[j], ts);
      }
      for (int kb = t + C * n; kb < nkb; kb += n) {
        float w[1][B];
        p.load(e, r, kb, w[0]);
        p.finish(kb, state, w[0]);
        const std::uint64_t index[1] = {row_block + static_cast<std::uint64_t>(kb)};
        block_words<B> q[1];
        quantize_row_blocks<Quantizer, 1>(w, ts, seed, index, q);
        sink.put(e, r, kb, q[0], ts);
      }
      sink.pad_row_tail(e, r, t, n);
    }
  }
}

//! Checks of the quantized outputs; nullptr when fine.
template <class Quantizer, class Layout>
inline const char* check_outputs(const quantized_view& out, const scale_args& args,
                                 const tensor_shape& s) {
  using F = typename Quantizer::format;
  constexpr quant_options O = Quantizer::options;
  constexpr int B = F::block_size;
  if (out.data == nullptr || out.scales == nullptr)
    return "quads: output data/scales pointer is null";
  if (!aligned(out.data, B / 2))
    return B == 16 ? "quads: output data must be 8-byte aligned (one 8-byte store per block)"
                   : "quads: output data must be 16-byte aligned (one 16-byte store per block)";
  if (std::is_same_v<Layout, swizzled_128x4> && !aligned(out.scales, 4))
    return "quads: swizzled scales must be 4-byte aligned (padding is zeroed by words)";
  if (F::has_tensor_scale && O.global != global_scale::given && out.tensor_scales == nullptr)
    return "quads: tensor_scales output is null (needed for per_tensor / per_row scales)";
  if (out.tensor_scales != nullptr && !aligned(out.tensor_scales, alignof(tensor_scale)))
    return "quads: tensor_scales must be aligned to alignof(tensor_scale)";
  if (F::has_tensor_scale && O.global == global_scale::given) {
    if (args.given == nullptr) return "quads: global_scale::given needs scale_args::given";
    if (args.given_count != 1 && args.given_count != s.experts)
      return "quads: scale_args::given_count must be 1 or experts";
  }
  if (F::has_tensor_scale && O.global == global_scale::per_tensor &&
      (args.amax_workspace == nullptr || !aligned(args.amax_workspace, 4)))
    return "quads: global_scale::per_tensor needs scale_args::amax_workspace (experts floats)";
  if (static_cast<std::int64_t>(s.rows) * (s.cols / B) >= (std::int64_t{1} << 31) ||
      static_cast<std::int64_t>(s.rows) * s.cols >= (std::int64_t{1} << 31))
    return "quads: rows * cols per expert must be < 2^31";
  if (static_cast<std::int64_t>(s.experts) * (s.rows + 127) >= (std::int64_t{1} << 31))
    return "quads: experts * rows must be < 2^31";
  return nullptr;
}

template <class Quantizer>
inline const char* block_multiple_msg() {
  return Quantizer::block_size == 16
             ? "quads: cols (K) must be a multiple of the block size 16; pad explicitly"
             : "quads: cols (K) must be a multiple of the block size 32; pad explicitly";
}

//! Enqueues `row_kernel` with `C` cached blocks per thread.
template <class Quantizer, row_mode Mode, int C, class Producer, class Sink>
inline void enqueue_row_cached(const Producer& p, const tensor_shape& s, int padded_rows,
                               const scale_source<Quantizer>& src, tensor_scale* row_scales,
                               float* amax_out, const Sink& sink, std::uint64_t seed,
                               cudaStream_t stream) {
  const int nkb = s.cols / Quantizer::block_size;
  const int threads = cta_threads_for(nkb);
  constexpr auto kernel = row_kernel<Quantizer, Producer, Sink, Mode, C>;
  const std::uint64_t ctas = static_cast<std::uint64_t>(s.experts) * padded_rows;
  const unsigned grid = grid_for<kernel>(threads, ctas * threads, 32);
  kernel<<<grid, threads, 0, stream>>>(p, s.experts, s.rows,
                                       fast_divmod(static_cast<std::uint32_t>(padded_rows)), nkb,
                                       src, row_scales, amax_out, sink, seed);
}

//! Enqueues a row kernel for `Producer`: one cached block per thread when the row has at most
//! one block per thread (cold isolated 1 / 16 / 64 x 4096 bf16 per-row quantize on the H200,
//! 2026-11-30 10:23 UTC: 4.74 / 4.96 / 4.90 us against 5.22 / 5.41 / 5.38 us with two), else
//! `row_cache_blocks`.
template <class Quantizer, row_mode Mode, class Producer, class Sink>
inline void enqueue_row(const Producer& p, const tensor_shape& s, int padded_rows,
                        const scale_source<Quantizer>& src, tensor_scale* row_scales,
                        float* amax_out, const Sink& sink, std::uint64_t seed,
                        cudaStream_t stream) {
  const int nkb = s.cols / Quantizer::block_size;
  if (nkb <= cta_threads_for(nkb))
    enqueue_row_cached<Quantizer, Mode, 1>(p, s, padded_rows, src, row_scales, amax_out, sink, seed,
                                           stream);
  else
    enqueue_row_cached<Quantizer, Mode, row_cache_blocks>(p, s, padded_rows, src, row_scales,
                                                          amax_out, sink, seed, stream);
}

//! Enqueues the block kernel (or the pair kernel). `PairMinBlocks` / `TurboMinBlocks`: resident
//! CTAs per SM asked of ptxas for the pair kernel / the turbo block kernel (benchmark variants;
//! 0: no request, which is not the same as 1: ptxas then caps registers by its own heuristic).
//! The turbo block kernel asks for 2 CTAs (125 registers: QDQ at 8192 x 8192 bf16 took 71.7 /
//! 71.9 us with 2 against 74.2 / 74.3 us with 3, H200 runs of 2026-11-30 07:50 and 08:08 UTC;
//! docs/history/benchmarks.md). QDQ calls beyond one wave take the pipelined one-block kernel
//! instead (3 CTAs of 80 registers, the next block in flight): 8192 x 8192 bf16 71.5 -> 70.7
//! us, 16384 x 16384 273.4 -> 269.9 us, 4096 x 4096 20.6 -> 21.0 us (H200, 2026-11-30 15:45
//! UTC).
template <class Quantizer, int PairMinBlocks = 0, int TurboMinBlocks = 2, class T, class Sink>
inline void enqueue_block(const T* x, const tensor_shape& s, const scale_source<Quantizer>& src,
                          const Sink& sink, std::uint64_t seed, cudaStream_t stream) {
  constexpr int B = Quantizer::block_size;
  const std::uint32_t nkb = static_cast<std::uint32_t>(s.cols / B);
  const std::uint32_t total = nkb * static_cast<std::uint32_t>(s.rows);
  // pairs only for the fast path: stochastic rounding measured slower there (248 us against
  // 156 us at 8192 x 8192 bf16), its Philox state per block is larger
  // small calls (at most 128 blocks per SM) take the block kernel with one block per thread:
  // twice the threads of the pair kernel, half the latency chain each (isolated-call latency)
  const std::uint64_t sms = static_cast<std::uint64_t>(sm_count() > 0 ? sm_count() : 132);
  const bool small = small_call(static_cast<std::uint64_t>(total) * s.experts);
  // Larger calls start programmatically (`pdl_wait`): their CTAs take the SMs as the previous
  // kernel's CTAs retire. Back to back at 8192 x 8192 bf16 on the H200 (2026-11-30 15:22 UTC):
  // swizzled quantize 48.2 -> 47.2 us, QDQ 71.8 -> 70.9 us; isolated small calls measured
  // 0.1-0.2 us slower that way, so they launch as before.
  if constexpr (pair_blocks<T, B> && Sink::pairs && fast_path_applies<Quantizer>) {
    if (sink.pair_ok() && !small) {
      const std::uint32_t pairs = total / 2;
      // the octet walk (swizzled scales) covers the padding rows' pairs too
      const std::uint64_t work = std::max<std::uint64_t>(
          Sink::pads ? static_cast<std::uint64_t>(padded_rows_of(sink.layout, s.rows)) * (nkb / 2)
                     : pairs,
          sink.pad_count());
      constexpr auto kernel =
          pair_kernel<Quantizer, T, Sink, fast_path_applies<Quantizer>, PairMinBlocks>;
      const unsigned gx = grid_for<kernel>(block_threads, work, 8, s.experts);
      (void)launch_kernel(true, kernel, dim3(gx, static_cast<unsigned>(s.experts)),
                          dim3(block_threads), 0, stream, x, fast_divmod(nkb / 2), pairs, s.rows,
                          s.rstride(), s.estride(), src, sink, seed);
      return;
    }
  }
  constexpr int U = blocks_per_iteration<T, B>;
  constexpr auto kernel = block_kernel_for<Quantizer, T, Sink, TurboMinBlocks>();
  // one block per thread when that fits in one wave (small calls: shorter per-thread latency),
  // by the one-block instantiation (half the unrolled code of two, none of it idle)
  const std::uint64_t one_wave = sms *
                                 static_cast<std::uint64_t>(occupancy<kernel>(block_threads)) *
                                 block_threads / static_cast<std::uint64_t>(s.experts);
  const auto launch_small = [&](auto kernel, std::uint64_t items, auto... extra) {
    const unsigned gx = grid_for<decltype(kernel)::value>(
        block_threads, std::max<std::uint64_t>(items, sink.pad_count()), 8, s.experts);
    decltype(kernel)::
        value<<<dim3(gx, static_cast<unsigned>(s.experts)), block_threads, 0, stream>>>(
            x, fast_divmod(nkb), total, s.rows, s.rstride(), s.estride(), src, sink, extra...);
  };
  // Cold isolated 1 / 16 / 64 x 4096 bf16 calls on the H200 (2026-11-30 10:23 UTC): NVFP4
  // swizzled given 4.74 / 4.93 / 4.77 us with the one-block kernel against 5.06 / 5.12 / 5.06
  // without; MXFP4 swizzled 4.58 / 4.67 / 4.74 with the half-block kernel against 4.90 / 5.54 /
  // 5.38 without (docs/history/benchmarks.md, "Small calls, sixth session").
  if constexpr (half_blocks_apply<Quantizer, T, Sink>) {
    // small calls only (as measured): at most 128 blocks per SM
    if (small && 2ull * total <= one_wave) {
      launch_small(kernel_constant<half_block_kernel<Quantizer, T, Sink>>{}, 2ull * total);
      return;
    }
  }
  if constexpr (U > 1) {
    if (total <= one_wave) {
      launch_small(kernel_constant<block_kernel_for<Quantizer, T, Sink, TurboMinBlocks, 1>()>{},
                   total, seed);
      return;
    }
  }
  if constexpr (turbo_applies<Quantizer, T> && fast_path_applies<Quantizer> && Sink::wants_values) {
    // QDQ beyond one wave: one block per thread with the next one in flight
    if (total > one_wave) {
      constexpr auto k = block_kernel_turbo<Quantizer, T, Sink, 3, 1, true>;
      const unsigned gx = grid_for<k>(block_threads, total, 8, s.experts); // QDQ: no padding
      (void)launch_kernel(!small, k, dim3(gx, static_cast<unsigned>(s.experts)),
                          dim3(block_threads), 0, stream, x, fast_divmod(nkb), total, s.rows,
                          s.rstride(), s.estride(), src, sink, seed);
      return;
    }
  }
  const std::uint64_t items = total <= one_wave ? total : (total + U - 1) / U;
  const std::uint64_t work = std::max<std::uint64_t>(items, sink.pad_count());
  const unsigned gx = grid_for<kernel>(block_threads, work, 8, s.experts);
  (void)launch_kernel(!small, kernel, dim3(gx, static_cast<unsigned>(s.experts)),
                      dim3(block_threads), 0, stream, x, fast_divmod(nkb), total, s.rows,
                      s.rstride(), s.estride(), src, sink, seed);
}

//! The common dispatch of quantize / qdq over the global-scale modes, for the plain producer.
template <class Quantizer, class T, class Sink>
inline cudaError_t dispatch_plain(const T* x, const tensor_shape& s, const scale_args& args,
                                  tensor_scale* ts_out, int padded_rows, const Sink& sink,
                                  cudaStream_t stream) {
  using F = typename Quantizer::format;
  constexpr quant_options O = Quantizer::options;
  scale_source<Quantizer> src{args.given, args.given_count, args.amax_workspace, ts_out};
  if constexpr (F::has_tensor_scale && O.global == global_scale::per_row) {
    const plain_producer<T, F::block_size> p{x, s.rstride(), s.estride()};
    enqueue_row<Quantizer, row_mode::per_row>(p, s, padded_rows, src, ts_out, nullptr, sink,
                                              args.seed, stream);
  } else {
    if constexpr (F::has_tensor_scale && O.global == global_scale::per_tensor) {
      // the amax pass (nothing zeroed when one CTA covers an expert)
      const cudaError_t e = ::quads::kernels::tensor_amax(x, s, args.amax_workspace, stream);
      if (e != cudaSuccess) return e;
    }
    enqueue_block<Quantizer>(x, s, src, sink, args.seed, stream);
  }
  return after_launch();
}

} // namespace detail

//! Quantizes `x` (`[experts, rows, cols]` of `__nv_bfloat16`, `__half` or `float`, strides in
//! `shape`) into `out` (see `quantized_view`), with `Quantizer = block_quantizer<Format, Options>`
//! and scales in `Layout` (`linear_scales` or `swizzled_128x4`, per expert). The global scale
//! follows `Options.global` (see `scale_args`). Byte-identical to `reference::quantize<Format,
//! Options, Layout>` on the fp32 values of `x`.
//! Requires: `cols % block_size == 0`; `x`, `row_stride * sizeof(T)` and
//! `expert_stride * sizeof(T)` multiples of 16 bytes; `out.data` aligned to `block_size / 2`
//! bytes; swizzled `out.scales` 4-byte aligned; `rows * cols` per expert < 2^31;
//! `experts <= 65535`. Empty tensors (rows or cols 0) enqueue nothing.
//! Launches: given / none: 1 kernel; per_row: 1 kernel; per_tensor: the amax pass as in
//! `tensor_amax` (one kernel, or a zeroing step and the amax kernel), then the quantize kernel.
template <class Quantizer, scale_layout Layout = linear_scales, class T>
cudaError_t quantize(const T* x, const tensor_shape& shape, const quantized_view& out,
                     const scale_args& args = {}, cudaStream_t stream = nullptr) {
  static_assert(is_kernel_element<T>, "quads: element type must be __nv_bfloat16, __half or float");
  using F = typename Quantizer::format;
  constexpr int B = F::block_size;
  if (const char* why = detail::check_input(x, shape, B, detail::block_multiple_msg<Quantizer>()))
    return detail::fail(why);
  if (shape.rows == 0 || shape.cols == 0) return detail::ok();
  if (const char* why = detail::check_outputs<Quantizer, Layout>(out, args, shape))
    return detail::fail(why);
  const Layout layout{shape.rows, shape.cols / B};
  const detail::quant_sink<F, Layout> sink{out.data,      out.scales, layout,
                                           layout.size(), shape.rows, shape.cols / B};
  const int padded_rows = detail::padded_rows_of(layout, shape.rows);
  return detail::dispatch_plain<Quantizer>(x, shape, args, out.tensor_scales, padded_rows, sink,
                                           stream);
}

//! Fake quantization in one pass: `y = T(dequantize(quantize(x)))`, equal bit for bit to the
//! RNE cast of `reference::qdq` (fp32 output: equal to it). `y` has the strides of `x` and may be
//! `x` (in place). `tensor_scales` (optional for given; required for per_tensor / per_row: the
//! scales used, `experts` or `experts * rows` entries). Requirements as for `quantize`, plus `y`
//! 16-byte aligned.
template <class Quantizer, class T>
cudaError_t qdq(const T* x, T* y, const tensor_shape& shape, const scale_args& args = {},
                tensor_scale* tensor_scales = nullptr, cudaStream_t stream = nullptr) {
  static_assert(is_kernel_element<T>, "quads: element type must be __nv_bfloat16, __half or float");
  using F = typename Quantizer::format;
  constexpr quant_options O = Quantizer::options;
  constexpr int B = F::block_size;
  if (const char* why = detail::check_input(x, shape, B, detail::block_multiple_msg<Quantizer>()))
    return detail::fail(why);
  if (shape.rows == 0 || shape.cols == 0) return detail::ok();
  if (y == nullptr || !detail::aligned(y, 16))
    return detail::fail("quads: y must be non-null and 16-byte aligned");
  // Reuse the output checks with a dummy data view (qdq writes no codes).
  alignas(16) std::uint8_t dummy[16];
  const quantized_view fake{dummy, dummy, tensor_scales};
  if (F::has_tensor_scale && O.global != global_scale::given && tensor_scales == nullptr)
    return detail::fail("quads: qdq needs tensor_scales for per_tensor / per_row scales");
  if (const char* why = detail::check_outputs<Quantizer, linear_scales>(fake, args, shape))
    return detail::fail(why);
  const detail::qdq_sink<Quantizer, T> sink{y, shape.rstride(), shape.estride()};
  return detail::dispatch_plain<Quantizer>(x, shape, args, tensor_scales, shape.rows, sink, stream);
}

} // namespace quads::kernels
