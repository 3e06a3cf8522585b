// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: a user STE rule without `factor(x, multiplier)` given to
//! `weight_only`. Positive twin: with it.
// expect: STE rule lacks `static float factor(float x, float multiplier)`
#include <quads/policy/policies.hpp>

struct my_ste {
  static constexpr const char* name = "mine";
  static constexpr bool needs_multiplier = false;
#ifndef QUADS_COMPILE_FAIL
  static constexpr float factor(float, float) noexcept { return 1.0f; }
#endif
};

using my_policy = quads::weight_only<quads::nvfp4, quads::quant_options{}, my_ste>;
static_assert(my_policy::quantizes_weights);
