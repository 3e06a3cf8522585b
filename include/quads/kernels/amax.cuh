// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GPU amax: per tensor (per expert of a stack), per row, and amax -> tensor scale.
//!
//! Semantics are those of `quads::reference::amax`: max |x| ignoring NaN, Inf counts, 0 for an
//! empty or all-NaN input. On the device `fmaxf(m, |x|)` with `m` never NaN is exactly
//! `detail::max_num`, and max is order-independent, so the result is bit-identical to the host.
//! Across CTAs the tensor amax is combined in one of two ways:
//! - one CTA covers the tensor (per expert): it stores the result, one launch;
//! - otherwise `atomicMax` on the fp32 bits (monotonic for non-negative floats, +Inf =
//!   0x7f800000 included) into a buffer zeroed first: by `cudaMemsetAsync` for one-round calls,
//!   by `zero_floats_kernel` for larger ones, where both kernels are launched programmatically
//!   (a memset ends the stream's chain of programmatic launches; the tenth session measured
//!   the pair 1 us faster at 8192 x 8192, and a plainly launched zeroing kernel slower than the
//!   memset). (Measured slower on the H200 and removed in the seventh session: a cluster whose
//!   CTAs meet in distributed shared memory, a cooperative grid barrier;
//!   docs/history/benchmarks.md.)
//! With `accumulate` the result is max(old, new) and nothing is zeroed. bf16 / fp16 inputs are
//! reduced as packed pairs (`packed_amax`).
#pragma once

#include <quads/kernels/common.cuh>

#include <algorithm>

namespace quads::kernels {

namespace detail {

inline constexpr int amax_threads = 256;
inline constexpr int amax_unroll = 4;

//! max over the CTA; every thread gets the result. `red` holds >= blockDim.x / 32 floats.
QUADS_DEVICE_API float cta_max(float m, float* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  const int warps = static_cast<int>(blockDim.x >> 5);
  if ((threadIdx.x & 31u) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < warps; ++w)
    r = fmaxf(r, red[w]);
  __syncthreads(); // `red` may be reused right after
  return r;
}

//! `cta_max` for values that are >= 0 and not NaN, with one barrier: the fp32 bits of such values
//! order like the values, so a warp reduces them with one `redux.sync` (instead of five
//! shuffles), and every thread then reads the warp maxima (at most 8 warps). `red` holds 8
//! floats, 16-byte aligned, that this CTA does not write again before all its threads have
//! passed another barrier (callers alternate two buffers).
QUADS_DEVICE_API float cta_max_nonneg(float m, float* red) {
  const unsigned w = __reduce_max_sync(0xffffffffu, __float_as_uint(m));
  if ((threadIdx.x & 31u) == 0) red[threadIdx.x >> 5] = __uint_as_float(w);
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x >> 5);
  const float4 a = reinterpret_cast<const float4*>(red)[0];
  float4 b = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (warps > 4) b = reinterpret_cast<const float4*>(red)[1];
  const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  unsigned r = __float_as_uint(v[0]);
#pragma unroll
  for (int i = 1; i < 8; ++i)
    if (i < warps) r = max(r, __float_as_uint(v[i]));
  return __uint_as_float(r);
}

//! Deterministic CTA sum: each warp folds its lanes with an xor butterfly (offsets 16, 8, 4,
//! 2, 1; every lane ends with the same value), then the warp sums are added in warp order. `red`
//! holds >= 8 floats.
QUADS_DEVICE_API float cta_sum_ordered(float s, float* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    s = quads::detail::add_rn(s, __shfl_xor_sync(0xffffffffu, s, o));
  const int warps = static_cast<int>(blockDim.x >> 5);
  if ((threadIdx.x & 31u) == 0) red[threadIdx.x >> 5] = s;
  __syncthreads();
  float total = red[0];
  for (int w = 1; w < warps; ++w)
    total = quads::detail::add_rn(total, red[w]);
  __syncthreads();
  return total;
}

//! Non-negative float max into `*dst` (as bits; valid because both are >= 0 and not NaN).
QUADS_DEVICE_API void atomic_max_nonneg(float* dst, float v) {
  atomicMax(reinterpret_cast<unsigned int*>(dst), __float_as_uint(v));
}

//! Running max |x| of 16-bit elements as a packed pair (bf16x2 / half2): `__hmax2` returns the
//! other operand when one is NaN, like `fmaxf`, and the accumulator starts at +0 and is never
//! NaN, so folding both halves with `fmaxf` at the end gives exactly the fp32 `fmaxf` chain
//! (max is exact and order-independent; |x| by clearing the sign bits, never -0).
template <class T>
struct packed_amax {
  using P = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
  std::uint32_t bits = 0;
  QUADS_DEVICE_API void add(uint4 w) {
    const std::uint32_t u[4] = {w.x & 0x7fff7fffu, w.y & 0x7fff7fffu, w.z & 0x7fff7fffu,
                                w.w & 0x7fff7fffu};
    const P a = __hmax2(*reinterpret_cast<const P*>(&u[0]), *reinterpret_cast<const P*>(&u[1]));
    const P b = __hmax2(*reinterpret_cast<const P*>(&u[2]), *reinterpret_cast<const P*>(&u[3]));
    const P c = __hmax2(a, b);
    const P m = __hmax2(*reinterpret_cast<const P*>(&bits), c);
    bits = *reinterpret_cast<const std::uint32_t*>(&m);
  }
  QUADS_DEVICE_API float value(float m) const {
    const P p = *reinterpret_cast<const P*>(&bits);
    return fmaxf(m, fmaxf(to_float(p.x), to_float(p.y)));
  }
};

template <class T>
QUADS_DEVICE_API float amax_of_word(uint4 w, float m) {
  raw_block<T, 16 / sizeof(T)> r;
  r.w[0] = w;
  float v[16 / sizeof(T)];
  widen(r, v);
#pragma unroll
  for (int i = 0; i < static_cast<int>(16 / sizeof(T)); ++i)
    m = fmaxf(m, fabsf(v[i]));
  return m;
}

//! The 16-byte word `u` of expert `xe` (`vecs` words per row).
template <class T>
QUADS_DEVICE_API uint4 amax_word(const T* xe, const fast_divmod& vecs, std::uint32_t u,
                                 std::int64_t row_stride) {
  std::uint32_t r, c;
  vecs.divmod(u, r, c);
  return *reinterpret_cast<const uint4*>(xe + r * row_stride +
                                         static_cast<std::int64_t>(c) * (16 / sizeof(T)));
}

//! Max |x| over the words `first`, `first + stride`, ... < `total` of expert `xe`, loaded
//! `Unroll` at a time; the last (partial) round is predicated, so its loads are in flight
//! together too (a serial tail loop cost one memory round trip per word: two at 1 x 4096 bf16).
template <class T, int Unroll = amax_unroll>
QUADS_DEVICE_API float thread_amax(const T* xe, const fast_divmod& vecs, std::uint32_t total,
                                   std::int64_t row_stride, std::uint32_t first,
                                   std::uint32_t stride) {
  constexpr int amax_unroll = Unroll; // (shadows the default)
  float m = 0.0f;
  [[maybe_unused]] packed_amax<T> pm;
  std::uint32_t u = first;
  for (; u + (amax_unroll - 1) * stride < total; u += amax_unroll * stride) {
    uint4 w[amax_unroll];
#pragma unroll
    for (int j = 0; j < amax_unroll; ++j)
      w[j] = amax_word(xe, vecs, u + j * stride, row_stride);
#pragma unroll
    for (int j = 0; j < amax_unroll; ++j) {
      if constexpr (sizeof(T) == 2)
        pm.add(w[j]);
      else
        m = amax_of_word<T>(w[j], m);
    }
  }
  if (u < total) { // at most amax_unroll - 1 words left; zeros do not change a max of |x|
    uint4 w[amax_unroll - 1];
#pragma unroll
    for (int j = 0; j < amax_unroll - 1; ++j)
      w[j] = u + j * stride < total ? amax_word(xe, vecs, u + j * stride, row_stride)
                                    : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int j = 0; j < amax_unroll - 1; ++j) {
      if constexpr (sizeof(T) == 2)
        pm.add(w[j]);
      else
        m = amax_of_word<T>(w[j], m);
    }
  }
  if constexpr (sizeof(T) == 2) m = pm.value(m);
  return m;
}

//! How `tensor_amax_kernel` publishes its CTA's max.
enum class amax_store : int {
  atomic = 0,     //!< atomicMax into a buffer zeroed before (or accumulating)
  direct = 1,     //!< the only CTA of its expert: store
  direct_max = 2, //!< the only CTA, accumulating: max(old, new)
};

//! Max over the CTA of non-negative, non-NaN values, valid in thread 0 only: warp maxima by
//! `redux.sync` on the fp32 bits, then warp 0 folds them (one barrier; any CTA size).
QUADS_DEVICE_API float cta_max_thread0(float m, float* red) {
  const unsigned w = __reduce_max_sync(0xffffffffu, __float_as_uint(m));
  if ((threadIdx.x & 31u) == 0) red[threadIdx.x >> 5] = __uint_as_float(w);
  __syncthreads();
  unsigned r = 0;
  if (threadIdx.x < 32) {
    if (threadIdx.x < (blockDim.x >> 5)) r = __float_as_uint(red[threadIdx.x]);
    r = __reduce_max_sync(0xffffffffu, r);
  }
  return __uint_as_float(r);
}

//! Tensor amax of each expert (blockIdx.y) over 16-byte words; `vecs` = words per row.
//! `Threads` per CTA, `Unroll` words in flight per thread (chosen by size in
//! `enqueue_tensor_amax`, which also chooses whether to launch it programmatically).
template <class T, int Threads = amax_threads, int Unroll = amax_unroll>
__global__ void __launch_bounds__(Threads)
    tensor_amax_kernel(const T* x, fast_divmod vecs, std::uint32_t total, std::int64_t row_stride,
                       std::int64_t expert_stride, float* amax, int store) {
  pdl_enter(); // launched programmatically above one round (`enqueue_tensor_amax`)
  __shared__ float red[Threads / 32];
  const T* xe = x + static_cast<std::int64_t>(blockIdx.y) * expert_stride;
  float m = thread_amax<T, Unroll>(xe, vecs, total, row_stride,
                                   blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
  m = cta_max_thread0(m, red);
  if (threadIdx.x == 0) {
    if (store == static_cast<int>(amax_store::direct)) {
      amax[blockIdx.y] = m;
    } else if (store == static_cast<int>(amax_store::direct_max)) {
      amax[blockIdx.y] = fmaxf(amax[blockIdx.y], m);
    } else {
      atomic_max_nonneg(amax + blockIdx.y, m);
    }
  }
}

//! Zeroes `n` floats for the atomics of a programmatic `tensor_amax_kernel` launch: unlike
//! `cudaMemsetAsync`, a kernel keeps the stream's chain of programmatic launches (the amax kernel's
//! CTAs are placed while this one finishes). Launched programmatically too.
template <int = 0> // a template, so the header can be in several TUs
__global__ void zero_floats_kernel(float* p, int n) {
  pdl_enter();
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x))
    p[i] = 0.0f;
}

//! Row amax: one CTA per row (grid-stride over `experts * rows`).
template <class T>
__global__ void __launch_bounds__(amax_threads)
    row_amax_kernel(const T* x, int rows, int vecs, std::uint32_t total_rows,
                    std::int64_t row_stride, std::int64_t expert_stride, float* amax) {
  __shared__ float red[amax_threads / 32];
  constexpr int E = 16 / sizeof(T);
  for (std::uint32_t er = blockIdx.x; er < total_rows; er += gridDim.x) {
    const std::uint32_t e = er / static_cast<std::uint32_t>(rows);
    const std::uint32_t r = er - e * static_cast<std::uint32_t>(rows);
    const T* xr = x + e * expert_stride + r * row_stride;
    float m = 0.0f;
    for (int c = static_cast<int>(threadIdx.x); c < vecs; c += static_cast<int>(blockDim.x))
      m = amax_of_word<T>(*reinterpret_cast<const uint4*>(xr + static_cast<std::int64_t>(c) * E),
                          m);
    m = cta_max(m, red);
    if (threadIdx.x == 0) amax[er] = m;
  }
}

template <class Quantizer>
__global__ void tensor_scale_from_amax_kernel(const float* amax, tensor_scale* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = make_tensor_scale<typename Quantizer::format, Quantizer::options>(amax[i]);
}

//! Threads of a one-CTA-per-row kernel for rows of `units` work items: a multiple of 32 in
//! [32, 256].
constexpr int cta_threads_for(int units) noexcept {
  const int t = (units + 31) / 32 * 32;
  return t < 32 ? 32 : (t > 256 ? 256 : t);
}

//! Resident CTAs per SM of `Kernel` at `threads` threads (a multiple of 32, <= 1024), cached.
template <auto Kernel>
inline int occupancy(int threads) noexcept {
  static std::atomic<int> cache[33] = {};
  const int slot = threads / 32;
  if (slot >= 0 && slot < 33) {
    const int c = cache[slot].load(std::memory_order_relaxed);
    if (c > 0) return c;
  }
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, threads, 0) != cudaSuccess || n < 1)
    n = 1;
  if (slot >= 0 && slot < 33) cache[slot].store(n, std::memory_order_relaxed);
  return n;
}

//! CTAs for a grid-stride kernel: enough for `work` items, at most what is resident at once
//! (capped at `ctas_per_sm_cap` per SM), divided among `split` grid rows (experts).
template <auto Kernel>
inline unsigned grid_for(int threads, std::uint64_t work, int ctas_per_sm_cap,
                         int split = 1) noexcept {
  const int occ = occupancy<Kernel>(threads);
  const int sms = sm_count() > 0 ? sm_count() : 132;
  std::uint64_t resident =
      static_cast<std::uint64_t>(sms) *
      static_cast<std::uint64_t>(occ < ctas_per_sm_cap ? occ : ctas_per_sm_cap);
  resident = resident / static_cast<std::uint64_t>(split > 0 ? split : 1);
  if (resident < 1) resident = 1;
  std::uint64_t need = (work + static_cast<std::uint64_t>(threads) - 1) / threads;
  if (need < 1) need = 1;
  return static_cast<unsigned>(need < resident ? need : resident);
}

template <class T>
inline const char* check_amax_args(const T* x, const tensor_shape& s, const float* amax) {
  if (const char* why = check_input(x, s, static_cast<int>(16 / sizeof(T)),
                                    "quads: amax needs cols * sizeof(element) to be a multiple "
                                    "of 16 bytes (vector loads)"))
    return why;
  if (amax == nullptr) return "quads: amax output pointer is null";
  if (!aligned(amax, 4)) return "quads: amax output must be 4-byte aligned";
  if (static_cast<std::int64_t>(s.rows) * s.cols >= (std::int64_t{1} << 31))
    return "quads: rows * cols per expert must be < 2^31";
  return nullptr;
}

//! CTAs per expert of the tensor amax pass (`tensor_amax_kernel`).
template <class T>
inline unsigned tensor_amax_grid(const tensor_shape& s) {
  constexpr int E = 16 / sizeof(T);
  const std::uint32_t total =
      static_cast<std::uint32_t>(s.cols / E) * static_cast<std::uint32_t>(s.rows);
  return grid_for<tensor_amax_kernel<T>>(amax_threads, (total + amax_unroll - 1) / amax_unroll, 8,
                                         s.experts);
}

//! A kernel as a type (for generic launch helpers).
template <auto Kernel>
struct kernel_constant {
  static constexpr auto value = Kernel;
};

//! Words per row and per expert of the tensor amax pass.
template <class T>
struct amax_extent {
  std::uint32_t vecs;
  std::uint32_t total;
  explicit amax_extent(const tensor_shape& s)
      : vecs(static_cast<std::uint32_t>(s.cols / static_cast<int>(16 / sizeof(T)))),
        total(vecs * static_cast<std::uint32_t>(s.rows)) {}
};

//! Enqueues the tensor amax pass as `tensor_amax` describes (rows, cols > 0); returns the launch
//! status. Threads and words in flight by size, the fastest measured on the H200
//! (docs/history/benchmarks.md, "Small calls, sixth session", 2026-11-30 10:23 UTC, cold isolated
//! calls): 256 threads x 2 words when the grid covers the tensor in one round (16 / 64 x 4096
//! bf16: 4.61 / 4.77 us against 4.74 / 4.90 us with 4 words), 1024 threads x 8 words from 4 Mi
//! words (8192 x 8192 bf16: 33.2 us against 33.5 us), else 256 x 4. The kernels of more than one
//! round are launched programmatically, after `zero_floats_kernel` where the output is zeroed
//! (8192 x 8192 bf16 back to back: 32.3 us against 33.3-33.5 with `cudaMemsetAsync` and plain
//! launches; a plain zeroing kernel was slower than the memset: 34.4-34.9 us;
//! docs/history/benchmarks.md, "Tenth session").
template <class T>
inline cudaError_t enqueue_tensor_amax(const T* x, const tensor_shape& s, float* amax,
                                       cudaStream_t stream, bool accumulate) {
  const amax_extent<T> ext(s);
  const unsigned experts = static_cast<unsigned>(s.experts);
  const unsigned gx = tensor_amax_grid<T>(s);
  if (gx == 1) { // one CTA per expert: it stores the result
    tensor_amax_kernel<T><<<dim3(1, experts), amax_threads, 0, stream>>>(
        x, fast_divmod(ext.vecs), ext.total, s.rstride(), s.estride(), amax,
        static_cast<int>(accumulate ? amax_store::direct_max : amax_store::direct));
    return cudaGetLastError();
  }
  const std::uint64_t one_round = static_cast<std::uint64_t>(sm_count() > 0 ? sm_count() : 132) *
                                  static_cast<std::uint64_t>(occupancy<tensor_amax_kernel<T>>(
                                      amax_threads)) *
                                  amax_threads * 2u / experts;
  const bool programmatic = ext.total > one_round;
  if (!accumulate) { // with `accumulate`: atomics into the caller's values, nothing to zero
    const cudaError_t e =
        programmatic
            ? launch_kernel(true, zero_floats_kernel<>, dim3(1), dim3(cta_threads_for(s.experts)),
                            0, stream, amax, s.experts)
            : cudaMemsetAsync(amax, 0, sizeof(float) * experts, stream);
    if (e != cudaSuccess) return e;
  }
  const auto launch = [&](auto kernel, int threads, int unroll) {
    constexpr auto k = decltype(kernel)::value;
    const unsigned g = grid_for<k>(threads, (ext.total + unroll - 1) / unroll, 8, s.experts);
    return launch_kernel(programmatic, k, dim3(g, experts), dim3(static_cast<unsigned>(threads)),
                         0, stream, x, fast_divmod(ext.vecs), ext.total, s.rstride(), s.estride(),
                         amax, static_cast<int>(amax_store::atomic));
  };
  if (ext.total >= (std::uint32_t{1} << 22))
    return launch(kernel_constant<tensor_amax_kernel<T, 1024, 8>>{}, 1024, 8);
  if (!programmatic) return launch(kernel_constant<tensor_amax_kernel<T, 256, 2>>{}, 256, 2);
  return launch(kernel_constant<tensor_amax_kernel<T>>{}, 256, 4);
}

} // namespace detail

//! Tensor amax of `x` (`[experts, rows, cols]`, strides in elements): writes `experts` floats
//! to device memory `amax` (one per expert), or with `accumulate` max(old, new) (e.g. for amax
//! history). Launches (see the file comment): one kernel when one CTA covers an expert (up to
//! 1024 16-byte words, 1 x 8192 bf16 values), else a zeroing step (none with `accumulate`) and
//! the amax kernel; calls of more than one round on the device launch both programmatically.
//! Requires: `cols * sizeof(T)`, the strides in bytes, and `x` multiples of 16.
template <class T>
cudaError_t tensor_amax(const T* x, const tensor_shape& shape, float* amax,
                        cudaStream_t stream = nullptr, bool accumulate = false) {
  static_assert(is_kernel_element<T>, "quads: element type must be __nv_bfloat16, __half or float");
  if (const char* why = detail::check_amax_args(x, shape, amax)) return detail::fail(why);
  if (shape.rows == 0 || shape.cols == 0) {
    if (accumulate) return detail::ok(); // max(old, 0) = old
    const cudaError_t e =
        cudaMemsetAsync(amax, 0, sizeof(float) * static_cast<std::size_t>(shape.experts), stream);
    return e == cudaSuccess ? detail::ok() : detail::fail(cudaGetErrorString(e), e);
  }
  if (const cudaError_t e = detail::enqueue_tensor_amax(x, shape, amax, stream, accumulate);
      e != cudaSuccess)
    return detail::fail(cudaGetErrorString(e), e);
  return detail::after_launch();
}

//! Row amax: writes `experts * rows` floats (row `r` of expert `e` at `e * rows + r`).
//! Requires what `tensor_amax` requires.
template <class T>
cudaError_t row_amax(const T* x, const tensor_shape& shape, float* amax,
                     cudaStream_t stream = nullptr) {
  static_assert(is_kernel_element<T>, "quads: element type must be __nv_bfloat16, __half or float");
  if (const char* why = detail::check_amax_args(x, shape, amax)) return detail::fail(why);
  if (shape.rows == 0) return detail::ok();
  if (shape.cols == 0) {
    const cudaError_t e = cudaMemsetAsync(
        amax, 0, sizeof(float) * static_cast<std::size_t>(shape.experts) * shape.rows, stream);
    return e == cudaSuccess ? detail::ok() : detail::fail(cudaGetErrorString(e), e);
  }
  constexpr int E = 16 / sizeof(T);
  const int vecs = shape.cols / E;
  const int threads = detail::cta_threads_for(vecs);
  const std::uint32_t total_rows =
      static_cast<std::uint32_t>(shape.experts) * static_cast<std::uint32_t>(shape.rows);
  const unsigned grid = detail::grid_for<detail::row_amax_kernel<T>>(
      threads, static_cast<std::uint64_t>(total_rows) * threads, 16);
  detail::row_amax_kernel<T><<<grid, threads, 0, stream>>>(x, shape.rows, vecs, total_rows,
                                                           shape.rstride(), shape.estride(), amax);
  return detail::after_launch();
}

//! `out[i] = make_tensor_scale<Format, Options>(amax[i])` for `i < n` (device pointers), with
//! `Quantizer = block_quantizer<Format, Options>`: the one amax -> scale rule, on the device.
template <class Quantizer>
cudaError_t tensor_scale_from_amax(const float* amax, tensor_scale* out, int n,
                                   cudaStream_t stream = nullptr) {
  if (n < 0) return detail::fail("quads: n must be >= 0");
  if (n > 0 && (amax == nullptr || out == nullptr))
    return detail::fail("quads: amax / tensor scale pointer is null");
  if (n == 0) return detail::ok();
  detail::tensor_scale_from_amax_kernel<Quantizer>
      <<<(n + 255) / 256, 256, 0, stream>>>(amax, out, n);
  return detail::after_launch();
}

} // namespace quads::kernels
