// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Exhaustive: quads::encode_e2m1(x) equals CUDA's host
//! `__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)` for all 2^32 fp32 bit patterns.
//!
//! The CUDA host function is the oracle: it widens to double and rounds with its own code path,
//! and its device twin `cvt.rn.satfinite.e2m1x2.f32` is documented to behave the same.

#include "sweep.hpp"

#include <quads/format/e2m1.hpp>

#include <cuda_fp4.h>

#include <cstdio>

int main() {
  namespace qx = quads::exhaustive;
  qx::print_header("exhaustive-e2m1");
  const qx::stopwatch clock;
  const auto r = qx::sweep<1>(0, std::uint64_t{1} << 32, [](std::uint64_t i, qx::tally* out) {
    const float x = quads::detail::from_bits(static_cast<std::uint32_t>(i));
    const unsigned got = quads::encode_e2m1(x);
    const unsigned want = __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest);
    out[0].check(i, got, want);
  });
  const bool ok = qx::report(
      "encode_e2m1(x) == __nv_cvt_float_to_fp4(x, E2M1, RN), all 2^32 patterns", r[0]);
  std::printf("time %.1f s\n", clock.seconds());
  return ok ? 0 : 1;
}
