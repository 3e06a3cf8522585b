// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Block-scaled schemes (`nvfp4`, `mxfp4`) and the `block_scaled_format` concept.
//!
//! A scheme says how many E2M1 values share a block scale, how that scale is stored, and whether a
//! second-level FP32 tensor scale exists. The quantization arithmetic lives in
//! `quant/block_quantizer.hpp` and is selected by `scale_type`, so a user scheme (say, NVFP4 with
//! 32-value blocks) only declares these facts.
#pragma once

#include <quads/config.hpp>

#include <quads/format/e2m1.hpp>
#include <quads/format/e4m3.hpp>
#include <quads/format/ue8m0.hpp>

#include <cuda/std/cstdint>
#include <cuda/std/type_traits>

#include <concepts>

namespace quads {

//! NVFP4: 16 E2M1 values per UE4M3 block scale, plus one FP32 tensor (or row) scale.
struct nvfp4 {
  using element_type = e2m1x2_t;
  using scale_type = ue4m3_t;
  static constexpr int block_size = 16;
  static constexpr bool has_tensor_scale = true;
  static constexpr const char* name = "nvfp4";
  QUADS_API static constexpr float decode_scale(::cuda::std::uint8_t b) noexcept {
    return decode_ue4m3(b);
  }
};

//! MXFP4 (OCP MX): 32 E2M1 values per UE8M0 (power-of-two) block scale, no tensor scale.
struct mxfp4 {
  using element_type = e2m1x2_t;
  using scale_type = ue8m0_t;
  static constexpr int block_size = 32;
  static constexpr bool has_tensor_scale = false;
  static constexpr const char* name = "mxfp4";
  QUADS_API static constexpr float decode_scale(::cuda::std::uint8_t b) noexcept {
    return decode_ue8m0(b);
  }
};

namespace detail {
template <class T>
concept has_element_type = requires { typename T::element_type; };
template <class T>
concept has_scale_type = requires { typename T::scale_type; };
template <class T>
concept has_block_size = requires {
  { T::block_size } -> std::convertible_to<int>;
};
template <class T>
concept has_tensor_scale_flag = requires {
  { T::has_tensor_scale } -> std::convertible_to<bool>;
};
template <class T>
concept has_decode_scale = requires(::cuda::std::uint8_t b) {
  { T::decode_scale(b) } -> std::same_as<float>;
};
} // namespace detail

//! A block-scaled FP4 scheme.
//! Requirements: `element_type` = `e2m1x2_t`; `scale_type` = `ue4m3_t` (two-level, with a tensor
//! scale) or `ue8m0_t` (power of two, no tensor scale); `block_size`, a positive multiple of 16;
//! `has_tensor_scale` (true exactly for UE4M3 scales); `decode_scale(uint8_t) -> float`.
template <class F>
concept block_scaled_format =
    detail::has_element_type<F> && std::same_as<typename F::element_type, e2m1x2_t> &&
    detail::has_scale_type<F> &&
    (std::same_as<typename F::scale_type, ue4m3_t> ||
     std::same_as<typename F::scale_type, ue8m0_t>) &&
    detail::has_block_size<F> && (F::block_size > 0 && F::block_size % 16 == 0) &&
    detail::has_tensor_scale_flag<F> &&
    (F::has_tensor_scale == std::same_as<typename F::scale_type, ue4m3_t>) &&
    detail::has_decode_scale<F>;

//! Names the first requirement of `block_scaled_format` that `F` misses, as a readable error.
template <class F>
consteval bool check_block_scaled_format() {
  static_assert(detail::has_element_type<F>, "quads: format lacks `using element_type = e2m1x2_t;`");
  static_assert(detail::has_scale_type<F>, "quads: format lacks `using scale_type = ue4m3_t or ue8m0_t;`");
  static_assert(detail::has_block_size<F>, "quads: format lacks `static constexpr int block_size`");
  static_assert(detail::has_tensor_scale_flag<F>, "quads: format lacks `static constexpr bool has_tensor_scale`");
  static_assert(detail::has_decode_scale<F>, "quads: format lacks `static float decode_scale(uint8_t)`");
  if constexpr (detail::has_element_type<F> && detail::has_scale_type<F> &&
                detail::has_block_size<F> && detail::has_tensor_scale_flag<F>) {
    static_assert(std::same_as<typename F::element_type, e2m1x2_t>,
                  "quads: format element_type must be e2m1x2_t");
    static_assert(std::same_as<typename F::scale_type, ue4m3_t> ||
                      std::same_as<typename F::scale_type, ue8m0_t>,
                  "quads: format scale_type must be ue4m3_t or ue8m0_t");
    static_assert(F::block_size > 0 && F::block_size % 16 == 0,
                  "quads: format block_size must be a positive multiple of 16");
    static_assert(F::has_tensor_scale == std::same_as<typename F::scale_type, ue4m3_t>,
                  "quads: has_tensor_scale must be true exactly for ue4m3_t block scales");
  }
  return true;
}

//! True for schemes whose block scale is UE4M3 relative to an FP32 tensor scale.
template <block_scaled_format F>
inline constexpr bool is_two_level = std::same_as<typename F::scale_type, ue4m3_t>;

} // namespace quads
