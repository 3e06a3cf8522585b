// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Bit-preserving conversions between quads storage types and the CUDA Toolkit's
//! `__nv_fp4x2_e2m1`, `__nv_fp8_e4m3` and `__nv_fp8_e8m0` (CUDA 12.8+ headers, usable with g++).
//!
//! Available when `QUADS_HAS_CUDA_FP()` is 1 (the headers are reachable and
//! `QUADS_DISABLE_CUDA_FP_INTEROP` is not defined); otherwise this header declares nothing.
//! Conversions copy bits; they never round. Byte order matches: CUDA's first element of a
//! `__nv_fp4x2_e2m1` is its low nibble, as in `e2m1x2_t`.
#pragma once

#include <quads/config.hpp>

#include <quads/format/e2m1.hpp>
#include <quads/format/e4m3.hpp>
#include <quads/format/ue8m0.hpp>

#if QUADS_HAS_CUDA_FP()
#  include <cuda_fp4.h>
#  include <cuda_fp8.h>

namespace quads::interop {

QUADS_API __nv_fp4x2_e2m1 to_cuda(e2m1x2_t v) noexcept {
  __nv_fp4x2_e2m1 r;
  r.__x = v.bits;
  return r;
}
QUADS_API __nv_fp8_e4m3 to_cuda(e4m3_t v) noexcept {
  __nv_fp8_e4m3 r;
  r.__x = v.bits;
  return r;
}
//! UE4M3 scales travel as `__nv_fp8_e4m3` (cuBLAS reads the sign bit as unused).
QUADS_API __nv_fp8_e4m3 to_cuda(ue4m3_t v) noexcept { return to_cuda(e4m3_t{v.bits}); }
QUADS_API __nv_fp8_e8m0 to_cuda(ue8m0_t v) noexcept {
  __nv_fp8_e8m0 r;
  r.__x = v.bits;
  return r;
}

QUADS_API e2m1x2_t from_cuda(__nv_fp4x2_e2m1 v) noexcept { return {v.__x}; }
QUADS_API e4m3_t from_cuda(__nv_fp8_e4m3 v) noexcept { return {v.__x}; }
QUADS_API ue8m0_t from_cuda(__nv_fp8_e8m0 v) noexcept { return {v.__x}; }

} // namespace quads::interop
#endif
