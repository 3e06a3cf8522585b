// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief All GPU kernels and their host launchers (nvcc only).
//!
//! Launchers (namespace `quads::kernels`, all take a `cudaStream_t`, return `cudaError_t`, never
//! synchronise; `last_error_message()` explains a failure):
//! - `tensor_amax<T>`, `row_amax<T>`, `tensor_scale_from_amax<Quantizer>`   (amax.cuh)
//! - `quantize<Quantizer, Layout>`, `qdq<Quantizer>`                         (quantize.cuh)
//! - `dequantize<Quantizer, Layout>`                                         (dequantize.cuh)
//! - `rmsnorm_quantize<Quantizer, Layout>`, `silu_mul_quantize<Quantizer, Layout>` (fused.cuh)
//! with `Quantizer = quads::block_quantizer<Format, Options>` and `Layout` one of
//! `quads::linear_scales`, `quads::swizzled_128x4`. Instantiate only what you use: the headers
//! hold templates, no explicit instantiations.
#pragma once

#include <quads/kernels/amax.cuh>
#include <quads/kernels/common.cuh>
#include <quads/kernels/dequantize.cuh>
#include <quads/kernels/fused.cuh>
#include <quads/kernels/quantize.cuh>
