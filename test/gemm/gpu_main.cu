// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief doctest main of the GEMM GPU tests: exits 77 (meson SKIP) without a GPU or below
//!        sm_90, prints the device and the run's seed first.
#define DOCTEST_CONFIG_IMPLEMENT
#include <test_support/gpu_main.hpp>

int main(int argc, char** argv) {
  return quads_test::gpu_main(argc, argv, "GEMM", {9});
}
