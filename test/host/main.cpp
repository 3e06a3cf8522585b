// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief doctest main of the host unit tests; prints the run's seed before any test starts.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <test_support/seed.hpp>

namespace {
// Print the seed up front, so even a crash in the first test leaves it in the log.
[[maybe_unused]] const auto run_seed = quads_test::seed();
} // namespace
