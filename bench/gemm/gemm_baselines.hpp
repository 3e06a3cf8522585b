// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief cuBLAS bf16 / cuBLASLt FP8 baselines at the decode shapes (gemm_baselines.cu).
#pragma once

#include <utility>
#include <vector>

namespace quads::bench::gemm {

//! Registers `baseline/cublas_bf16/M<m>_W<N>x<K>` and `baseline/cublaslt_fp8/...` for each
//! M in `ms` and weight shape (N, K) in `shapes` (no-op without cuBLAS).
void register_decode_baselines(const std::vector<int>& ms,
                               const std::vector<std::pair<int, int>>& shapes);

} // namespace quads::bench::gemm
