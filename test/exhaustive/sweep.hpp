// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Threaded sweeps over integer input ranges and mismatch bookkeeping shared by the
//! exhaustive codec tests (each test is its own executable with a plain `main`).
//!
//! A sweep splits [begin, end) into chunks handed out through an atomic counter to
//! `std::thread::hardware_concurrency()` threads (override with QUADS_THREADS). Each thread keeps
//! its own tally; a thread takes chunks in increasing order, so its first recorded mismatches are
//! its smallest inputs and the merged list holds the smallest inputs overall.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace quads::exhaustive {

//! One disagreement: the input (fp32 bits or a code), what quads gave and what the oracle gave.
struct mismatch {
  std::uint64_t input;
  std::uint64_t got;
  std::uint64_t want;
};

inline constexpr std::size_t kept_mismatches = 8;

//! Per-thread (and merged) result of one check.
struct tally {
  std::uint64_t inputs = 0;
  std::uint64_t mismatches = 0;
  std::vector<mismatch> first;

  void record(std::uint64_t input, std::uint64_t got, std::uint64_t want) {
    ++mismatches;
    if (first.size() < kept_mismatches) first.push_back({input, got, want});
  }
  //! Counts one input and records it when `got != want`.
  void check(std::uint64_t input, std::uint64_t got, std::uint64_t want) {
    ++inputs;
    if (got != want) [[unlikely]]
      record(input, got, want);
  }
  void merge(const tally& o) {
    inputs += o.inputs;
    mismatches += o.mismatches;
    first.insert(first.end(), o.first.begin(), o.first.end());
    std::sort(first.begin(), first.end(),
              [](const mismatch& a, const mismatch& b) { return a.input < b.input; });
    if (first.size() > kept_mismatches) first.resize(kept_mismatches);
  }
};

inline unsigned thread_count() {
  if (const char* s = std::getenv("QUADS_THREADS"); s != nullptr && std::atoi(s) > 0)
    return static_cast<unsigned>(std::atoi(s));
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1u : n;
}

//! Calls `body(i, tallies)` for every i in [begin, end) on all threads, where `tallies` is the
//! thread's own array of `Checks` tallies; returns the merged tallies.
template <std::size_t Checks, class Body>
std::vector<tally> sweep(std::uint64_t begin, std::uint64_t end, Body body) {
  constexpr std::uint64_t chunk = std::uint64_t{1} << 18;
  const unsigned n = thread_count();
  std::atomic<std::uint64_t> next{begin};
  std::vector<std::vector<tally>> local(n, std::vector<tally>(Checks));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < n; ++t) {
    pool.emplace_back([&, t] {
      tally* out = local[t].data();
      for (;;) {
        const std::uint64_t lo = next.fetch_add(chunk);
        if (lo >= end) break;
        const std::uint64_t hi = std::min(end, lo + chunk);
        for (std::uint64_t i = lo; i < hi; ++i) body(i, out);
      }
    });
  }
  for (auto& th : pool) th.join();
  std::vector<tally> merged(Checks);
  for (const auto& l : local)
    for (std::size_t c = 0; c < Checks; ++c) merged[c].merge(l[c]);
  return merged;
}

//! Prints one check's summary and its first mismatches; returns true when it passed.
inline bool report(const char* what, const tally& r, int input_hex_digits = 8,
                   int value_hex_digits = 2) {
  std::printf("%-4s %s\n     inputs=%llu mismatches=%llu\n", r.mismatches ? "FAIL" : "ok", what,
              static_cast<unsigned long long>(r.inputs),
              static_cast<unsigned long long>(r.mismatches));
  for (const mismatch& m : r.first)
    std::printf("     input=0x%0*llx quads=0x%0*llx oracle=0x%0*llx\n", input_hex_digits,
                static_cast<unsigned long long>(m.input), value_hex_digits,
                static_cast<unsigned long long>(m.got), value_hex_digits,
                static_cast<unsigned long long>(m.want));
  // An empty check proves nothing; treat it as a failure of the test itself.
  if (r.inputs == 0) std::printf("     (no inputs were checked)\n");
  return r.mismatches == 0 && r.inputs > 0;
}

//! Wall-clock stopwatch for the per-check timings the tests print.
class stopwatch {
 public:
  stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

inline void print_header(const char* test) {
  std::printf("%s: %u threads\n", test, thread_count());
}

} // namespace quads::exhaustive
