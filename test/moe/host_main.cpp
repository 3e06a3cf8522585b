// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief doctest main of the MoE host tests; prints the run's seed first.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <test_support/seed.hpp>

namespace {
[[maybe_unused]] const auto run_seed = quads_test::seed();
} // namespace
