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

//! Copy / read bandwidth, the empty-kernel launch floor.
void register_baselines();

//! cuBLAS bf16 and cuBLASLt FP8 GEMMs. Registered after the kernels: the 8192^3 GEMMs leave the
//! H200 in a power / clock state in which the next isolated small calls measured ~1 us slower
//! (full-suite run of 2026-11-30 22:00 UTC: 1 x 4096 NVFP4 quantize 5.57 us right after them,
//! 4.54-4.74 us in filtered runs).
void register_gemm_baselines();

//! The quantization kernels of include/quads/kernels (amax, quantize, dequantize, QDQ, fused
//! producers, expert stacks).
void register_kernels();

} // namespace quads::bench
