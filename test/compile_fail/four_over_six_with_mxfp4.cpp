// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: the 4/6 block-scale rule with MXFP4 (a power-of-two scale cannot
//! express "amax -> 4"). Positive twin: the same rule with NVFP4.
// expect: four_over_six needs a UE4M3-scaled (two-level) format
#include <quads/quant/block_quantizer.hpp>

#ifdef QUADS_COMPILE_FAIL
using format = quads::mxfp4;
#else
using format = quads::nvfp4;
#endif
constexpr quads::quant_options options{.block_rule = quads::block_scale_rule::four_over_six};

int use(const float (&x)[format::block_size]) {
  return quads::block_quantizer<format, options>::quantize(x, {}).scale;
}
