// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Quantize benchmarks: NVFP4 (linear / swizzled scales; global scale given, per tensor,
//!        per row; stochastic rounding, 4/6, rcp.approx), MXFP4, bf16 / fp16 / fp32 inputs,
//!        matrices, MoE activations and expert stacks.

#include "kernel_registry.cuh"

namespace quads::bench {

namespace {

//! Tensor scales a quantize writes (0 for MXFP4).
template <class Q>
int tensor_scale_count(const shape3& s) {
  if constexpr (!Q::format::has_tensor_scale) return 0;
  else if constexpr (Q::options.global == global_scale::per_row) return s.experts * s.rows;
  else return s.experts;
}

template <class Q, class Layout, class T>
void add_quantize(const std::string& variant, const shape3& s) {
  using F = typename Q::format;
  constexpr quant_options O = Q::options;
  constexpr bool given = F::has_tensor_scale && O.global == global_scale::given;
  constexpr bool per_tensor = F::has_tensor_scale && O.global == global_scale::per_tensor;
  // `given` scales are inputs (not copied out: out.tensor_scales stays null).
  const int n_ts = given ? 0 : tensor_scale_count<Q>(s);
  const std::size_t in = s.elems() * sizeof(T);
  const std::size_t codes = s.elems() / 2;
  const std::size_t scales = scale_bytes<F, Layout>(s);
  const std::size_t ts_bytes = sizeof(tensor_scale) * static_cast<std::size_t>(n_ts);
  const double bytes = double(in) + double(codes) + double(scales) + double(ts_bytes);
  std::vector<buffer_spec> slot = {{in, random_of<T>()}, {codes, init::none}, {scales, init::none}};
  if (n_ts > 0) slot.push_back({ts_bytes, init::none});
  std::vector<buffer_spec> shared;
  if (given) shared.push_back({sizeof(tensor_scale) * s.experts, init::given_scales, s.experts});
  if (per_tensor) shared.push_back({sizeof(float) * s.experts, init::none});
  const std::string name =
      "quantize/" + variant + "/" + type_name<T>() + "/" + s.label();
  register_kernel(name, bytes, std::move(slot), std::move(shared),
                  [s, n_ts](const launch_buffers& b, cudaStream_t st) {
                    kernels::quantized_view out{b.slot[1].get<std::uint8_t>(),
                                                b.slot[2].get<std::uint8_t>(),
                                                n_ts > 0 ? b.slot[3].get<tensor_scale>() : nullptr};
                    kernels::scale_args args{};
                    args.seed = 0x1234;
                    if constexpr (given) {
                      args.given = b.shared[0].get<const tensor_scale>();
                      args.given_count = s.experts;
                    }
                    if constexpr (per_tensor) args.amax_workspace = b.shared[0].get<float>();
                    return checked(kernels::quantize<Q, Layout>(b.slot[0].get<const T>(),
                                                                s.tensor(), out, args, st));
                  });
}

using bf16 = __nv_bfloat16;

//! Register-budget variants of the pair kernel (benchmark only, same bytes as the library call):
//! `detail::enqueue_block` asking ptxas for `PairMin` resident CTAs per SM. Names `variant/...`.
template <int PairMin>
void add_pair_variant(const shape3& s) {
  using F = nv_given::format;
  const std::size_t in = s.elems() * sizeof(bf16);
  const std::size_t codes = s.elems() / 2;
  const std::size_t scales = scale_bytes<F, swizzled_128x4>(s);
  register_kernel("variant/quantize_nvfp4_swizzled_given_p" + std::to_string(PairMin) + "/bf16/" +
                      s.label(),
                  double(in) + double(codes) + double(scales),
                  {{in, random_of<bf16>()}, {codes, init::none}, {scales, init::none}},
                  {{sizeof(tensor_scale) * s.experts, init::given_scales, s.experts}},
                  [s](const launch_buffers& b, cudaStream_t st) {
                    const swizzled_128x4 layout{s.rows, s.cols / F::block_size};
                    const kernels::detail::quant_sink<F, swizzled_128x4> sink{
                        b.slot[1].get<std::uint8_t>(), b.slot[2].get<std::uint8_t>(), layout,
                        layout.size(), s.rows, s.cols / F::block_size};
                    const kernels::detail::scale_source<nv_given> src{
                        b.shared[0].get<const tensor_scale>(), s.experts, nullptr, nullptr};
                    kernels::detail::enqueue_block<nv_given, PairMin>(
                        b.slot[0].get<const bf16>(), s.tensor(), src, sink, 0x1234, st);
                    return checked(cudaGetLastError());
                  });
}

} // namespace

void register_quantize_suite() {
  std::vector<shape3> mats = sweep_shapes();
  mats.insert(mats.end(), token_shapes().begin(), token_shapes().end());
  // NVFP4, swizzled scales, global scale given: issue 3's headline configuration.
  for (const auto& s : mats) add_quantize<nv_given, swizzled_128x4, bf16>("nvfp4_swizzled_given", s);
  for (const auto& s : stack_shapes())
    add_quantize<nv_given, swizzled_128x4, bf16>("nvfp4_swizzled_given", s);
  for (const auto& s : sweep_shapes())
    add_quantize<nv_given, linear_scales, bf16>("nvfp4_linear_given", s);
  // Computed global scale: amax pass + quantize pass (per tensor; per expert for stacks).
  for (const auto& s : sweep_shapes())
    add_quantize<nv_tensor, swizzled_128x4, bf16>("nvfp4_swizzled_tensor", s);
  for (const auto& s : stack_shapes())
    add_quantize<nv_tensor, swizzled_128x4, bf16>("nvfp4_swizzled_tensor", s);
  // Per-row (per-token) global scale, fused in one kernel.
  for (const auto& s : mats) add_quantize<nv_row, swizzled_128x4, bf16>("nvfp4_swizzled_row", s);
  // MXFP4.
  for (const auto& s : mats) add_quantize<mx_default, swizzled_128x4, bf16>("mxfp4_swizzled", s);
  for (const auto& s : sweep_shapes())
    add_quantize<mx_default, linear_scales, bf16>("mxfp4_linear", s);
  // Numerics options at a few sizes.
  const std::vector<shape3> few = {{1, 1, 4096}, {1, 64, 4096}, {1, 1024, 4096}, {1, 8192, 8192}};
  for (const auto& s : few) {
    add_quantize<nv_given_sr, swizzled_128x4, bf16>("nvfp4_swizzled_given_sr", s);
    add_quantize<nv_given_46, swizzled_128x4, bf16>("nvfp4_swizzled_given_4over6", s);
    add_quantize<nv_given_rcp, swizzled_128x4, bf16>("nvfp4_swizzled_given_rcp", s);
  }
  // Register-budget variants of the pair kernel at the criterion size (the default: 3 CTAs).
  add_pair_variant<4>({1, 8192, 8192});
  add_pair_variant<5>({1, 8192, 8192});
  // Other input types.
  for (const auto& s : std::vector<shape3>{{1, 4096, 4096}, {1, 8192, 8192}}) {
    add_quantize<nv_given, swizzled_128x4, __half>("nvfp4_swizzled_given", s);
    add_quantize<nv_given, swizzled_128x4, float>("nvfp4_swizzled_given", s);
  }
}

} // namespace quads::bench
