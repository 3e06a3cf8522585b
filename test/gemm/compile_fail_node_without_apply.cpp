// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: a user epilogue node whose `apply` has the wrong signature (no
//! row/column). Positive twin: the element-node signature.
// expect: epilogue node lacks `apply`
#include <quads/epilogue/epilogue.hpp>

struct my_clamp {
  struct arguments {
    float hi = 1.0f;
  };
  struct params {
    float hi;
  };
  static constexpr params to_params(const arguments& a) noexcept { return {a.hi}; }
#ifndef QUADS_COMPILE_FAIL
  static constexpr float apply(float v, int, int, const params& p) noexcept {
    return v > p.hi ? p.hi : v;
  }
#else
  static constexpr float apply(float v, const params& p) noexcept { return v > p.hi ? p.hi : v; }
#endif
};

using epi = quads::epilogue::chain<my_clamp, quads::epilogue::store<float>>;
static_assert(quads::epilogue::check_epilogue_node<epi>());
