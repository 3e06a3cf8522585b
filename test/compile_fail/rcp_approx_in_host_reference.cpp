// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Must not compile: the host reference with `scale_math::rcp_approx`, which only the
//! GPU's rcp.approx instruction defines. Positive twin: the default IEEE scale math.
// expect: scale_math::rcp_approx is GPU-only
#include <quads/reference/tensor.hpp>

#include <vector>

#ifdef QUADS_COMPILE_FAIL
constexpr quads::quant_options options{.math = quads::scale_math::rcp_approx};
#else
constexpr quads::quant_options options{.math = quads::scale_math::ieee_divide};
#endif

std::size_t use(const std::vector<float>& x) {
  return quads::reference::quantize<quads::nvfp4, options>(x, 1, 16).scales.size();
}
