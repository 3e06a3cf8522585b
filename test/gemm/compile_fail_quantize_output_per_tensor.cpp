// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: an NVFP4 quantize-output node with a per-tensor (amax) scale, which
//! needs a reduction over the whole output. Positive twin: `global_scale::given`.
// expect: quantize_output needs global_scale::given
#include <quads/epilogue/epilogue.hpp>

namespace qe = quads::epilogue;
#ifdef QUADS_COMPILE_FAIL
constexpr quads::quant_options opts{.global = quads::global_scale::per_tensor};
#else
constexpr quads::quant_options opts{.global = quads::global_scale::given};
#endif
using epi = qe::chain<qe::scale_alpha, qe::quantize_output<quads::block_quantizer<quads::nvfp4, opts>>>;
static_assert(epi::input_width == 16);
