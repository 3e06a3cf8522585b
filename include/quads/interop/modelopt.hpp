// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief ModelOpt / Hugging Face NVFP4 checkpoint tensors: export from and import to quads.
//!
//! Per quantized Linear `<prefix>` a ModelOpt NVFP4 checkpoint stores (decode direction):
//! - `weight`: uint8 `[out, in/2]`, packed E2M1, even input index in the low nibble;
//! - `weight_scale`: float8_e4m3fn `[out, in/16]`, linear layout (not swizzled);
//! - `weight_scale_2`: fp32 scalar, the per-tensor decode scale (quads' `tensor_scale::decode`);
//! - `input_scale`: fp32 scalar, the static activation decode scale `amax_act / 2688`.
//! Dequantized weight = e2m1 * fp32(weight_scale) * weight_scale_2, exactly what
//! `reference::dequantize` computes. Import keeps every byte and the decode scale; the encode
//! scale is recomputed as 1 / weight_scale_2, which can differ by one ulp from the encode scale
//! the weights were made with (it only matters if one re-quantizes; dequantization is exact).
//! ModelOpt itself writes 0x38 (1.0) for all-zero blocks where quads (like TE) writes 0x00; both
//! dequantize to zero. Host-only.
#pragma once

#include <quads/config.hpp>

#include <quads/quant/tensor_scale.hpp>
#include <quads/reference/tensor.hpp>
#include <quads/scheme/schemes.hpp>

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace quads::interop {

//! The tensors of one NVFP4 Linear in a ModelOpt / HF checkpoint, as raw bytes and floats.
struct modelopt_nvfp4_linear {
  int out_features = 0;
  int in_features = 0;
  std::vector<std::uint8_t> weight;        //!< `[out, in/2]`
  std::vector<std::uint8_t> weight_scale;  //!< `[out, in/16]` E4M3 bytes
  float weight_scale_2 = 1.0f;
  float input_scale = 1.0f;
};

//! Exports a dense (single-expert, per-tensor scaled, linear-scale) NVFP4 weight. `input_scale` is
//! the activation decode scale to record (e.g. `make_tensor_scale<nvfp4>(act_amax).decode`).
//! Throws `std::invalid_argument` for stacks or per-row scales, which the format cannot express.
inline modelopt_nvfp4_linear export_modelopt(const reference::quantized_tensor<nvfp4>& w,
                                             float input_scale) {
  if (w.experts != 1 || w.global == global_scale::per_row)
    throw std::invalid_argument("quads: ModelOpt NVFP4 holds one matrix with one tensor scale; "
                                "export each expert separately and do not use per_row scales");
  return {w.rows, w.cols, w.data, w.scales, w.tensor_scales.at(0).decode, input_scale};
}

//! Imports checkpoint tensors; checks their sizes. Returns the weight and the activation scale.
inline reference::quantized_tensor<nvfp4> import_modelopt(const modelopt_nvfp4_linear& t,
                                                          tensor_scale* input_scale = nullptr) {
  if (t.in_features % nvfp4::block_size != 0)
    throw std::invalid_argument("quads: in_features must be a multiple of 16");
  const std::size_t n = static_cast<std::size_t>(t.out_features) * t.in_features;
  if (t.weight.size() != n / 2 || t.weight_scale.size() != n / nvfp4::block_size)
    throw std::invalid_argument("quads: weight must be [out, in/2] and weight_scale [out, in/16]");
  reference::quantized_tensor<nvfp4> q;
  q.rows = t.out_features;
  q.cols = t.in_features;
  q.global = global_scale::given;
  q.data = t.weight;
  q.scales = t.weight_scale;
  q.tensor_scales = {tensor_scale_from_decode(t.weight_scale_2)};
  if (input_scale) *input_scale = tensor_scale_from_decode(t.input_scale);
  return q;
}

} // namespace quads::interop
