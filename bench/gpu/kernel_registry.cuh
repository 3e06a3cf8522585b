// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Shapes, quantizer types and the registration helper shared by the kernel benchmarks.
//!
//! A kernel benchmark is described by: a name `<kernel>/<variant>/<type>/<shape>`, the bytes one
//! call must move (each input read once, each output written once), the buffers one call uses
//! (allocated once per ring slot, inputs filled with random data), buffers shared by all slots
//! (tensor scales, workspaces), and a launch callback. The cache policy and ring depth follow from
//! the bytes (timing.cuh).
#pragma once

#include "timing.cuh"

#include <quads/kernels/kernels.cuh>
#include <quads/layout/scale_layouts.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/options.hpp>
#include <quads/quant/tensor_scale.hpp>
#include <quads/scheme/schemes.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace quads::bench {

//! `[experts, rows, cols]`; experts = 1 for a matrix.
struct shape3 {
  int experts = 1;
  int rows = 0;
  int cols = 0;
  std::size_t elems() const { return std::size_t(experts) * rows * cols; }
  std::string label() const {
    const std::string rc = std::to_string(rows) + "x" + std::to_string(cols);
    return experts == 1 ? rc : "E" + std::to_string(experts) + "x" + rc;
  }
  kernels::tensor_shape tensor() const { return {experts, rows, cols}; }
};

//! The size sweep of issue 3 (1x2048 ... 16384x16384).
inline const std::vector<shape3>& sweep_shapes() {
  static const std::vector<shape3> s = {{1, 1, 2048},    {1, 1, 4096},    {1, 16, 4096},
                                        {1, 64, 4096},   {1, 256, 4096},  {1, 1024, 4096},
                                        {1, 4096, 4096}, {1, 8192, 8192}, {1, 16384, 16384}};
  return s;
}
//! MoE activations: tokens x hidden (2048: Qwen3-30B-A3B, 7168: DeepSeek-V3-like).
inline const std::vector<shape3>& token_shapes() {
  static const std::vector<shape3> s = [] {
    std::vector<shape3> v;
    for (int hidden : {2048, 7168})
      for (int t : {1, 16, 64, 256, 1024, 4096}) v.push_back({1, t, hidden});
    return v;
  }();
  return s;
}
//! MoE expert intermediate activations: tokens x I (768: Qwen3-30B-A3B, 2048: DeepSeek-V3-like).
inline const std::vector<shape3>& intermediate_shapes() {
  static const std::vector<shape3> s = [] {
    std::vector<shape3> v;
    for (int inter : {768, 2048})
      for (int t : {1, 16, 64, 256, 1024, 4096}) v.push_back({1, t, inter});
    return v;
  }();
  return s;
}
//! Expert weight stacks [E, N, K]: Qwen3-30B-A3B gate_up [128, 2*768, 2048] and down
//! [128, 2048, 768]; a DeepSeek-V3-like gate_up slice [32, 2*2048, 7168] (32 of its 256 experts,
//! to bound memory and time).
inline const std::vector<shape3>& stack_shapes() {
  static const std::vector<shape3> s = {{128, 1536, 2048}, {128, 2048, 768}, {32, 4096, 7168}};
  return s;
}

// Quantizer types (kernels take the quantizer type; see quant/options.hpp).
inline constexpr quant_options opt_given{.global = global_scale::given};
inline constexpr quant_options opt_tensor{};
inline constexpr quant_options opt_row{.global = global_scale::per_row};
inline constexpr quant_options opt_given_sr{.round = rounding::stochastic,
                                            .global = global_scale::given};
inline constexpr quant_options opt_given_46{.block_rule = block_scale_rule::four_over_six,
                                            .global = global_scale::given};
inline constexpr quant_options opt_given_rcp{.math = scale_math::rcp_approx,
                                             .global = global_scale::given};
using nv_given = block_quantizer<nvfp4, opt_given>;
using nv_tensor = block_quantizer<nvfp4, opt_tensor>;
using nv_row = block_quantizer<nvfp4, opt_row>;
using nv_given_sr = block_quantizer<nvfp4, opt_given_sr>;
using nv_given_46 = block_quantizer<nvfp4, opt_given_46>;
using nv_given_rcp = block_quantizer<nvfp4, opt_given_rcp>;
using mx_default = block_quantizer<mxfp4, opt_tensor>;

template <class T>
inline const char* type_name() {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return "bf16";
  else if constexpr (std::is_same_v<T, __half>) return "fp16";
  else return "fp32";
}

//! How a buffer is initialised.
enum class init { none, random_bf16, random_fp16, random_fp32, given_scales };

template <class T>
constexpr init random_of() {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return init::random_bf16;
  else if constexpr (std::is_same_v<T, __half>) return init::random_fp16;
  else return init::random_fp32;
}

struct buffer_spec {
  std::size_t bytes = 0;
  init how = init::none;
  int count = 1; //!< given_scales: number of tensor_scale entries
};

//! Buffers of one launch: `slot` (this ring slot's) and `shared` (one set for all slots).
struct launch_buffers {
  const std::vector<device_buffer>& slot;
  const std::vector<device_buffer>& shared;
};
using launch_fn = std::function<cudaError_t(const launch_buffers&, cudaStream_t)>;

//! The tensor scale every `given` benchmark uses: the one the per-tensor rule derives from the
//! largest value `fill_random` can produce (2 * 2^4 * 64), so codes span the whole E2M1 range.
inline tensor_scale given_scale() { return make_tensor_scale<nvfp4, opt_tensor>(2048.0f); }

//! Turns a launcher's status into a CUDA error, keeping its message for the report.
inline cudaError_t checked(cudaError_t e) {
  if (e != cudaSuccess) last_message() = kernels::last_error_message();
  return e;
}

//! Registers one kernel benchmark (see the file comment).
void register_kernel(const std::string& name, double bytes, std::vector<buffer_spec> per_slot,
                     std::vector<buffer_spec> shared, launch_fn launch);

//! Bytes of NVFP4/MXFP4 outputs: codes + scales in `Layout` (padding included) + tensor scales.
template <class Format, class Layout>
std::size_t quantized_bytes(const shape3& s, int tensor_scales) {
  const batched<Layout> l{s.experts, Layout{s.rows, s.cols / Format::block_size}};
  return s.elems() / 2 + l.size() + sizeof(tensor_scale) * std::size_t(tensor_scales);
}

template <class Format, class Layout>
std::size_t scale_bytes(const shape3& s) {
  return batched<Layout>{s.experts, Layout{s.rows, s.cols / Format::block_size}}.size();
}

void register_quantize_suite();
void register_other_suite();

} // namespace quads::bench
