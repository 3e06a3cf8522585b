// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The main of the GPU doctest binaries: exits 77 (meson's SKIP) without a device of the
//!        suite's compute capability, else prints the device and the run's seed and runs doctest.
//!
//! Use in the one translation unit that defines `DOCTEST_CONFIG_IMPLEMENT`:
//! @code
//!   #define DOCTEST_CONFIG_IMPLEMENT
//!   #include <test_support/gpu_main.hpp>
//!   int main(int argc, char** argv) { return quads_test::gpu_main(argc, argv, "MoE", {9}); }
//! @endcode
#pragma once

#include <doctest/doctest.h>

#include <test_support/seed.hpp>

#include <cuda_runtime.h>

#include <cstdio>

namespace quads_test {

//! The compute capabilities (major) a suite runs on, and how to say it when skipping.
struct device_requirement {
  int min_major = 0;
  int max_major = 1 << 20;
  const char* what = nullptr; //!< e.g. "an sm_90 GPU (wgmma)"; default: "compute capability N.0 or newer"
};

inline int gpu_main(int argc, char** argv, const char* suite, device_requirement req = {}) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("quads %s GPU tests: no CUDA device, skipping (exit 77)\n", suite);
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major < req.min_major ||
      prop.major > req.max_major) {
    if (req.what != nullptr)
      std::printf("quads %s GPU tests: need %s, skipping (exit 77)\n", suite, req.what);
    else
      std::printf("quads %s GPU tests: need compute capability %d.0 or newer, skipping (exit 77)\n",
                  suite, req.min_major);
    return 77;
  }
  std::printf("quads %s GPU tests on %s (sm_%d%d)\n", suite, prop.name, prop.major, prop.minor);
  (void)seed();
  doctest::Context context(argc, argv);
  return context.run();
}

} // namespace quads_test
