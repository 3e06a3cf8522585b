// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Amax, dequantize, one-pass QDQ and the fused producers (RMSNorm -> quantize,
//!        SiLU(gate) * up -> quantize) benchmarks.

#include "kernel_registry.cuh"

namespace quads::bench {

namespace {

using bf16 = __nv_bfloat16;

//! `accumulate`: max(old, new), the amax-history form, which zeroes nothing (so its time minus
//! the plain call's is what the zeroing memset costs).
template <class T>
void add_tensor_amax(const shape3& s, bool accumulate = false) {
  const std::size_t in = s.elems() * sizeof(T);
  register_kernel(std::string(accumulate ? "amax/tensor_accumulate/" : "amax/tensor/") +
                      type_name<T>() + "/" + s.label(),
                  double(in) + 4.0 * s.experts, {{in, random_of<T>()}},
                  {{sizeof(float) * s.experts, init::none}},
                  [s, accumulate](const launch_buffers& b, cudaStream_t st) {
                    return checked(kernels::tensor_amax(b.slot[0].get<const T>(), s.tensor(),
                                                        b.shared[0].get<float>(), st,
                                                        accumulate));
                  });
}

template <class T>
void add_row_amax(const shape3& s) {
  const std::size_t in = s.elems() * sizeof(T);
  const std::size_t out = sizeof(float) * s.experts * s.rows;
  register_kernel("amax/row/" + std::string(type_name<T>()) + "/" + s.label(),
                  double(in) + double(out), {{in, random_of<T>()}, {out, init::none}}, {},
                  [s](const launch_buffers& b, cudaStream_t st) {
                    return checked(kernels::row_amax(b.slot[0].get<const T>(), s.tensor(),
                                                     b.slot[1].get<float>(), st));
                  });
}

template <class Q, class Layout, class TOut>
void add_dequantize(const std::string& variant, const shape3& s) {
  using F = typename Q::format;
  const std::size_t codes = s.elems() / 2;
  const std::size_t scales = scale_bytes<F, Layout>(s);
  const int n_ts = F::has_tensor_scale ? s.experts : 0;
  const std::size_t out = s.elems() * sizeof(TOut);
  // Random code bytes are valid E2M1 pairs; scale bytes are poisoned with a finite UE4M3/UE8M0.
  std::vector<buffer_spec> slot = {{codes, init::random_bf16}, {scales, init::none}, {out, init::none}};
  std::vector<buffer_spec> shared;
  if (n_ts > 0) shared.push_back({sizeof(tensor_scale) * n_ts, init::given_scales, n_ts});
  register_kernel("dequantize/" + variant + "/" + type_name<TOut>() + "/" + s.label(),
                  double(codes) + double(scales) + sizeof(tensor_scale) * n_ts + double(out),
                  std::move(slot), std::move(shared),
                  [s, n_ts](const launch_buffers& b, cudaStream_t st) {
                    const kernels::const_quantized_view q{
                        b.slot[0].get<const std::uint8_t>(), b.slot[1].get<const std::uint8_t>(),
                        n_ts > 0 ? b.shared[0].get<const tensor_scale>() : nullptr};
                    return checked(kernels::dequantize<Q, Layout>(q, b.slot[2].get<TOut>(),
                                                                  s.tensor(), st));
                  });
}

template <class Q, class T>
void add_qdq(const std::string& variant, const shape3& s) {
  using F = typename Q::format;
  constexpr quant_options O = Q::options;
  constexpr bool given = F::has_tensor_scale && O.global == global_scale::given;
  constexpr bool per_tensor = F::has_tensor_scale && O.global == global_scale::per_tensor;
  constexpr bool per_row = F::has_tensor_scale && O.global == global_scale::per_row;
  const int n_ts = per_row ? s.experts * s.rows : (per_tensor ? s.experts : 0);
  const std::size_t in = s.elems() * sizeof(T);
  const std::size_t ts_bytes = sizeof(tensor_scale) * static_cast<std::size_t>(n_ts);
  std::vector<buffer_spec> slot = {{in, random_of<T>()}, {in, init::none}};
  if (n_ts > 0) slot.push_back({ts_bytes, init::none});
  std::vector<buffer_spec> shared;
  if (given) shared.push_back({sizeof(tensor_scale) * s.experts, init::given_scales, s.experts});
  if (per_tensor) shared.push_back({sizeof(float) * s.experts, init::none});
  register_kernel("qdq/" + variant + "/" + type_name<T>() + "/" + s.label(),
                  2.0 * double(in) + double(ts_bytes), std::move(slot), std::move(shared),
                  [s, n_ts](const launch_buffers& b, cudaStream_t st) {
                    kernels::scale_args args{};
                    if constexpr (given) {
                      args.given = b.shared[0].get<const tensor_scale>();
                      args.given_count = s.experts;
                    }
                    if constexpr (per_tensor) args.amax_workspace = b.shared[0].get<float>();
                    tensor_scale* ts = n_ts > 0 ? b.slot[2].get<tensor_scale>() : nullptr;
                    return checked(kernels::qdq<Q>(b.slot[0].get<const T>(), b.slot[1].get<T>(),
                                                   s.tensor(), args, ts, st));
                  });
}

enum class producer { rmsnorm, silu_mul };

//! Fused producer -> quantize. RMSNorm reads x [T, H] and a weight [H]; SiLU-and-mul reads one
//! concatenated [T, 2I] gate_up tensor (gate first), `s.cols` = I.
template <class Q, class Layout, class T>
void add_fused(producer p, const std::string& variant, const shape3& s) {
  using F = typename Q::format;
  constexpr quant_options O = Q::options;
  constexpr bool given = F::has_tensor_scale && O.global == global_scale::given;
  const int n_ts = given ? 0 : (O.global == global_scale::per_row ? s.rows : 1);
  const std::size_t in = s.elems() * sizeof(T) * (p == producer::silu_mul ? 2 : 1);
  const std::size_t weight = p == producer::rmsnorm ? s.cols * sizeof(T) : 0;
  const std::size_t codes = s.elems() / 2;
  const std::size_t scales = scale_bytes<F, Layout>(s);
  const std::size_t ts_bytes = sizeof(tensor_scale) * static_cast<std::size_t>(n_ts);
  std::vector<buffer_spec> slot = {{in, random_of<T>()}, {codes, init::none}, {scales, init::none}};
  if (n_ts > 0) slot.push_back({ts_bytes, init::none});
  std::vector<buffer_spec> shared = {{std::max<std::size_t>(weight, 16), random_of<T>()}};
  if (given) shared.push_back({sizeof(tensor_scale), init::given_scales, 1});
  if (O.global == global_scale::per_tensor) shared.push_back({sizeof(float), init::none});
  const std::string kernel = p == producer::rmsnorm ? "rmsnorm_quantize/" : "silu_mul_quantize/";
  register_kernel(kernel + variant + "/" + type_name<T>() + "/" + s.label(),
                  double(in) + double(weight) + double(codes) + double(scales) + double(ts_bytes),
                  std::move(slot), std::move(shared),
                  [p, s, n_ts](const launch_buffers& b, cudaStream_t st) {
                    kernels::quantized_view out{b.slot[1].get<std::uint8_t>(),
                                                b.slot[2].get<std::uint8_t>(),
                                                n_ts > 0 ? b.slot[3].get<tensor_scale>() : nullptr};
                    kernels::scale_args args{};
                    if constexpr (given) {
                      args.given = b.shared[1].get<const tensor_scale>();
                      args.given_count = 1;
                    }
                    if constexpr (Q::options.global == global_scale::per_tensor)
                      args.amax_workspace = b.shared[1].get<float>();
                    const T* x = b.slot[0].get<const T>();
                    if (p == producer::rmsnorm)
                      return checked(kernels::rmsnorm_quantize<Q, Layout>(
                          x, b.shared[0].get<const T>(), 1e-6f, s.tensor(), out, args, st));
                    kernels::tensor_shape t = s.tensor();
                    t.row_stride = 2 * static_cast<std::int64_t>(s.cols);
                    return checked(
                        kernels::silu_mul_quantize<Q, Layout>(x, x + s.cols, t, out, args, st));
                  });
}

} // namespace

void register_other_suite() {
  std::vector<shape3> mats = sweep_shapes();
  mats.insert(mats.end(), token_shapes().begin(), token_shapes().end());
  for (const auto& s : mats) add_tensor_amax<bf16>(s);
  for (const auto& s : stack_shapes()) add_tensor_amax<bf16>(s);
  for (const auto& s : sweep_shapes()) add_tensor_amax<bf16>(s, true);
  for (const auto& s : sweep_shapes()) add_row_amax<bf16>(s);

  for (const auto& s : sweep_shapes())
    add_dequantize<nv_tensor, swizzled_128x4, bf16>("nvfp4_swizzled", s);
  for (const auto& s : stack_shapes())
    add_dequantize<nv_tensor, swizzled_128x4, bf16>("nvfp4_swizzled", s);
  for (const auto& s : sweep_shapes())
    add_dequantize<mx_default, swizzled_128x4, bf16>("mxfp4_swizzled", s);

  // QDQ: given scale (issue 3's target), per-tensor computed scale (what the trainer does each
  // step, and what tools/torch_emulation_bench.py emulates), per row, MXFP4.
  std::vector<shape3> qdq_shapes = sweep_shapes();
  qdq_shapes.push_back({1, 14336, 4096});
  for (const auto& s : qdq_shapes) add_qdq<nv_given, bf16>("nvfp4_given", s);
  for (const auto& s : qdq_shapes) add_qdq<nv_tensor, bf16>("nvfp4_tensor", s);
  for (const auto& s : stack_shapes()) add_qdq<nv_given, bf16>("nvfp4_given", s);
  for (const auto& s : stack_shapes()) add_qdq<nv_tensor, bf16>("nvfp4_tensor", s);
  for (const auto& s : sweep_shapes()) add_qdq<nv_row, bf16>("nvfp4_row", s);
  for (const auto& s : sweep_shapes()) add_qdq<mx_default, bf16>("mxfp4", s);

  for (const auto& s : token_shapes()) {
    add_fused<nv_given, swizzled_128x4, bf16>(producer::rmsnorm, "nvfp4_swizzled_given", s);
    add_fused<nv_row, swizzled_128x4, bf16>(producer::rmsnorm, "nvfp4_swizzled_row", s);
  }
  for (const auto& s : intermediate_shapes()) {
    add_fused<nv_given, swizzled_128x4, bf16>(producer::silu_mul, "nvfp4_swizzled_given", s);
    add_fused<nv_row, swizzled_128x4, bf16>(producer::silu_mul, "nvfp4_swizzled_row", s);
  }
}

} // namespace quads::bench
