// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Fused producers for the MoE rollout: RMSNorm -> quantize and SiLU(gate) * up -> quantize.
//!
//! Both compute an fp32 intermediate `h` per element and quantize `h` itself (it is never rounded
//! to bf16): the output equals `reference::quantize` applied to the host-computed fp32 `h`. All
//! arithmetic is explicitly rounded (`mul_rn`, `add_rn`, `div_rn`, IEEE `sqrt`), so a host mirror
//! that follows the formulas below reproduces `h` bit for bit.
//!
//! RMSNorm (one CTA per row, `n = row_cta_threads<Format>(cols)` threads, blocks of B = the
//! format's block size):
//! - thread t owns blocks kb = t, t + n, t + 2n, ...; it accumulates `s = add_rn(s, mul_rn(x, x))`
//!   over its blocks in order, elements in order, from s = 0;
//! - each warp combines its lanes with an xor butterfly, offsets 16, 8, 4, 2, 1:
//!   `s = add_rn(s, s_of_lane(lane ^ offset))` (every lane ends with the same value);
//! - the warp sums are added in warp order: `total = w0; total = add_rn(total, w1); ...`;
//! - `rstd = div_rn(1, sqrt_rn(add_rn(div_rn(total, float(cols)), eps)))` (IEEE sqrt and
//!   divisions, not `rsqrtf`);
//! - `h = mul_rn(mul_rn(x, rstd), w)`, with the weight `w` of the input's element type.
//! SiLU-and-mul: `h = mul_rn(silu_rn(g), u)`, `silu_rn(g) = div_rn(g, add_rn(1, exp_rn(-g)))`,
//! with `exp_rn` below (a fixed, explicitly rounded polynomial: max error about 2 ulp, but the
//! same bits on host and device). Inputs: `gate` and `up` as two `[rows, I]` tensors sharing
//! `shape`'s strides; the common concatenated `[rows, 2I]` layout (gate first) is
//! `gate = p, up = p + I, row_stride = 2I`. Element-interleaved (g0, u0, g1, u1, ...) is not
//! supported.
//! Global scale: `given`, `per_row` (fused in the row's CTA), `per_tensor` (an amax pass over
//! `h` into `amax_workspace`, then the quantize pass recomputes `h`).
#pragma once

#include <quads/kernels/amax.cuh>
#include <quads/kernels/common.cuh>
#include <quads/kernels/quantize.cuh>

#include <cmath>

namespace quads::kernels {

//! Threads of the CTA that owns one row of `cols` values in the row kernels (RMSNorm, SiLU,
//! per-row scales): the number of blocks rounded up to a multiple of 32, clamped to [32, 256].
template <class Format>
constexpr int row_cta_threads(int cols) noexcept {
  return detail::cta_threads_for(cols / Format::block_size);
}

//! IEEE square root (correctly rounded) on host and device.
QUADS_API float sqrt_rn(float x) noexcept {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}

//! e^t from explicitly rounded fp32 operations (identical on host and device): t = k ln2 + r with
//! k = rint(t * log2(e)) and a two-part ln2, a degree-7 Taylor polynomial in Horner form, and
//! the scaling 2^k applied as two exact powers of two (one rounding at the end: overflow to Inf,
//! gradual underflow). NaN -> NaN; t > 88.8 -> +Inf; t < -104 -> +0.
QUADS_API float exp_rn(float t) noexcept {
  using quads::detail::add_rn;
  using quads::detail::mul_rn;
  if (t != t) return t;
  if (t > 88.8f) return quads::detail::from_bits(0x7f800000u);
  if (t < -104.0f) return 0.0f;
#if defined(__CUDA_ARCH__)
  const float k = rintf(mul_rn(t, 1.44269502162933349609375f));
#else
  const float k = std::nearbyint(mul_rn(t, 1.44269502162933349609375f));
#endif
  float r = add_rn(t, mul_rn(-k, 0.693145751953125f));  // ln2 high part, 15 bits: exact product
  r = add_rn(r, mul_rn(-k, 1.428606765330187045e-06f)); // ln2 low part
  float p = 1.98412701138295233249664306640625e-04f;    // 1/7!
  p = add_rn(mul_rn(p, r), 1.38888892251998186111450195312e-03f); // 1/6!
  p = add_rn(mul_rn(p, r), 8.33333376795053482055664062500e-03f); // 1/5!
  p = add_rn(mul_rn(p, r), 4.16666679084300994873046875000e-02f); // 1/4!
  p = add_rn(mul_rn(p, r), 1.66666671633720397949218750000e-01f); // 1/3!
  p = add_rn(mul_rn(p, r), 0.5f);
  p = add_rn(mul_rn(p, r), 1.0f);
  p = add_rn(mul_rn(p, r), 1.0f);
  const int ki = static_cast<int>(k);
  const int k1 = ki / 2;
  const int k2 = ki - k1;
  const float s1 = quads::detail::from_bits(static_cast<std::uint32_t>(k1 + 127) << 23);
  const float s2 = quads::detail::from_bits(static_cast<std::uint32_t>(k2 + 127) << 23);
  return mul_rn(mul_rn(p, s1), s2);
}

//! SiLU: `g / (1 + e^-g)` with `exp_rn` and IEEE division.
QUADS_API float silu_rn(float g) noexcept {
  return quads::detail::div_rn(g, quads::detail::add_rn(1.0f, exp_rn(-g)));
}

namespace detail {

template <class T, int B>
struct rmsnorm_producer {
  static constexpr bool has_state = true;
  const T* x;
  const T* w;
  float eps;
  int cols;
  std::int64_t row_stride;
  std::int64_t expert_stride;

  QUADS_DEVICE_API void load(int e, int r, int kb, float (&v)[B]) const {
    raw_block<T, B> raw;
    load_raw<T, B>(x + e * expert_stride + r * row_stride + static_cast<std::int64_t>(kb) * B, raw);
    widen(raw, v);
  }
  //! Sum of squares of one block, in element order, continuing `acc`.
  QUADS_DEVICE_API float partial(const float (&v)[B], float acc) const {
#pragma unroll
    for (int i = 0; i < B; ++i)
      acc = quads::detail::add_rn(acc, quads::detail::mul_rn(v[i], v[i]));
    return acc;
  }
  //! rstd = 1 / sqrt(total / cols + eps), IEEE operations throughout.
  QUADS_DEVICE_API float finish_state(float total) const {
    return quads::detail::div_rn(
        1.0f, sqrt_rn(quads::detail::add_rn(quads::detail::div_rn(total, static_cast<float>(cols)),
                                            eps)));
  }
  QUADS_DEVICE_API void finish(int kb, float rstd, float (&v)[B]) const {
    raw_block<T, B> rw;
    load_raw<T, B>(w + static_cast<std::int64_t>(kb) * B, rw);
    float wv[B];
    widen(rw, wv);
#pragma unroll
    for (int i = 0; i < B; ++i)
      v[i] = quads::detail::mul_rn(quads::detail::mul_rn(v[i], rstd), wv[i]);
  }
};

template <class T, int B>
struct silu_mul_producer {
  static constexpr bool has_state = false;
  const T* gate;
  const T* up;
  std::int64_t row_stride;
  std::int64_t expert_stride;

  QUADS_DEVICE_API void load(int e, int r, int kb, float (&v)[B]) const {
    const std::int64_t off = e * expert_stride + r * row_stride + static_cast<std::int64_t>(kb) * B;
    raw_block<T, B> rg, ru;
    load_raw<T, B>(gate + off, rg);
    load_raw<T, B>(up + off, ru);
    float uv[B];
    widen(rg, v);
    widen(ru, uv);
#pragma unroll
    for (int i = 0; i < B; ++i)
      v[i] = quads::detail::mul_rn(silu_rn(v[i]), uv[i]);
  }
  QUADS_DEVICE_API float partial(const float (&)[B], float acc) const { return acc; }
  QUADS_DEVICE_API float finish_state(float) const { return 0.0f; }
  QUADS_DEVICE_API void finish(int, float, float (&)[B]) const {}
};

//! Dispatch of a fused producer over the global-scale modes (always the row kernel).
template <class Quantizer, class Layout, class Producer>
inline cudaError_t dispatch_fused(const Producer& p, const tensor_shape& s,
                                  const quantized_view& out, const scale_args& args,
                                  cudaStream_t stream) {
  using F = typename Quantizer::format;
  constexpr quant_options O = Quantizer::options;
  constexpr int B = F::block_size;
  const Layout layout{s.rows, s.cols / B};
  const quant_sink<F, Layout> sink{out.data, out.scales, layout, layout.size(), s.rows, s.cols / B};
  const int padded_rows = padded_rows_of(layout, s.rows);
  const scale_source<Quantizer> src{args.given, args.given_count, args.amax_workspace,
                                    out.tensor_scales};
  if constexpr (F::has_tensor_scale && O.global == global_scale::per_row) {
    enqueue_row<Quantizer, row_mode::per_row>(p, s, padded_rows, src, out.tensor_scales, nullptr,
                                              sink, args.seed, stream);
  } else {
    if constexpr (F::has_tensor_scale && O.global == global_scale::per_tensor) {
      const cudaError_t e = cudaMemsetAsync(
          args.amax_workspace, 0, sizeof(float) * static_cast<std::size_t>(s.experts), stream);
      if (e != cudaSuccess) return fail(cudaGetErrorString(e), e);
      enqueue_row<Quantizer, row_mode::amax_only>(p, s, s.rows, src, nullptr, args.amax_workspace,
                                                  sink, args.seed, stream);
    }
    enqueue_row<Quantizer, row_mode::fixed>(p, s, padded_rows, src, nullptr, nullptr, sink,
                                            args.seed, stream);
  }
  return after_launch();
}

} // namespace detail

//! RMSNorm -> quantize: `h = (x * rstd) * weight` per row (numerics in the file comment), then
//! quantized as `quantize` does (same outputs, layouts, options, scale modes). `x` is
//! `[experts, rows, cols]` with `shape`'s strides; `weight` has `cols` elements (shared by all
//! rows and experts). Requirements as for `quantize`, plus `weight` 16-byte aligned.
template <class Quantizer, scale_layout Layout = linear_scales, class T>
cudaError_t rmsnorm_quantize(const T* x, const T* weight, float eps, const tensor_shape& shape,
                             const quantized_view& out, const scale_args& args = {},
                             cudaStream_t stream = nullptr) {
  static_assert(is_kernel_element<T>, "quads: element type must be __nv_bfloat16, __half or float");
  constexpr int B = Quantizer::block_size;
  if (const char* why = detail::check_input(x, shape, B, detail::block_multiple_msg<Quantizer>()))
    return detail::fail(why);
  if (shape.rows == 0 || shape.cols == 0) return detail::ok();
  if (weight == nullptr || !detail::aligned(weight, 16))
    return detail::fail("quads: RMSNorm weight must be non-null and 16-byte aligned");
  if (shape.cols >= (1 << 24))
    return detail::fail("quads: RMSNorm needs cols < 2^24 (exact float(cols))");
  if (const char* why = detail::check_outputs<Quantizer, Layout>(out, args, shape))
    return detail::fail(why);
  const detail::rmsnorm_producer<T, B> p{x,          weight,          eps,
                                         shape.cols, shape.rstride(), shape.estride()};
  return detail::dispatch_fused<Quantizer, Layout>(p, shape, out, args, stream);
}

//! SiLU(gate) * up -> quantize (numerics and input layout in the file comment). `gate` and `up`
//! are `[experts, rows, cols]` with `shape`'s strides. Requirements as for `quantize`, for both.
template <class Quantizer, scale_layout Layout = linear_scales, class T>
cudaError_t silu_mul_quantize(const T* gate, const T* up, const tensor_shape& shape,
                              const quantized_view& out, const scale_args& args = {},
                              cudaStream_t stream = nullptr) {
  static_assert(is_kernel_element<T>, "quads: element type must be __nv_bfloat16, __half or float");
  constexpr int B = Quantizer::block_size;
  if (const char* why =
          detail::check_input(gate, shape, B, detail::block_multiple_msg<Quantizer>()))
    return detail::fail(why);
  if (shape.rows == 0 || shape.cols == 0) return detail::ok();
  if (up == nullptr || !detail::aligned(up, 16))
    return detail::fail("quads: up must be non-null and 16-byte aligned");
  if (const char* why = detail::check_outputs<Quantizer, Layout>(out, args, shape))
    return detail::fail(why);
  const detail::silu_mul_producer<T, B> p{gate, up, shape.rstride(), shape.estride()};
  return detail::dispatch_fused<Quantizer, Layout>(p, shape, out, args, stream);
}

} // namespace quads::kernels
