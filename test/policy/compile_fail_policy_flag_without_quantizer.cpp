// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: a policy that says it quantizes weights but names no quantizer,
//! used in the reference linear layer. Positive twin: with a block_quantizer.
// expect: weight_quantizer must be block_quantizer<F, O> when quantizes_weights is true
#include <quads/policy/reference.hpp>

#include <vector>

struct my_policy {
  static constexpr const char* name = "mine";
  static constexpr bool quantizes_weights = true;
  static constexpr bool quantizes_activations = false;
#ifdef QUADS_COMPILE_FAIL
  using weight_quantizer = quads::no_quantizer;
#else
  using weight_quantizer = quads::block_quantizer<quads::mxfp4>;
#endif
  using activation_quantizer = quads::no_quantizer;
  using weight_gradient = quads::ste::identity;
  using activation_gradient = quads::ste::identity;
};

double use(const std::vector<float>& x, const std::vector<float>& w) {
  return quads::reference::linear_forward<my_policy>(x, w, {}, quads::linear_shape::dense(1, 1, 32))
      .y[0];
}
