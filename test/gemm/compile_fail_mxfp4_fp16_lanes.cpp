// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: an MXFP4 operand loader with fp16 lanes (UE8M0 scales do not fit in
//! binary16). Positive twin: bf16 lanes.
// expect: MXFP4 operands dequantize to bf16 only
#include <quads/gemm/dequant.hpp>

namespace qg = quads::gemm;
#ifdef QUADS_COMPILE_FAIL
using loader = qg::fp4_loader<quads::mxfp4, qg::fp16_lane>;
#else
using loader = qg::fp4_loader<quads::mxfp4, qg::bf16_lane>;
#endif
static_assert(loader::fold_log2 == 16);
