// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The test seed (QUADS_SEED or the clock, printed once) and per-stream random engines.
//!
//! Every random input in the tests comes from `quads_test::rng("stream name")`. The engine of a
//! stream depends only on the run's seed and the stream's name, so a failure found with
//! `QUADS_SEED=<n>` reproduces even when a single test case is run (doctest `-tc=`).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string_view>

namespace quads_test {

//! SplitMix64 finaliser: spreads nearby seeds over the whole 64-bit range.
constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

//! FNV-1a of a stream name.
constexpr std::uint64_t hash_name(std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

//! The run's seed: `QUADS_SEED` (decimal or 0x-hex) if set, else from the clock. Printed to
//! stderr on first use. A malformed `QUADS_SEED` stops the run rather than silently changing
//! what is tested.
inline std::uint64_t seed() {
  static const std::uint64_t value = [] {
    const char* env = std::getenv("QUADS_SEED");
    std::uint64_t s = 0;
    const char* origin = "QUADS_SEED";
    if (env != nullptr && *env != '\0') {
      char* end = nullptr;
      s = std::strtoull(env, &end, 0);
      if (end == env || *end != '\0') {
        std::fprintf(stderr, "quads tests: QUADS_SEED='%s' is not an unsigned integer\n", env);
        std::exit(2);
      }
    } else {
      origin = "clock";
      s = mix64(static_cast<std::uint64_t>(
          std::chrono::high_resolution_clock::now().time_since_epoch().count()));
    }
    std::fprintf(stderr, "quads tests: seed %llu (from %s); reproduce with QUADS_SEED=%llu\n",
                 static_cast<unsigned long long>(s), origin, static_cast<unsigned long long>(s));
    return s;
  }();
  return value;
}

//! A 64-bit Mersenne Twister for one named stream of the run.
inline std::mt19937_64 rng(std::string_view stream) {
  return std::mt19937_64{mix64(seed() ^ mix64(hash_name(stream)))};
}

//! A 64-bit value derived from the run's seed for a named purpose (e.g. a Philox seed).
inline std::uint64_t derived_seed(std::string_view stream) { return mix64(seed() + hash_name(stream)); }

} // namespace quads_test
