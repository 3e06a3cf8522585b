// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: epilogue node params that are not trivially copyable (they are passed
//! to the kernel by value). Positive twin: a plain struct.
// expect: epilogue node `params` must be trivially copyable
#include <quads/epilogue/epilogue.hpp>

struct my_offset {
  struct arguments {
    float offset = 0.0f;
  };
  struct params {
    float offset;
#ifdef QUADS_COMPILE_FAIL
    params() = default;
    params(const params& o) : offset(o.offset) {}  // user-provided copy: not trivially copyable
    params& operator=(const params&) = default;
    params(float f) : offset(f) {}
#endif
  };
  static params to_params(const arguments& a) noexcept { return params{a.offset}; }
  static constexpr float apply(float v, int, int, const params& p) noexcept { return v + p.offset; }
};

static_assert(quads::epilogue::check_epilogue_node<my_offset>());
