// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The benchmark suites that main.cu registers after measuring the device's limits.
//!
//! Benchmarks are registered at run time (not with static `BENCHMARK` macros) because the ring
//! sizes and the copy bandwidth they report against are only known once the device is measured.
#pragma once

namespace quads::bench {

//! Measures copy bandwidth (max of cudaMemcpyAsync D2D and a 16-byte copy kernel, 1 GiB, bytes
//! read + written), read bandwidth (reduction), SM count and L2 size into `limits()`.
bool measure_device_limits();

//! Copy / read bandwidth, the empty-kernel launch floor, cuBLAS bf16 and cuBLASLt FP8 GEMMs.
void register_baselines();

//! The quantization kernels of include/quads/kernels (amax, quantize, dequantize, QDQ, fused
//! producers, expert stacks).
void register_kernels();

} // namespace quads::bench
