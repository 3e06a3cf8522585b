// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief doctest main of the MoE GPU tests: exits 77 (meson SKIP) without a GPU or below
//!        sm_90, prints the device and the run's seed first.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <test_support/seed.hpp>

#include <cuda_runtime.h>

#include <cstdio>

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("quads MoE GPU tests: no CUDA device, skipping (exit 77)");
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major < 9) {
    std::puts("quads MoE GPU tests: need compute capability 9.0 or newer, skipping (exit 77)");
    return 77;
  }
  std::printf("quads MoE GPU tests on %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  (void)quads_test::seed();
  doctest::Context context(argc, argv);
  return context.run();
}
