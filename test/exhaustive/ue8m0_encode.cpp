// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Exhaustive: quads' UE8M0 encoders equal CUDA's host `__nv_cvt_float_to_e8m0` with
//! __NV_SATFINITE: encode_ue8m0_round_up with cudaRoundPosInf and encode_ue8m0_floor with
//! cudaRoundZero, for all 2^31 non-negative fp32 patterns (NaN and +Inf included).
//!
//! The quads encoders take |x|. CUDA's RP path also converts |x|, and its RZ path drops the sign
//! when it keeps the exponent bits, so the 2^31 sign-set patterns are checked as separate tallies.

#include "sweep.hpp"

#include <quads/format/ue8m0.hpp>

#include <cuda_fp8.h>

#include <cstdio>

int main() {
  namespace qx = quads::exhaustive;
  qx::print_header("exhaustive-ue8m0");
  const qx::stopwatch clock;
  const auto r = qx::sweep<4>(0, std::uint64_t{1} << 32, [](std::uint64_t i, qx::tally* out) {
    const auto u = static_cast<std::uint32_t>(i);
    const float x = quads::detail::from_bits(u);
    const unsigned neg = u >> 31;
    out[0 + 2 * neg].check(i, quads::encode_ue8m0_round_up(x),
                           __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf));
    out[1 + 2 * neg].check(i, quads::encode_ue8m0_floor(x),
                           __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero));
  });
  bool ok = qx::report(
      "encode_ue8m0_round_up(x) == __nv_cvt_float_to_e8m0(x, SATFINITE, RP), x >= +0", r[0]);
  ok &= qx::report(
      "encode_ue8m0_floor(x) == __nv_cvt_float_to_e8m0(x, SATFINITE, RZ), x >= +0", r[1]);
  ok &= qx::report(
      "encode_ue8m0_round_up(x) == __nv_cvt_float_to_e8m0(x, SATFINITE, RP), sign set", r[2]);
  ok &= qx::report(
      "encode_ue8m0_floor(x) == __nv_cvt_float_to_e8m0(x, SATFINITE, RZ), sign set", r[3]);
  std::printf("time %.1f s\n", clock.seconds());
  return ok ? 0 : 1;
}
