// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: a user epilogue node without `struct params` in a chain. Positive
//! twin: with it.
// expect: epilogue node lacks `struct params`
#include <quads/epilogue/epilogue.hpp>

struct my_scale {
  struct arguments {
    float factor = 2.0f;
  };
#ifndef QUADS_COMPILE_FAIL
  struct params {
    float factor;
  };
  static constexpr params to_params(const arguments& a) noexcept { return {a.factor}; }
  static constexpr float apply(float v, int, int, const params& p) noexcept { return v * p.factor; }
#endif
};

using epi = quads::epilogue::chain<quads::epilogue::scale_alpha, my_scale,
                                   quads::epilogue::store<float>>;
static_assert(epi::size == 3);
