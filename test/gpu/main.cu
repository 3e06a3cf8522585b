// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Entry point of the GPU suite: exits 77 (Meson's "skipped") when no CUDA device exists.
#define DOCTEST_CONFIG_IMPLEMENT
#include "gpu_test.cuh"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace quads::gpu_test {

namespace {
std::uint64_t make_seed() {
  if (const char* s = std::getenv("QUADS_SEED")) return std::strtoull(s, nullptr, 0);
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
         static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
}
} // namespace

std::uint64_t seed() {
  static const std::uint64_t s = make_seed();
  return s;
}

bool quick() {
  static const bool q = [] {
    const char* s = std::getenv("QUADS_GPU_QUICK");
    return s != nullptr && s[0] != '\0' && s[0] != '0';
  }();
  return q;
}

} // namespace quads::gpu_test

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::puts("quads GPU suite: no CUDA device found, skipping (exit 77)");
    return 77;
  }
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  std::printf("quads GPU suite on %s (sm_%d%d, %d SMs); seed 0x%llx (set QUADS_SEED to repeat)%s\n",
              p.name, p.major, p.minor, p.multiProcessorCount,
              static_cast<unsigned long long>(quads::gpu_test::seed()),
              quads::gpu_test::quick() ? "; QUADS_GPU_QUICK: reduced sizes" : "");
  std::fflush(stdout);
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
