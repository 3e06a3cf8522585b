// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Per-block residual quantization (host + device): Q(x), r = x - QDQ(x), Q(r).
//!
//! Both quantizations go through `Quantizer::quantize` (the one QDQ path), so the host reference,
//! the GPU kernel and any fused user kernel produce the same bytes. The residual of an element is
//! `x - decode(code, scale, ts_x)` in fp32 (one rounding; the dequantized value is exact).
//!
//! The residual's second-level (FP32) scale, `residual_scale`:
//! - `shared` (default): the residual uses x's tensor scale. Then `[Q(x) | Q(r_S)]` carries one
//!   global scale, so one native W4A4 GEMM over K' = K + |S| with one `alpha = gs_a * gs_w`
//!   computes the compensated product (composition (a)); a separate scale cannot be folded into the
//!   E4M3 block scales without moving them by the same factor.
//! - `own`: the residual gets `make_tensor_scale(amax(r_S))` of its own (per tensor, or per row
//!   when x's scale is per row). Residual blocks are ~1/12 of x's block scale, so with a shared
//!   scale small blocks' residual scales fall into E4M3's subnormal range (2^-9 .. 2^-6); `own`
//!   lifts them by `amax(x) / amax(r_S)` (about 12x). It needs composition (b) with two alphas.
#pragma once

#include <quads/config.hpp>

#include <quads/detail/float_bits.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/options.hpp>
#include <quads/quant/tensor_scale.hpp>

#include <cuda/std/cstdint>

namespace quads::compensation {

//! Where the residual's second-level scale comes from (see the file comment).
enum class residual_scale : ::cuda::std::uint8_t { shared, own };

inline constexpr const char* to_string(residual_scale r) noexcept {
  return r == residual_scale::shared ? "shared" : "own";
}

//! Q(x) and, for a selected block, Q(r) of one block.
template <class Format>
struct rac_block {
  packed_block<Format> x;
  packed_block<Format> r;
};

//! Per-block RAC arithmetic for `Quantizer = block_quantizer<Format, Options>`.
template <class Quantizer>
struct residual_quantizer {
  using format = typename Quantizer::format;
  static constexpr int block_size = Quantizer::block_size;

  //! `r[i] = x[i] - dequantize(qx)[i]` (fp32).
  QUADS_API static constexpr void residual(const float (&x)[block_size],
                                           const packed_block<format>& qx, tensor_scale ts_x,
                                           float (&r)[block_size]) noexcept {
    for (int i = 0; i < block_size; ++i)
      r[i] = ::quads::detail::add_rn(x[i],
                                     -Quantizer::decode(Quantizer::code_at(qx, i), qx.scale, ts_x));
  }

  //! max |r| of the block (NaN ignored), for `residual_scale::own`.
  QUADS_API static constexpr float
  residual_amax(const float (&x)[block_size], tensor_scale ts_x,
                const typename Quantizer::random_bits& bits_x = {}) noexcept {
    const packed_block<format> qx = Quantizer::quantize(x, ts_x, bits_x);
    float r[block_size];
    residual(x, qx, ts_x, r);
    return Quantizer::amax(r);
  }

  //! Q(x), and Q(x - QDQ(x)) with `ts_r` (only meaningful when the block is selected).
  QUADS_API static constexpr rac_block<format>
  quantize(const float (&x)[block_size], tensor_scale ts_x, tensor_scale ts_r,
           const typename Quantizer::random_bits& bits_x = {},
           const typename Quantizer::random_bits& bits_r = {}) noexcept {
    rac_block<format> out{};
    out.x = Quantizer::quantize(x, ts_x, bits_x);
    float r[block_size];
    residual(x, out.x, ts_x, r);
    out.r = Quantizer::quantize(r, ts_r, bits_r);
    return out;
  }

  //! One block of a RAC operand with `residual_scale::shared`: Q(x) into `qx` and, when
  //! `selected`, Q(x - QDQ(x)) with the same scale into `qr` (untouched otherwise); random bits
  //! from `seed` at the blocks' stochastic indices `x_index` / `r_index`.
  QUADS_API static void quantize_shared(const float (&x)[block_size], tensor_scale ts,
                                        bool selected, ::cuda::std::uint64_t seed,
                                        ::cuda::std::uint64_t x_index,
                                        ::cuda::std::uint64_t r_index, packed_block<format>& qx,
                                        packed_block<format>& qr) noexcept {
    const auto bx = Quantizer::bits_for(seed, x_index);
    if (selected) {
      const rac_block<format> q = quantize(x, ts, ts, bx, Quantizer::bits_for(seed, r_index));
      qx = q.x;
      qr = q.r;
    } else {
      qx = Quantizer::quantize(x, ts, bx);
    }
  }
};

//! Stochastic-rounding block index of residual block `j` of `row`: the residual blocks follow all
//! `rows * blocks_per_row` blocks of x, so no Philox counter is used twice. (x's blocks keep the
//! index of `reference::quantize`, so Q(x) equals the plain quantization of x.)
QUADS_API constexpr ::cuda::std::uint64_t
residual_block_index(int rows, int blocks_per_row, int selected_blocks, int row, int j) noexcept {
  return static_cast<::cuda::std::uint64_t>(rows) *
             static_cast<::cuda::std::uint64_t>(blocks_per_row) +
         static_cast<::cuda::std::uint64_t>(row) *
             static_cast<::cuda::std::uint64_t>(selected_blocks) +
         static_cast<::cuda::std::uint64_t>(j);
}

namespace detail {
QUADS_API constexpr quant_options with_nearest_even(quant_options o) noexcept {
  o.round = rounding::nearest_even;
  return o;
}
} // namespace detail

//! The same quantizer with round-to-nearest-even (calibration statistics never draw random bits).
template <class Quantizer>
using nearest_twin =
    block_quantizer<typename Quantizer::format, detail::with_nearest_even(Quantizer::options)>;

} // namespace quads::compensation
