// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Exhaustive over rbits: quads::encode_e2m1_stochastic(x, rbits) for all 256 values of
//! the 8 random bits, over a dense set of x in [-8, 8] plus specials, checked against exact
//! properties (there is no CUDA host oracle for stochastic rounding).
//!
//! For |x| between grid neighbours lo <= |x| <= hi (lo = hi on a grid point; lo = hi = 6 for
//! |x| >= 6, the saturation), with f = 256 * (|x| - lo) / (hi - lo) computed exactly:
//! 1. every output is lo or hi with the sign bit of x (so -0.0 and tiny negatives give 0x8);
//! 2. the magnitude is non-decreasing in rbits;
//! 3. the number of rbits values that give hi is exactly floor(f) when |x| >= 0.25: there the
//!    fp32 sum t = |x| + rbits * (hi - lo) / 256 is exact whenever t < hi, because |x| and t lie
//!    in one binade ([0.25, 0.5), [0.5, 1), [1, 2), [2, 4) or [4, 8)). Below 0.25 the sum can
//!    leave |x|'s binade and round up onto 0.5 from within half an ulp, which adds at most one
//!    round-up: the count is floor(f) or ceil(f) (both occur; the test prints how often).
//!    So for |x| <= 6, E[output] is within (hi - lo) / 256 of |x| (unbiased up to the 8-bit
//!    resolution);
//! 4. rbits = 0 is round-toward-zero: equal to CUDA's `__nv_cvt_float_to_fp4(x, __NV_E2M1,
//!    cudaRoundZero)` (which saturates to ±6 and maps NaN to +6 like quads);
//! 5. only the low 8 bits of rbits are used;
//! 6. NaN gives +6 (0x7) for every rbits.
//!
//! The dense set: every `stride`-th fp32 pattern in [0, 8] starting at a seeded offset
//! (QUADS_SEED or the time, printed), plus ±64 patterns around each rounding threshold
//! lo + k * (hi - lo) / 256 (k = 0..256) of every interval, the smallest subnormals, and specials
//! above 8, Inf and NaNs. Each pattern is checked with both signs.

#include "sweep.hpp"

#include <quads/format/e2m1.hpp>

#include <cuda_fp4.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

namespace qx = quads::exhaustive;
using quads::detail::from_bits;
using quads::detail::to_bits;

constexpr std::uint32_t eight_bits = 0x41000000u;  // 8.0f
constexpr std::uint64_t stride = 53;               // prime, so every mantissa residue is hit
constexpr int window = 64;

enum check : std::size_t { neighbours, monotone, count, rz_oracle, high_bits, nan_rule, checks };

// Independent grid table (not quads' decoder) for the neighbours of |x|.
constexpr double grid[] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

struct bracket {
  unsigned lo_code, hi_code;
  double lo, hi;
};
bracket neighbours_of(double a) {
  if (a >= 6.0) return {7, 7, 6.0, 6.0};
  unsigned k = 0;
  while (k + 1 < 8 && grid[k + 1] <= a) ++k;
  if (grid[k] == a) return {k, k, a, a};
  return {k, k + 1, grid[k], grid[k + 1]};
}

std::uint64_t seed_from_env_or_time() {
  if (const char* s = std::getenv("QUADS_SEED"); s != nullptr && *s != '\0')
    return std::strtoull(s, nullptr, 0);
  return static_cast<std::uint64_t>(
      std::chrono::system_clock::now().time_since_epoch().count());
}

std::vector<std::uint32_t> extra_patterns() {
  std::vector<std::uint32_t> v;
  auto around = [&](float c) {
    const auto p = static_cast<std::int64_t>(to_bits(c));
    for (std::int64_t d = -window; d <= window; ++d)
      if (p + d >= 0 && p + d <= eight_bits) v.push_back(static_cast<std::uint32_t>(p + d));
  };
  for (std::size_t k = 0; k + 1 < 8; ++k)
    for (int j = 0; j <= 256; ++j)
      around(static_cast<float>(grid[k] + (grid[k + 1] - grid[k]) * j / 256.0));
  around(8.0f);
  for (std::uint32_t p = 0; p < 4096; ++p) v.push_back(p);  // +0 and the smallest subnormals
  for (std::uint32_t p : {0x41000001u, 0x41200000u, 0x4b800000u, 0x7f7fffffu, 0x7f800000u,
                          0x7f800001u, 0x7fc00000u, 0x7fffffffu})
    v.push_back(p);
  return v;
}

} // namespace

int main() {
  const std::uint64_t seed = seed_from_env_or_time();
  const std::uint64_t offset = seed % stride;
  const std::uint64_t strided = (eight_bits - offset) / stride + 1;
  const std::vector<std::uint32_t> extra = extra_patterns();
  std::printf("exhaustive-e2m1-stochastic: %u threads, QUADS_SEED=%llu (offset %llu, stride %llu)"
              ", %llu strided + %zu targeted patterns, x2 signs, x256 rbits\n",
              qx::thread_count(), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(offset), static_cast<unsigned long long>(stride),
              static_cast<unsigned long long>(strided), extra.size());

  std::atomic<std::uint64_t> ceil_counts{0};
  const qx::stopwatch clock;
  const auto r = qx::sweep<checks>(0, strided + extra.size(), [&](std::uint64_t i, qx::tally* out) {
    const std::uint32_t pos = i < strided ? static_cast<std::uint32_t>(offset + i * stride)
                                          : extra[i - strided];
    for (std::uint32_t u : {pos, pos | 0x80000000u}) {
      const float x = from_bits(u);
      std::uint8_t code[256];
      for (unsigned rb = 0; rb < 256; ++rb) code[rb] = quads::encode_e2m1_stochastic(x, rb);

      // 5. the upper 24 bits of rbits are ignored
      for (unsigned rb : {0u, 1u, 127u, 128u, 254u, 255u}) {
        const std::uint32_t noisy = rb | ((u * 0x9e3779b9u) & 0xffffff00u) | 0x80000000u;
        out[high_bits].check(u, quads::encode_e2m1_stochastic(x, noisy), code[rb]);
      }
      // 4. rbits = 0 is round-toward-zero, which CUDA's host function implements
      out[rz_oracle].check(u, code[0], __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundZero));

      if (quads::detail::is_nan(x)) {  // 6.
        unsigned bad = 0;
        for (unsigned rb = 0; rb < 256; ++rb) bad |= code[rb] ^ 0x7u;
        out[nan_rule].check(u, bad, 0);
        continue;
      }
      const double a = std::fabs(static_cast<double>(x));
      const bracket b = neighbours_of(a);
      const unsigned sign = (u >> 31) << 3;

      // 1. one of the two neighbours, sign kept; 2. monotone; counted as one input each
      std::uint64_t bad_code = 0, bad_order = 0;
      unsigned up = 0;
      for (unsigned rb = 0; rb < 256; ++rb) {
        const unsigned c = code[rb];
        const bool ok = (c & 8u) == sign && ((c & 7u) == b.lo_code || (c & 7u) == b.hi_code);
        if (!ok && bad_code == 0) bad_code = 0x10000u | (rb << 8) | c;
        if (rb > 0 && (c & 7u) < (code[rb - 1] & 7u) && bad_order == 0)
          bad_order = 0x10000u | (rb << 8) | c;
        up += (b.hi_code != b.lo_code && (c & 7u) == b.hi_code) ? 1u : 0u;
      }
      out[neighbours].check(u, bad_code, 0);
      out[monotone].check(u, bad_order, 0);

      // 3. round-up count against f = 256 (a - lo) / (hi - lo), exact in double
      const double f = b.hi == b.lo ? 0.0 : 256.0 * (a - b.lo) / (b.hi - b.lo);
      const auto fl = static_cast<unsigned>(std::floor(f));
      const auto cl = static_cast<unsigned>(std::ceil(f));
      if (a < 0.25 && up == cl && cl != fl) {
        ceil_counts.fetch_add(1, std::memory_order_relaxed);
        out[count].check(u, up, cl);
      } else {
        out[count].check(u, up, fl);
      }
    }
  });
  std::printf("(mismatch values: neighbours/monotone show 0x1RRCC = rbits RR gave code CC)\n");
  bool ok = qx::report("output in {lo, hi} of |x| (6 when |x| >= 6) with the sign of x, all rbits",
                       r[neighbours], 8, 5);
  ok &= qx::report("magnitude non-decreasing in rbits", r[monotone], 8, 5);
  ok &= qx::report("#round-ups == floor(f) for |x| >= 0.25, in {floor(f), ceil(f)} below",
                   r[count], 8, 3);
  ok &= qx::report("rbits = 0 equals __nv_cvt_float_to_fp4(x, E2M1, cudaRoundZero)",
                   r[rz_oracle], 8, 2);
  ok &= qx::report("bits 8..31 of rbits ignored (6 rbits values per x)", r[high_bits], 8, 2);
  ok &= qx::report("NaN -> 0x7 for all rbits", r[nan_rule], 8, 2);
  std::printf("info: %llu inputs (all with |x| < 0.25) had ceil(f) != floor(f) round-ups "
              "because the fp32 sum rounded up onto 0.5\n",
              static_cast<unsigned long long>(ceil_counts.load()));
  std::printf("time %.1f s\n", clock.seconds());
  return ok ? 0 : 1;
}
