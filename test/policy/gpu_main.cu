// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief doctest main of the trainer-policy GPU tests: exits 77 (meson SKIP) without a GPU,
//! prints the run's seed first.
#define DOCTEST_CONFIG_IMPLEMENT
#include <test_support/gpu_main.hpp>

int main(int argc, char** argv) {
  return quads_test::gpu_main(argc, argv, "policy");
}
