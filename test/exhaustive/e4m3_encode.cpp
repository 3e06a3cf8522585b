// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Exhaustive: quads::encode_e4m3(x) equals CUDA's host
//! `__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)` for all 2^32 fp32 bit patterns, and
//! encode_ue4m3(x) is that byte with the sign bit cleared.
//!
//! UE4M3 is specified for non-negative inputs (the brief's check); for negative inputs quads
//! encodes |x|, which is the same byte because the oracle is sign-symmetric up to NaN (whose
//! code 0x7F/0xFF clears to 0x7F either way), so that is checked as a second tally.

#include "sweep.hpp"

#include <quads/format/e4m3.hpp>

#include <cuda_fp8.h>

#include <cstdio>

int main() {
  namespace qx = quads::exhaustive;
  qx::print_header("exhaustive-e4m3");
  const qx::stopwatch clock;
  const auto r = qx::sweep<3>(0, std::uint64_t{1} << 32, [](std::uint64_t i, qx::tally* out) {
    const auto u = static_cast<std::uint32_t>(i);
    const float x = quads::detail::from_bits(u);
    const unsigned want = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    out[0].check(i, quads::encode_e4m3(x), want);
    out[(u >> 31) ? 2 : 1].check(i, quads::encode_ue4m3(x), want & 0x7fu);
  });
  bool ok = qx::report(
      "encode_e4m3(x) == __nv_cvt_float_to_fp8(x, SATFINITE, E4M3), all 2^32 patterns", r[0]);
  ok &= qx::report("encode_ue4m3(x) == encode_e4m3 oracle(x) & 0x7f, all 2^31 x >= +0 patterns",
                   r[1]);
  ok &= qx::report("encode_ue4m3(x) == encode_e4m3 oracle(x) & 0x7f, all 2^31 sign-set patterns",
                   r[2]);
  std::printf("time %.1f s\n", clock.seconds());
  return ok ? 0 : 1;
}
