// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: a user policy without `weight_gradient`, checked with
//! `check_fake_quant_policy`. Positive twin: with it.
// expect: fake-quant policy lacks `using weight_gradient
#include <quads/policy/policies.hpp>

struct my_policy {
  static constexpr const char* name = "mine";
  static constexpr bool quantizes_weights = true;
  static constexpr bool quantizes_activations = false;
  using weight_quantizer = quads::block_quantizer<quads::nvfp4>;
  using activation_quantizer = quads::no_quantizer;
#ifndef QUADS_COMPILE_FAIL
  using weight_gradient = quads::ste::clipped;
#endif
  using activation_gradient = quads::ste::identity;
};

static_assert(quads::check_fake_quant_policy<my_policy>());
