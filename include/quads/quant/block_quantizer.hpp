// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The one QDQ path: block quantize, dequantize and fake-quantize (host + device).
//!
//! Overview: `block_quantizer<Format, Options>` turns one block of `Format::block_size` floats into
//! packed E2M1 codes plus one scale byte, and back. Every caller in quads (the host reference,
//! the GPU quantizers, trainer fake-quant, rollout dequantizing loaders) goes through these
//! functions, which is what makes trainer and rollout weights bit-identical.
//!
//! NVFP4, default options (TransformerEngine's recipe, `docs/formats.md`):
//! - scale byte `s = e4m3_rne_satfinite(amax_b * (S_enc * RN(1/6)))`, amax_b ignoring NaN;
//! - multiplier `m = min(1 / (float(s) * S_dec), FLT_MAX)` (IEEE division);
//! - code `q = e2m1(x * m)`; dequantized value `(e2m1(q) * float(s)) * S_dec` (the first product
//!   is exact, so there is one rounding).
//! MXFP4: `s = ue8m0(amax_b * RN(1/6))` (round-up, or floor(log2 amax_b) - 2 with the OCP rule),
//! `m = 2^(127 - s)` exactly, dequantized value `e2m1(q) * 2^(s - 127)`. With round-up, a block
//! amax above 3.5 * 2^126 gets byte 253 and its codes 4 and 6 dequantize to Inf (the format's
//! range ends there).
//! Four-over-six: both candidates use the same random bits under stochastic rounding; the 4
//! candidate wins only if its fp32 squared error (element order) is strictly lower, so NaN/Inf
//! blocks keep 6.
#pragma once

#include <quads/config.hpp>

#include <quads/detail/float_bits.hpp>
#include <quads/format/e2m1.hpp>
#include <quads/format/e4m3.hpp>
#include <quads/format/ue8m0.hpp>
#include <quads/quant/options.hpp>
#include <quads/quant/random_bits.hpp>
#include <quads/quant/tensor_scale.hpp>
#include <quads/scheme/schemes.hpp>

#include <cuda/std/cstdint>

#if !defined(__CUDA_ARCH__)
#  include <cstdio>
#  include <cstdlib>
#endif

namespace quads {

//! One quantized block: `block_size / 2` packed code bytes and the scale byte.
template <block_scaled_format Format>
struct packed_block {
  ::cuda::std::uint8_t codes[Format::block_size / 2];
  ::cuda::std::uint8_t scale;
};

//! A block scale and the multiplier that maps the block's inputs onto the E2M1 grid.
struct block_scale {
  ::cuda::std::uint8_t byte;
  float multiplier;
};

namespace detail {

//! `rcp.approx.ftz.f32` on the GPU. The host cannot reproduce it: stop loudly instead of guessing.
QUADS_API float rcp_approx(float x) noexcept {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  (void)x;
  std::fputs("quads: scale_math::rcp_approx is GPU-only (rcp.approx has no host equivalent)\n",
             stderr);
  std::abort();
#endif
}

} // namespace detail

//! Quantizer for one block of `Format` under `Options`.
//! Requirements: `Format` satisfies `block_scaled_format`.
//! Example:
//! @code
//!   float x[16] = {...};
//!   auto ts = quads::make_tensor_scale<quads::nvfp4>(tensor_amax);
//!   auto q  = quads::block_quantizer<quads::nvfp4>::quantize(x, ts);
//!   float y[16];
//!   quads::block_quantizer<quads::nvfp4>::dequantize(q, ts, y);
//! @endcode
template <class Format, quant_options Options = quant_options{}>
struct block_quantizer {
  static_assert(check_block_scaled_format<Format>());
  static_assert(Options.block_rule == block_scale_rule::amax_to_6 || is_two_level<Format>,
                "quads: four_over_six needs a UE4M3-scaled (two-level) format such as nvfp4");

  using format = Format;
  static constexpr int block_size = Format::block_size;
  static constexpr quant_options options = Options;
  using random_bits = block_random_bits<Format>;

  //! max |x| over n values, ignoring NaN (fmaxf semantics); Inf counts.
  QUADS_API static constexpr float amax(const float* x, int n = block_size) noexcept {
    float m = 0.0f;
    for (int i = 0; i < n; ++i) m = detail::max_num(m, detail::abs_bits(x[i]));
    return m;
  }

  //! The block scale that maps `amax_b` to `target` (6, or 4 for the 4/6 rule's second candidate).
  QUADS_API static constexpr block_scale scale_for(float amax_b, tensor_scale ts,
                                                   float target = e2m1_max) noexcept {
    if constexpr (is_two_level<Format>) {
      if constexpr (Options.math == scale_math::rcp_approx) {
        const ::cuda::std::uint8_t byte =
            encode_ue4m3(detail::mul_rn(ts.encode, detail::mul_rn(amax_b, detail::rcp_approx(target))));
        const float m = byte == 0 ? 0.0f
                                  : detail::rcp_approx(detail::mul_rn(
                                        decode_ue4m3(byte), detail::rcp_approx(ts.encode)));
        return {byte, m};
      } else {
        // RN(1/target) as a constant: nvcc does not fold __fdiv_rn, and it kept a division in
        // every kernel loop iteration
        constexpr float inv_max = detail::div_rn(1.0f, e2m1_max);
        constexpr float inv_four = detail::div_rn(1.0f, 4.0f);
        const float inv_target = target == e2m1_max ? inv_max
                                 : target == 4.0f   ? inv_four
                                                    : detail::div_rn(1.0f, target);
        const ::cuda::std::uint8_t byte =
            encode_ue4m3(detail::mul_rn(amax_b, detail::mul_rn(ts.encode, inv_target)));
        const float m = detail::rcp_rn_satfinite(detail::mul_rn(decode_ue4m3(byte), ts.decode));
        return {byte, m};
      }
    } else {
      ::cuda::std::uint8_t byte;
      if constexpr (Options.mx_rounding == ue8m0_rounding::round_up) {
        byte = encode_ue8m0_round_up(detail::mul_rn(amax_b, 1.0f / 6.0f));
      } else {  // shared exponent floor(log2 amax_b) - emax(E2M1 = 2), clamped at 2^-127; an
                // Inf amax takes the saturated exponent 0xFE first, so its byte is 0xFC
        const ::cuda::std::uint8_t e = encode_ue8m0_floor(amax_b);
        byte = e == 0xffu ? e : static_cast<::cuda::std::uint8_t>(e < 2u ? 0u : e - 2u);
      }
      return {byte, ue8m0_reciprocal(byte)};
    }
  }

  //! The random bits block `block_index` of a tensor uses under stochastic rounding: Philox-4x32-10
  //! keyed by `seed` at the counter rule of `draw_block_bits`; no bits (all zero) otherwise. Every
  //! caller (reference, kernels, trainer, RAC, epilogues) draws through this one rule.
  QUADS_API static constexpr random_bits bits_for(::cuda::std::uint64_t seed,
                                                  ::cuda::std::uint64_t block_index) noexcept {
    if constexpr (Options.round == rounding::stochastic) {
      return draw_block_bits<Format>(philox4x32_10{seed}, block_index);
    } else {
      (void)seed;
      (void)block_index;
      return {};
    }
  }

  //! Encodes one element with the block's multiplier; `rbits` (8 bits) only for stochastic.
  QUADS_API static constexpr ::cuda::std::uint8_t encode(float x, float multiplier,
                                                         ::cuda::std::uint32_t rbits = 0) noexcept {
    const float scaled = detail::mul_rn(x, multiplier);
    if constexpr (Options.round == rounding::stochastic) {
      return encode_e2m1_stochastic(scaled, rbits);
    } else {
      (void)rbits;
      return encode_e2m1(scaled);
    }
  }

  //! Dequantizes one code with its block's scale byte.
  QUADS_API static constexpr float decode(::cuda::std::uint8_t code, ::cuda::std::uint8_t scale,
                                          tensor_scale ts) noexcept {
    const float v = detail::mul_rn(decode_e2m1(code), Format::decode_scale(scale));  // exact
    if constexpr (is_two_level<Format>) {
      return detail::mul_rn(v, ts.decode);
    } else {
      (void)ts;
      return v;
    }
  }

  //! Quantizes a block. `ts` is ignored by schemes without a tensor scale; `bits` only matters
  //! for stochastic rounding (see `draw_block_bits`).
  QUADS_API static constexpr packed_block<Format> quantize(const float (&x)[block_size],
                                                           tensor_scale ts,
                                                           const random_bits& bits = {}) noexcept {
    const float amax_b = amax(x);
    packed_block<Format> out{};
    const block_scale s6 = scale_for(amax_b, ts);
    encode_all(x, s6, bits, out);
    if constexpr (Options.block_rule == block_scale_rule::four_over_six) {
      packed_block<Format> alt{};
      const block_scale s4 = scale_for(amax_b, ts, 4.0f);
      encode_all(x, s4, bits, alt);
      if (squared_error(x, alt, ts) < squared_error(x, out, ts)) return alt;
    }
    return out;
  }

  //! Dequantizes a block to fp32.
  QUADS_API static constexpr void dequantize(const packed_block<Format>& q, tensor_scale ts,
                                             float (&out)[block_size]) noexcept {
    for (int i = 0; i < block_size; ++i) out[i] = decode(code_at(q, i), q.scale, ts);
  }

  //! Fake quantization: `out = dequantize(quantize(x))`, in place allowed.
  QUADS_API static constexpr void qdq(const float (&x)[block_size], tensor_scale ts,
                                      float (&out)[block_size],
                                      const random_bits& bits = {}) noexcept {
    const packed_block<Format> q = quantize(x, ts, bits);
    dequantize(q, ts, out);
  }

  //! Code of element i of a packed block (element 2j in the low nibble of byte j).
  QUADS_API static constexpr ::cuda::std::uint8_t code_at(const packed_block<Format>& q,
                                                          int i) noexcept {
    return static_cast<::cuda::std::uint8_t>((q.codes[i >> 1] >> ((i & 1) * 4)) & 0xfu);
  }

private:
  QUADS_API static constexpr void encode_all(const float (&x)[block_size], block_scale s,
                                             const random_bits& bits,
                                             packed_block<Format>& out) noexcept {
    out.scale = s.byte;
    for (int i = 0; i < block_size; i += 2) {
      const ::cuda::std::uint8_t lo = encode(x[i], s.multiplier, bits[i / 4] >> (8 * (i % 4)));
      const ::cuda::std::uint8_t hi =
          encode(x[i + 1], s.multiplier, bits[(i + 1) / 4] >> (8 * ((i + 1) % 4)));
      out.codes[i / 2] = pack_e2m1x2(lo, hi).bits;
    }
  }

  //! Sum of squared dequantization errors in fp32, in element order (the 4/6 criterion).
  QUADS_API static constexpr float squared_error(const float (&x)[block_size],
                                                 const packed_block<Format>& q,
                                                 tensor_scale ts) noexcept {
    float err = 0.0f;
    for (int i = 0; i < block_size; ++i) {
      const float d = x[i] - decode(code_at(q, i), q.scale, ts);
      err = detail::add_rn(err, detail::mul_rn(d, d));
    }
    return err;
  }
};

} // namespace quads
