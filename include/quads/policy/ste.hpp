// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Straight-through gradient rules for fake quantization: `ste::identity`, `ste::clipped`.
//!
//! Fake quantization `q = QDQ(x)` is piecewise constant, so its true derivative is zero almost
//! everywhere. A straight-through estimator (STE) replaces it: the gradient that reaches the
//! master value is `dL/dx = factor(x, m) * dL/dq`, where `m` is the multiplier of `x`'s block
//! (`block_quantizer::scale_for(...).multiplier`, the factor that maps the block onto the E2M1
//! grid; see `block_multiplier`). A factor of exactly 0 gives +0 (even for an Inf/NaN `dL/dq`).
//!
//! - `ste::identity` (default): factor 1, `dL/dx = dL/dq`.
//! - `ste::clipped`: factor 0 where the element *saturated*, 1 elsewhere. Saturated means
//!   `!(|mul_rn(x, m)| <= 6)`: the scaled value lies beyond the largest E2M1 magnitude, so its
//!   code was clipped to ±6 rather than rounded (or `x * m` is NaN, which E2M1 also maps to +6).
//!   Blocks whose scale decodes to 0 count as unsaturated (`block_multiplier` reads m = 0).
//!   `x * m` is the very product `block_quantizer::encode` rounds, so the mask is exact, not an
//!   estimate. Scaled values in (5, 6] round to 6 without clipping and keep their gradient.
//!   Where saturation happens: NVFP4 whose E4M3 block scale rounded down (then `|x m|` can reach
//!   about 6.4), any block whose scale saturated (a `given` tensor scale too small), MXFP4 with the
//!   OCP floor rule (scaled values up to 8), and Inf inputs.
//!
//! A user rule is a type with `name`, `needs_multiplier` and `factor(x, m)`; it satisfies
//! `straight_through_estimator` and works on the host and in the GPU mask kernel.
#pragma once

#include <quads/config.hpp>

#include <quads/detail/float_bits.hpp>
#include <quads/format/e2m1.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/options.hpp>
#include <quads/quant/tensor_scale.hpp>

#include <concepts>

namespace quads {

namespace ste {

//! dL/dx = dL/dQDQ(x): the gradient passes through the fake quantization unchanged.
struct identity {
  static constexpr const char* name = "identity";
  static constexpr bool needs_multiplier = false;  //!< no per-block work in the backward pass
  QUADS_API static constexpr float factor(float x, float multiplier) noexcept {
    (void)x;
    (void)multiplier;
    return 1.0f;
  }
};

//! dL/dx = 0 where `x` saturated (`!(|x * m| <= 6)`), else dL/dQDQ(x).
struct clipped {
  static constexpr const char* name = "clipped";
  static constexpr bool needs_multiplier = true;
  //! True where E2M1 encoding clipped the scaled value (or saw NaN): the element saturated.
  QUADS_API static constexpr bool saturated(float x, float multiplier) noexcept {
    return !(detail::abs_bits(detail::mul_rn(x, multiplier)) <= e2m1_max);
  }
  QUADS_API static constexpr float factor(float x, float multiplier) noexcept {
    return saturated(x, multiplier) ? 0.0f : 1.0f;
  }
};

} // namespace ste

namespace detail {
template <class S>
concept ste_has_name = requires {
  { S::name } -> std::convertible_to<const char*>;
};
template <class S>
concept ste_has_needs_multiplier = requires {
  { S::needs_multiplier } -> std::convertible_to<bool>;
};
template <class S>
concept ste_has_factor = requires(float x, float m) {
  { S::factor(x, m) } -> std::same_as<float>;
};
} // namespace detail

//! A straight-through gradient rule.
//! Requirements: `static constexpr const char* name`; `static constexpr bool needs_multiplier`
//! (false only if `factor` ignores the multiplier); `static float factor(float x, float m)`, a
//! host+device function giving `dL/dx / dL/dQDQ(x)` for master value `x` in a block of
//! multiplier `m`.
template <class S>
concept straight_through_estimator =
    detail::ste_has_name<S> && detail::ste_has_needs_multiplier<S> && detail::ste_has_factor<S>;

//! Names the first requirement of `straight_through_estimator` that `S` misses.
template <class S>
consteval bool check_straight_through_estimator() {
  static_assert(detail::ste_has_name<S>,
                "quads: STE rule lacks `static constexpr const char* name`");
  static_assert(detail::ste_has_needs_multiplier<S>,
                "quads: STE rule lacks `static constexpr bool needs_multiplier`");
  static_assert(detail::ste_has_factor<S>,
                "quads: STE rule lacks `static float factor(float x, float multiplier)`");
  return true;
}

static_assert(straight_through_estimator<ste::identity> &&
              straight_through_estimator<ste::clipped>);

//! The multiplier that `Quantizer::quantize` applied to the elements of block `x` (tensor scale
//! `ts`, random bits `bits` for stochastic rounding), as the STE rules see it. With
//! `four_over_six` it is the multiplier of the candidate the block kept (told apart by its scale
//! byte; candidates with equal bytes have equal multipliers). Exception: a block whose kept scale
//! byte decodes to 0 (NVFP4 byte 0x00, a block far below the tensor amax) dequantizes to zeros
//! whatever its codes, so nothing in it was clipped; its multiplier reads 0 here (the
//! `rcp_approx` convention) instead of the FLT_MAX that `scale_for` uses to encode it, so
//! `ste::clipped` keeps those gradients. Host + device.
template <class Quantizer>
QUADS_API constexpr float
block_multiplier(const float (&x)[Quantizer::block_size], tensor_scale ts,
                 const typename Quantizer::random_bits& bits = {}) noexcept {
  using F = typename Quantizer::format;
  const float amax_b = Quantizer::amax(x);
  block_scale kept = Quantizer::scale_for(amax_b, ts);
  if constexpr (Quantizer::options.block_rule == block_scale_rule::four_over_six) {
    const auto q = Quantizer::quantize(x, ts, bits);
    if (q.scale != kept.byte) kept = Quantizer::scale_for(amax_b, ts, 4.0f);
  } else {
    (void)bits;
  }
  return F::decode_scale(kept.byte) == 0.0f ? 0.0f : kept.multiplier;
}

//! Applies rule `Ste` to one gradient value: +0 where the factor is 0, else `g * factor`.
template <straight_through_estimator Ste, class T>
QUADS_API constexpr T apply_ste(T g, float x, float multiplier) noexcept {
  const float f = Ste::factor(x, multiplier);
  if (f == 0.0f) return T(0);
  if (f == 1.0f) return g;
  return g * static_cast<T>(f);
}

} // namespace quads
