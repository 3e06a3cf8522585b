// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GPU dequantize: packed E2M1 + block scales (+ tensor scales) -> bf16 / fp16 / fp32.
//!
//! Each value is `Quantizer::decode(code, scale_byte, ts)` (the one QDQ path): fp32 output equals
//! `reference::dequantize` bit for bit; bf16 / fp16 outputs are the RNE cast of that fp32 value.
//! One thread per block: one 8- or 16-byte code load, one scale byte, 16-byte stores.
#pragma once

#include <quads/kernels/amax.cuh>
#include <quads/kernels/common.cuh>
#include <quads/kernels/quantize.cuh>

namespace quads::kernels {

namespace detail {

inline constexpr int dequant_threads = 256;
//! Blocks per thread per loop iteration (loads in flight).
inline constexpr int dequant_blocks_per_iteration = 4;

template <class Quantizer, class Layout, class TOut>
__global__ void __launch_bounds__(dequant_threads)
    dequantize_kernel(const std::uint8_t* data, const std::uint8_t* scales,
                      const tensor_scale* tensor_scales, fast_divmod nkb, std::uint32_t total,
                      int rows, Layout layout, std::size_t layout_size, TOut* y,
                      std::int64_t row_stride, std::int64_t expert_stride) {
  using F = typename Quantizer::format;
  constexpr int B = F::block_size;
  constexpr bool per_row =
      F::has_tensor_scale && Quantizer::options.global == global_scale::per_row;
  const int e = static_cast<int>(blockIdx.y);
  tensor_scale ts{};
  if constexpr (F::has_tensor_scale && !per_row) ts = tensor_scales[e];
  const std::uint8_t* de = data + static_cast<std::size_t>(e) * rows * nkb.divisor * (B / 2);
  const std::uint8_t* se = scales + static_cast<std::size_t>(e) * layout_size;
  TOut* ye = y + e * expert_stride;
  const std::uint32_t stride = gridDim.x * blockDim.x;
  constexpr int U = dequant_blocks_per_iteration;
  for (std::uint32_t u = blockIdx.x * blockDim.x + threadIdx.x; u < total; u += U * stride) {
    // all loads of U blocks first (codes, scale bytes, row scales), then decode and store
    block_words<B> q[U];
    std::uint32_t r[U], kb[U];
    tensor_scale tsr[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const std::uint32_t uj = u + j * stride;
      tsr[j] = ts;
      if (j == 0 || uj < total) {
        nkb.divmod(uj, r[j], kb[j]);
        const std::uint8_t* p = de + static_cast<std::size_t>(uj) * (B / 2);
        if constexpr (B == 16) {
          const uint2 w = *reinterpret_cast<const uint2*>(p);
          q[j].w[0] = w.x;
          q[j].w[1] = w.y;
        } else {
#pragma unroll
          for (int i = 0; i < B / 32; ++i) {
            const uint4 w = reinterpret_cast<const uint4*>(p)[i];
            q[j].w[4 * i] = w.x;
            q[j].w[4 * i + 1] = w.y;
            q[j].w[4 * i + 2] = w.z;
            q[j].w[4 * i + 3] = w.w;
          }
        }
        q[j].scale = se[nonneg_offset(layout, static_cast<int>(r[j]), static_cast<int>(kb[j]))];
        if constexpr (per_row) tsr[j] = tensor_scales[static_cast<std::size_t>(e) * rows + r[j]];
      }
    }
#pragma unroll
    for (int j = 0; j < U; ++j) {
      if (j == 0 || u + j * stride < total) {
        float v[B];
        dequantize_block<Quantizer>(q[j], tsr[j], v);
        store_narrow<TOut, B>(ye + r[j] * row_stride + static_cast<std::int64_t>(kb[j]) * B, v);
      }
    }
  }
}

} // namespace detail

//! Dequantizes `q` (a `[experts, rows, cols]` quantized tensor laid out as `quantized_view`
//! describes, scales in `Layout`) into `y` of `__nv_bfloat16`, `__half` or `float`, with the
//! geometry and the output strides in `shape`. `q.tensor_scales` holds `experts` entries
//! (`experts * rows` when `Options.global == per_row`); it may be null for MXFP4.
//! Requires: `cols % block_size == 0`; `y` and its strides in bytes multiples of 16; `q.data`
//! aligned to `block_size / 2` bytes.
template <class Quantizer, scale_layout Layout = linear_scales, class TOut>
cudaError_t dequantize(const const_quantized_view& q, TOut* y, const tensor_shape& shape,
                       cudaStream_t stream = nullptr) {
  static_assert(is_kernel_element<TOut>,
                "quads: element type must be __nv_bfloat16, __half or float");
  using F = typename Quantizer::format;
  constexpr int B = F::block_size;
  if (shape.rows > 0 && shape.cols > 0 && (y == nullptr || !detail::aligned(y, 16)))
    return detail::fail("quads: output y must be non-null and 16-byte aligned (vector stores)");
  if (const char* why =
          detail::check_input<TOut>(y, shape, B,
                                    B == 16 ? "quads: cols (K) must be a multiple of 16"
                                            : "quads: cols (K) must be a multiple of 32"))
    return detail::fail(why);
  if (shape.rows == 0 || shape.cols == 0) return detail::ok();
  if (q.data == nullptr || q.scales == nullptr)
    return detail::fail("quads: q.data / q.scales is null");
  if (!detail::aligned(q.data, B / 2))
    return detail::fail("quads: q.data must be aligned to block_size / 2 bytes");
  if (F::has_tensor_scale && q.tensor_scales == nullptr)
    return detail::fail("quads: q.tensor_scales is null (needed for nvfp4)");
  if (static_cast<std::int64_t>(shape.rows) * shape.cols >= (std::int64_t{1} << 31))
    return detail::fail("quads: rows * cols per expert must be < 2^31");
  const std::uint32_t nkb = static_cast<std::uint32_t>(shape.cols / B);
  const std::uint32_t total = nkb * static_cast<std::uint32_t>(shape.rows);
  const Layout layout{shape.rows, shape.cols / B};
  constexpr auto kernel = detail::dequantize_kernel<Quantizer, Layout, TOut>;
  // one block per thread when that fits in one wave (small calls: shorter per-thread latency)
  const std::uint64_t one_wave =
      static_cast<std::uint64_t>(detail::sm_count() > 0 ? detail::sm_count() : 132) *
      static_cast<std::uint64_t>(detail::occupancy<kernel>(detail::dequant_threads)) *
      detail::dequant_threads / static_cast<std::uint64_t>(shape.experts);
  const std::uint64_t work = total <= one_wave
                                 ? total
                                 : (total + detail::dequant_blocks_per_iteration - 1) /
                                       detail::dequant_blocks_per_iteration;
  const unsigned gx = detail::grid_for<kernel>(detail::dequant_threads, work, 8, shape.experts);
  kernel<<<dim3(gx, static_cast<unsigned>(shape.experts)), detail::dequant_threads, 0, stream>>>(
      q.data, q.scales, q.tensor_scales, detail::fast_divmod(nkb), total, shape.rows, layout,
      layout.size(), y, shape.rstride(), shape.estride());
  return detail::after_launch();
}

} // namespace quads::kernels
