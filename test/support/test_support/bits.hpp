// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Bit-equality helpers: compare floats and byte buffers bit for bit, describe mismatches.
//!
//! `==` on floats says 0.0 == -0.0 and NaN != NaN; the library promises identical bits, so tests
//! compare bits. The helpers return the first mismatch (or -1) so a failing check can print where.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace quads_test {

inline std::uint32_t bits_of(float x) noexcept { return std::bit_cast<std::uint32_t>(x); }
inline float float_of(std::uint32_t u) noexcept { return std::bit_cast<float>(u); }
inline bool same_bits(float a, float b) noexcept { return bits_of(a) == bits_of(b); }

//! "1.5 (0x3fc00000)": value and bits, for failure messages.
inline std::string describe(float x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g (0x%08x)", static_cast<double>(x), bits_of(x));
  return buf;
}

//! Index of the first element whose bits differ, -1 if none; a size mismatch reports the shorter
//! length.
inline std::ptrdiff_t first_bit_mismatch(std::span<const float> a, std::span<const float> b) {
  const std::size_t n = a.size() < b.size() ? a.size() : b.size();
  for (std::size_t i = 0; i < n; ++i)
    if (!same_bits(a[i], b[i])) return static_cast<std::ptrdiff_t>(i);
  return a.size() == b.size() ? -1 : static_cast<std::ptrdiff_t>(n);
}

inline std::ptrdiff_t first_bit_mismatch(std::span<const std::uint8_t> a,
                                         std::span<const std::uint8_t> b) {
  const std::size_t n = a.size() < b.size() ? a.size() : b.size();
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return static_cast<std::ptrdiff_t>(i);
  return a.size() == b.size() ? -1 : static_cast<std::ptrdiff_t>(n);
}

//! A one-line report of the first mismatch of two float buffers ("" when bit-identical).
inline std::string mismatch_report(std::span<const float> a, std::span<const float> b) {
  const std::ptrdiff_t i = first_bit_mismatch(a, b);
  if (i < 0) return {};
  if (static_cast<std::size_t>(i) >= a.size() || static_cast<std::size_t>(i) >= b.size())
    return "sizes differ: " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  return "first mismatch at " + std::to_string(i) + ": " + describe(a[static_cast<std::size_t>(i)]) +
         " vs " + describe(b[static_cast<std::size_t>(i)]);
}

inline std::string mismatch_report(std::span<const std::uint8_t> a,
                                   std::span<const std::uint8_t> b) {
  const std::ptrdiff_t i = first_bit_mismatch(a, b);
  if (i < 0) return {};
  if (static_cast<std::size_t>(i) >= a.size() || static_cast<std::size_t>(i) >= b.size())
    return "sizes differ: " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  char buf[96];
  std::snprintf(buf, sizeof buf, "first mismatch at %td: 0x%02x vs 0x%02x", i,
                a[static_cast<std::size_t>(i)], b[static_cast<std::size_t>(i)]);
  return buf;
}

} // namespace quads_test
