// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Example 03, GPU path: the same training loop with the trainer's linear layers on the
//! GPU (`quads::trainer::linear_forward/backward`, cuBLAS). Built only with CUDA (meson defines
//! `QUADS_EXAMPLE_HAS_GPU`); plain C++ declaration so that `main.cpp` stays a host file.
#pragma once

#include "common.hpp"

#include <array>

namespace ex03 {

//! Runs every policy again through the GPU trainer path, prints its table and a GPU-vs-CPU line
//! per policy. Returns 0 (printing nothing) when no CUDA device is present, 0 when every GPU
//! loss is within the stated tolerance of the CPU one, 1 on a CUDA/cuBLAS error or a loss
//! outside the tolerance.
int run_gpu_path(const setup& s, const std::array<train_result, policy_count>& cpu);

} // namespace ex03
