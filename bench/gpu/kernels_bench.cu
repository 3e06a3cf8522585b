// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Benchmarks of the quantization kernels (filled in once include/quads/kernels exists).

#include "suites.hpp"

namespace quads::bench {

void register_kernels() {}

} // namespace quads::bench
