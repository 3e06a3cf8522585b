// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: `swiglu<pairing::halves>` (a column fragment cannot hold gate j and
//! up j at N/2 + j). Positive twin: the interleaved pairing.
// expect: interleave the gate/up weight rows offline
#include <quads/epilogue/epilogue.hpp>

namespace qe = quads::epilogue;
#ifdef QUADS_COMPILE_FAIL
using epi = qe::chain<qe::swiglu<qe::pairing::halves>, qe::store<float>>;
#else
using epi = qe::chain<qe::swiglu<qe::pairing::interleaved>, qe::store<float>>;
#endif
static_assert(epi::input_width == 2);
