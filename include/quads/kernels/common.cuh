// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Shared pieces of the GPU kernels: error reporting, shapes, views, vector I/O.
//!
//! Error scheme (every launcher in `quads/kernels/` follows it):
//! - a launcher returns `cudaError_t`; `cudaSuccess` means the work was enqueued on the stream;
//! - an argument check that fails returns `cudaErrorInvalidValue` without enqueuing anything, and
//!   `quads::kernels::last_error_message()` names the argument and the rule it broke;
//! - after enqueuing, a launcher returns `cudaGetLastError()` (so an error left pending by earlier
//!   unrelated work is reported, and cleared, by the next launcher, as with any CUDA launch);
//!   `last_error_message()` then holds `cudaGetErrorString` of it, or "" on success;
//! - `cudaErrorNoKernelImageForDevice` gets a message naming the build option (`gpu_arch`).
//! Launchers never synchronise: no `cudaDeviceSynchronize`, no blocking copies; they only call
//! `cudaMemsetAsync` on the given stream where documented, and the cheap attribute queries
//! `cudaGetDevice` / `cudaDeviceGetAttribute` (cached per device). Some kernels are launched
//! programmatically (`launch_kernel`); they wait for the previous kernel before touching memory.
#pragma once

#if !defined(__CUDACC__)
#  error "quads/kernels/*.cuh need nvcc (CUDA C++)"
#endif

#include <quads/config.hpp>

#include <quads/layout/scale_layouts.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/tensor_scale.hpp>
#include <quads/scheme/schemes.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace quads::kernels {

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

namespace detail {
inline const char*& error_slot() noexcept {
  thread_local const char* message = "";
  return message;
}
} // namespace detail

//! Why the last launcher called on this host thread failed, or "" if it succeeded. The string
//! is static (never freed).
inline const char* last_error_message() noexcept { return detail::error_slot(); }

namespace detail {

//! Records `why` and returns `code` (default `cudaErrorInvalidValue`).
inline cudaError_t fail(const char* why, cudaError_t code = cudaErrorInvalidValue) noexcept {
  error_slot() = why;
  return code;
}

inline cudaError_t ok() noexcept {
  error_slot() = "";
  return cudaSuccess;
}

//! The status after enqueuing kernels (see the file comment).
inline cudaError_t after_launch() noexcept {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return ok();
  if (e == cudaErrorNoKernelImageForDevice)
    return fail("quads: no kernel image for this GPU: rebuild with its architecture in the "
                "meson option gpu_arch (e.g. -Dgpu_arch=90a)",
                e);
  return fail(cudaGetErrorString(e), e);
}

//! Number of multiprocessors of the current device, cached per device (0 on error).
inline int sm_count() noexcept {
  static std::atomic<int> cache[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  if (dev >= 0 && dev < 64) {
    const int c = cache[dev].load(std::memory_order_relaxed);
    if (c > 0) return c;
  }
  int n = 0;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 0;
  if (dev >= 0 && dev < 64) cache[dev].store(n, std::memory_order_relaxed);
  return n;
}

inline bool aligned(const void* p, std::size_t a) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) % a == 0;
}

//! Whether a call of `blocks` quantization blocks is small (at most 128 per SM): such calls are
//! latency-bound, take the one-wave kernels and launch plainly (programmatic launch measured
//! slower for them isolated).
inline bool small_call(std::uint64_t blocks) noexcept {
  const int sms = sm_count();
  return blocks <= static_cast<std::uint64_t>(sms > 0 ? sms : 132) * 128u;
}

// Programmatic dependent launch (PDL, sm_90+). A kernel launched programmatically may
// start while the previous kernel of the stream is still finishing, so it must call `pdl_wait`
// before its first global memory access (read or write): `griddepcontrol.wait` returns once every
// prerequisite grid has completed and its memory is visible (at once when there is none).
// `pdl_release` lets the next programmatic launch of the stream place its CTAs as this grid's
// CTAs retire; its own `pdl_wait` still waits for this whole grid. Both are no-ops before sm_90.

//! Waits for the grids this one depends on (see above).
QUADS_DEVICE_API void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

//! Lets the next programmatically launched kernel of the stream start its CTAs (see above).
QUADS_DEVICE_API void pdl_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

//! The start of a programmatically launched kernel: wait for the previous grids, then let the
//! next programmatic launch place its CTAs.
QUADS_DEVICE_API void pdl_enter() {
  pdl_wait();
  pdl_release();
}

//! Launches `kernel` with `smem` bytes of dynamic shared memory, with the
//! programmatic-stream-serialization attribute when `programmatic` is set (see above; the attribute
//! is ignored before sm_90 and after predecessors that are not kernels).
template <class... Params, class... Args>
inline cudaError_t launch_kernel(bool programmatic, void (*kernel)(Params...), dim3 grid,
                                 dim3 block, std::size_t smem, cudaStream_t stream,
                                 Args&&... args) {
  cudaLaunchAttribute attr[1]{};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = programmatic ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Args&&>(args)...);
}

//! The launch configuration of a grid (cluster_x, y, z) whose x dimension is one thread-block
//! cluster of `cluster_x` CTAs (no cluster attribute for one), `threads` per CTA, `smem` dynamic
//! bytes; `programmatic` adds the programmatic-stream-serialization attribute (see above). Not
//! copyable: `cfg.attrs` points into the object.
struct cluster_launch_config {
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr[2]{};
  cluster_launch_config(int cluster_x, unsigned y, unsigned z, int threads, int smem,
                        cudaStream_t stream, bool programmatic = false) {
    cfg.gridDim = dim3(static_cast<unsigned>(cluster_x), y, z);
    cfg.blockDim = dim3(static_cast<unsigned>(threads));
    cfg.dynamicSmemBytes = static_cast<std::size_t>(smem);
    cfg.stream = stream;
    cfg.attrs = attr;
    if (cluster_x > 1) {
      cudaLaunchAttribute& a = attr[cfg.numAttrs++];
      a.id = cudaLaunchAttributeClusterDimension;
      a.val.clusterDim.x = static_cast<unsigned>(cluster_x);
      a.val.clusterDim.y = 1;
      a.val.clusterDim.z = 1;
    }
    if (programmatic) {
      cudaLaunchAttribute& a = attr[cfg.numAttrs++];
      a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      a.val.programmaticStreamSerializationAllowed = 1;
    }
  }
  cluster_launch_config(const cluster_launch_config&) = delete;
  cluster_launch_config& operator=(const cluster_launch_config&) = delete;
};

//! Launches `kernel` on grid (cluster_x, y, z) as `cluster_launch_config` describes; reports a
//! refused launch (`fail`) or the launch's own error (`after_launch`).
template <class... Params, class... Args>
cudaError_t launch_clustered(void (*kernel)(Params...), const cluster_launch_config& c,
                             Args&&... args) {
  if (const cudaError_t e = cudaLaunchKernelEx(&c.cfg, kernel, static_cast<Args&&>(args)...);
      e != cudaSuccess)
    return fail(cudaGetErrorString(e), e);
  return after_launch();
}

//! `launch_clustered` of a plain (non-programmatic) launch.
template <class... Params, class... Args>
cudaError_t launch_clustered(void (*kernel)(Params...), int cluster_x, unsigned y, unsigned z,
                             int threads, int smem, cudaStream_t stream, Args&&... args) {
  return launch_clustered(kernel, cluster_launch_config(cluster_x, y, z, threads, smem, stream),
                          static_cast<Args&&>(args)...);
}

} // namespace detail

// ---------------------------------------------------------------------------------------------
// Shapes and views
// ---------------------------------------------------------------------------------------------

//! A row-major `[experts, rows, cols]` tensor (experts = 1 for a matrix) with strides in
//! elements. Blocks run along `cols` (K).
struct tensor_shape {
  int experts = 1;
  int rows = 0;
  int cols = 0;
  std::int64_t row_stride = 0;    //!< elements between consecutive rows; 0 means `cols`
  std::int64_t expert_stride = 0; //!< elements between experts; 0 means `rows * row_stride`

  constexpr std::int64_t rstride() const noexcept { return row_stride != 0 ? row_stride : cols; }
  constexpr std::int64_t estride() const noexcept {
    return expert_stride != 0 ? expert_stride : static_cast<std::int64_t>(rows) * rstride();
  }
};

//! A quantized `[experts, rows, cols]` tensor in device memory, the layout of
//! `quads::reference::quantized_tensor`:
//! - `data`: packed E2M1 codes, `experts * rows * cols / 2` bytes, contiguous (row `r` of expert
//!   `e` starts at byte `(e * rows + r) * cols / 2`; element 2i in the low nibble);
//! - `scales`: `batched<Layout>{experts, Layout{rows, cols / block_size}}.size()` bytes;
//!   swizzled padding is written as zero by the kernels;
//! - `tensor_scales`: `experts` entries (`experts * rows` with `global_scale::per_row`); may be
//!   null for schemes without a tensor scale (MXFP4), otherwise written by quantize launchers
//!   (with `global_scale::given` they receive a copy of the given scales, broadcast to experts).
struct quantized_view {
  std::uint8_t* data = nullptr;
  std::uint8_t* scales = nullptr;
  tensor_scale* tensor_scales = nullptr;
};

//! Read-only twin of `quantized_view` (the input of dequantize).
struct const_quantized_view {
  const std::uint8_t* data = nullptr;
  const std::uint8_t* scales = nullptr;
  const tensor_scale* tensor_scales = nullptr;
};

//! Where the second-level scale comes from, per `Quantizer::options.global` (two-level schemes):
//! - `per_tensor`: computed; `amax_workspace` must hold `experts` floats of device memory, which
//!   the amax pass (`tensor_amax`: zeroed with `cudaMemsetAsync` unless one CTA covers an
//!   expert) fills with each expert's amax, then the quantize pass converts amax -> scale with
//!   `make_tensor_scale`;
//! - `per_row`: computed in the same kernel (one CTA per row), no workspace;
//! - `given`: `given` points to `given_count` (1, or `experts`) device `tensor_scale`s.
//! `seed` keys the Philox generator of stochastic rounding (block index as in the reference).
struct scale_args {
  const tensor_scale* given = nullptr;
  int given_count = 0;
  float* amax_workspace = nullptr;
  std::uint64_t seed = 0;
};

// ---------------------------------------------------------------------------------------------
// Element types and 16-byte vector I/O
// ---------------------------------------------------------------------------------------------

//! Input/output element types the kernels take: `__nv_bfloat16`, `__half`, `float`.
template <class T>
inline constexpr bool is_kernel_element =
    std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half> || std::is_same_v<T, float>;

namespace detail {

//! Unsigned 32-bit division by a run-time constant with a multiply-high and a shift
//! (Granlund-Montgomery round-up method, exact for every 32-bit dividend).
struct fast_divmod {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 1;
  std::uint32_t shift = 0;

  fast_divmod() = default;
  QUADS_HOST_DEVICE explicit fast_divmod(std::uint32_t d) : divisor(d) {
    std::uint32_t l = 0;
    while ((std::uint64_t{1} << l) < d)
      ++l;
    shift = l;
    multiplier = static_cast<std::uint32_t>(
        ((std::uint64_t{1} << 32) * ((std::uint64_t{1} << l) - d)) / d + 1);
  }
  QUADS_API std::uint32_t div(std::uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const std::uint32_t t = __umulhi(n, multiplier);
#else
    const std::uint32_t t = static_cast<std::uint32_t>((std::uint64_t{n} * multiplier) >> 32);
#endif
    return static_cast<std::uint32_t>((std::uint64_t{t} + n) >> shift);
  }
  QUADS_API void divmod(std::uint32_t n, std::uint32_t& q, std::uint32_t& r) const {
    q = div(n);
    r = n - q * divisor;
  }
};

template <class T>
QUADS_DEVICE_API float to_float(T v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else
    return v;
}

//! fp32 -> T, round to nearest even (the only rounding of the bf16/fp16 outputs).
template <class T>
QUADS_DEVICE_API T from_float(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(v);
  else
    return v;
}

//! Raw storage of `N` elements of `T` as 16-byte words (`N * sizeof(T)` a multiple of 16).
template <class T, int N>
struct raw_block {
  static_assert((N * sizeof(T)) % 16 == 0);
  static constexpr int words = static_cast<int>(N * sizeof(T) / 16);
  uint4 w[words];
};

//! Loads `N` consecutive elements (16-byte aligned) as 16-byte words.
template <class T, int N>
QUADS_DEVICE_API void load_raw(const T* p, raw_block<T, N>& r) {
  const uint4* q = reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int i = 0; i < raw_block<T, N>::words; ++i)
    r.w[i] = q[i];
}

//! Widens raw words to fp32 (exact for bf16 / fp16).
template <class T, int N>
QUADS_DEVICE_API void widen(const raw_block<T, N>& r, float (&v)[N]) {
#pragma unroll
  for (int i = 0; i < raw_block<T, N>::words; ++i) {
    const std::uint32_t u[4] = {r.w[i].x, r.w[i].y, r.w[i].z, r.w[i].w};
    if constexpr (std::is_same_v<T, float>) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        v[4 * i + j] = __uint_as_float(u[j]);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[8 * i + 2 * j] = __uint_as_float(u[j] << 16);
        v[8 * i + 2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&u[j]));
        v[8 * i + 2 * j] = f.x;
        v[8 * i + 2 * j + 1] = f.y;
      }
    }
  }
}

//! `N` fp32 values as `T` (RNE), packed into 16-byte words.
template <class T, int N>
QUADS_DEVICE_API void narrow_words(const float (&v)[N], raw_block<T, N>& r) {
#pragma unroll
  for (int i = 0; i < raw_block<T, N>::words; ++i) {
    std::uint32_t u[4];
    if constexpr (std::is_same_v<T, float>) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        u[j] = __float_as_uint(v[4 * i + j]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const T lo = from_float<T>(v[8 * i + 2 * j]);
        const T hi = from_float<T>(v[8 * i + 2 * j + 1]);
        u[j] = static_cast<std::uint32_t>(*reinterpret_cast<const unsigned short*>(&lo)) |
               (static_cast<std::uint32_t>(*reinterpret_cast<const unsigned short*>(&hi)) << 16);
      }
    }
    r.w[i] = make_uint4(u[0], u[1], u[2], u[3]);
  }
}

//! Stores `N` fp32 values as `T` (RNE) with 16-byte stores (destination 16-byte aligned).
template <class T, int N>
QUADS_DEVICE_API void store_narrow(T* p, const float (&v)[N]) {
  raw_block<T, N> r;
  narrow_words<T, N>(v, r);
  uint4* q = reinterpret_cast<uint4*>(p);
#pragma unroll
  for (int i = 0; i < raw_block<T, N>::words; ++i)
    q[i] = r.w[i];
}

// ---------------------------------------------------------------------------------------------
// Fast block arithmetic, bit-identical to the core functors (verified by the GPU tests)
// ---------------------------------------------------------------------------------------------

//! Block amax as a tree of `fmaxf(|a|, |b|)` (depth log2 N, not N). Equal to
//! `block_quantizer::amax` for every input: `fmaxf` returns the other operand when one is NaN, a
//! node is NaN only when all of its leaves are, and the final `fmaxf(0, t)` maps an all-NaN block
//! to 0, as `max_num` from 0 does; max is order-independent and |x| is never -0.
template <int N>
QUADS_DEVICE_API float block_amax(const float (&v)[N]) {
  static_assert(N >= 2 && (N & (N - 1)) == 0);
  float t[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i)
    t[i] = fmaxf(fabsf(v[2 * i]), fabsf(v[2 * i + 1]));
#pragma unroll
  for (int w = N / 4; w >= 1; w /= 2) {
#pragma unroll
    for (int i = 0; i < w; ++i)
      t[i] = fmaxf(t[i], t[i + w]);
  }
  return fmaxf(0.0f, t[0]);
}

//! Tree sum (NaN iff some value is NaN, or +Inf and -Inf both occur): the cheap NaN detector of
//! the fast encoder path (FP32 pipe, depth log2 N).
template <int N>
QUADS_DEVICE_API float tree_sum(const float (&v)[N]) {
  static_assert(N >= 2 && (N & (N - 1)) == 0);
  float t[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i)
    t[i] = __fadd_rn(v[2 * i], v[2 * i + 1]);
#pragma unroll
  for (int w = N / 4; w >= 1; w /= 2) {
#pragma unroll
    for (int i = 0; i < w; ++i)
      t[i] = __fadd_rn(t[i], t[i + w]);
  }
  return t[0];
}

//! E2M1 codes of 8 scaled values, element i in nibble i: the core's `encode_e2m1_not_nan` (its
//! 32-bit form `e2m1_code_not_nan`), so
//! callers test a whole block set for NaN once and route NaN blocks to `encode_e2m1x8`.
QUADS_DEVICE_API std::uint32_t encode_e2m1x8_not_nan(const float (&s)[8]) {
  std::uint32_t w = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i)
    w += e2m1_code_not_nan(s[i]) << (4 * i); // codes <= 15: + is |, and one LEA each
  return w;
}

//! 8 codes with the core encoder (any input, NaN included).
QUADS_DEVICE_API std::uint32_t encode_e2m1x8(const float (&s)[8]) {
  std::uint32_t w = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i)
    w |= static_cast<std::uint32_t>(encode_e2m1(s[i])) << (4 * i);
  return w;
}

// ---------------------------------------------------------------------------------------------
// "Turbo" NVFP4 block path for 16-bit inputs (bf16 / fp16), nearest-even, amax -> 6, IEEE scale
// math: the same bytes as `block_quantizer::quantize` with fewer instructions per element.
// - block amax on the packed 16-bit words with a NaN-propagating max (exact: max is exact and
//   widening is exact), so one test per block finds NaN inputs (those blocks take the generic
//   path, whose encoder maps NaN to +6);
// - the multiplier is looked up by scale byte in a per-CTA table of the core's expression
//   `rcp_rn_satfinite(decode_ue4m3(byte) * ts.decode)`, filled once per CTA; the byte itself is
//   the core's `encode_ue4m3(amax * (ts.encode * RN(1/6)))`;
// - the element's sign is that of x (the multiplier is checked to be positive and finite, so
//   x * m is never NaN and keeps x's sign), and the 8 sign bits of a code word come from the
//   raw words with byte permutes instead of a shift and a mask per element;
// - the magnitude is the core's one-add encoder with the add written as an FMA of the exact
//   product binade * 2^22 (same single rounding) and the step count read from the sum's bits
//   (see `e2m1_turbo_t` below); the dequantized magnitude is the sum minus the same product
//   (exact), so QDQ needs no decoder.
// ---------------------------------------------------------------------------------------------

//! One scaled value's E2M1 magnitude: `e2m1_turbo_t(s) - 298` is `encode_e2m1_not_nan(s) & 7`
//! (`t` is what the packer accumulates; the constant is subtracted once per word), and
//! `e2m1_turbo_q(s)` is `decode_e2m1` of it (0, 0.5, ..., 6, non-negative). Derivation:
//! a = min(|s|, 6), 2^E the binade of max(a, 1), sum = RN(a + 2^(E + 22)) = 2^(E + 22) + steps *
//! 2^(E - 1) with steps <= 4, so the bits of sum are ((E + 149) << 23) | steps and
//! code = steps + 2E = (sum & 15) + (sum >> 22) - 298.
//! Tested against the core codec for all 2^32 inputs (test/gpu/turbo_test.cu).
QUADS_DEVICE_API std::uint32_t e2m1_turbo_t(float s) {
  const float a = fminf(fabsf(s), 6.0f);
  const float bf = __uint_as_float(__float_as_uint(fmaxf(a, 1.0f)) & 0x7f800000u);
  const std::uint32_t u = __float_as_uint(__fmaf_rn(bf, 4194304.0f, a));
  return (u & 15u) + (u >> 22);
}
QUADS_DEVICE_API float e2m1_turbo_q(float s) {
  const float a = fminf(fabsf(s), 6.0f);
  const float bf = __uint_as_float(__float_as_uint(fmaxf(a, 1.0f)) & 0x7f800000u);
  const float sum = __fmaf_rn(bf, 4194304.0f, a);
  return __fmaf_rn(bf, -4194304.0f, sum); // exact: a multiple of the binade's step, <= 6
}
//! Sum over the 8 nibbles of 298 (subtracted once from the packed word).
inline constexpr std::uint32_t e2m1_turbo_bias = 298u * 0x11111111u;

// ---------------------------------------------------------------------------------------------
// Saturating encoder ("sat path") of the turbo blocks: fewer integer-pipe instructions per value.
// For a block whose largest scaled magnitude is below 7, with the block multiplier m / 8 exact
// (a table entry; `m8` below), each value is encoded from a8 = sat(RN(|x| * m / 8)) = RN(|x| * m)
// / 8 (one FMUL.SAT: the |x| and the clamp are operand modifiers, the clamp never binds):
// bf = binade of max(a8, 1/8) (2^(E - 3), E = 0, 1, 2), sum = RN(a8 + bf * 2^22) rounds a8 to
// the E2M1 spacing of that binade with ties to even (the core's one-add encoder scaled by 1/8),
// so bits(sum) = ((146 + E) << 23) + steps and code = steps + 2E. The nibbles are summed with
// integer multiply-adds (FMA pipe) instead of masks, shifts and LEAs (the half-rate integer
// pipe): steps * 16^i is bits(sum) * 16^i (the exponent bits fall out of 32 bits for i >= 3, and
// are masked once for i < 3), and 2E * 16^i comes from bf's bits (mulhi for right shifts). The
// multipliers live in constant memory so that ptxas cannot strength-reduce them to shifts. The
// dequantized magnitude / 8 is sum - bf * 2^22 (exact). About 40 % fewer integer-pipe
// instructions per element; on the H200 (2026-11-30 04:40 UTC) 2-3 % faster at 8192 x 8192
// (the kernels are not bound by that pipe at the real clock; docs/history/benchmarks.md).
// Tested against the core codec for every input below 7 in magnitude (all 2^32 bit patterns
// swept, test/gpu/turbo_test.cu).
// ---------------------------------------------------------------------------------------------

//! `sat_pack`'s multipliers: 16^i (i < 8), then 2^(10 + 4i) (mulhi, i <= 5), then 4 and 64
//! (i = 6, 7).
struct pack_mul_table {
  std::uint32_t v[16];
};
constexpr pack_mul_table pack_mul_values() noexcept {
  return {{1u, 16u, 256u, 4096u, 65536u, 1u << 20, 1u << 24, 1u << 28, 1u << 10, 1u << 14, 1u << 18,
           1u << 22, 1u << 26, 1u << 30, 4u, 64u}};
}
//! The same in constant memory (`pack_mul::constant`).
static __constant__ pack_mul_table turbo_pack_mul = pack_mul_values();

//! Sum over the 8 nibbles of 248 (the bf terms add 248 + 2E per nibble; subtracted once).
inline constexpr std::uint32_t e2m1_sat_bias = 248u * 0x11111111u;

//! `mul.rn.sat.f32`: RN(a * b) clamped to [0, 1] (|a| folds into the operand).
QUADS_DEVICE_API float fmul_sat(float a, float b) {
  float d;
  asm("mul.rn.sat.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

//! Bits of the binade 2^(E - 3) of max(a8, 1/8).
QUADS_DEVICE_API std::uint32_t sat_binade(float a8) {
  return __float_as_uint(fmaxf(a8, 0.125f)) & 0x7f800000u;
}
//! RN(a8 + bf * 2^22): a8 rounded to its E2M1 spacing (/ 8), ties to even.
QUADS_DEVICE_API float sat_sum(std::uint32_t bf, float a8) {
  return __fmaf_rn(__uint_as_float(bf), 4194304.0f, a8);
}
//! The saturating encoder's per-value step: `bf` (binade) and `sum` (rounded magnitude) of
//! |x| * m8, where m8 is the block's multiplier / 8 (x must be below 7 after scaling).
QUADS_DEVICE_API void sat_encode(float x, float m8, std::uint32_t& bf, float& sum) {
  const float a8 = fmul_sat(fabsf(x), m8);
  bf = sat_binade(a8);
  sum = sat_sum(bf, a8);
}
//! The dequantized magnitude / 8 (exact).
QUADS_DEVICE_API float sat_value(std::uint32_t bf, float sum) {
  return __fmaf_rn(__uint_as_float(bf), -4194304.0f, sum);
}
//! Where `sat_pack` takes its multipliers from. `constant`: `turbo_pack_mul` (multiply-adds on
//! the FMA pipe; for calls bound by throughput). `immediate`: literals, which ptxas turns into
//! shifts on the integer pipe but which need no memory access: in a cold call the first read of
//! constant bank 3 cost ~0.4 us on the H200 (an early read of it made a 1 x 4096 QDQ 4.26 ->
//! 4.67 us, 2026-11-30 13:27 UTC), for small calls and single-thread epilogues.
enum class pack_mul { constant, immediate };

//! Magnitude codes of 8 values (nibble i from `bf[i]`, `sum[i]`), sign bits zero.
template <pack_mul P = pack_mul::constant>
QUADS_DEVICE_API std::uint32_t sat_pack(const std::uint32_t (&bf)[8], const float (&sum)[8]) {
  constexpr pack_mul_table literal = pack_mul_values();
  const auto mul = [&](int i) {
    if constexpr (P == pack_mul::constant)
      return turbo_pack_mul.v[i];
    else
      return literal.v[i];
  };
  std::uint32_t lo = 0, acc = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const std::uint32_t u = __float_as_uint(sum[i]);
    if (i < 3)
      lo += u * mul(i);
    else
      acc += u * mul(i);
    if (i <= 5)
      acc += __umulhi(bf[i], mul(8 + i));
    else
      acc += bf[i] * mul(8 + i);
  }
  return (lo & 0x7fffffu) + acc - e2m1_sat_bias;
}

//! `prmt.b32` (default mode: selector nibble bit 3 replicates the selected byte's sign bit).
QUADS_DEVICE_API std::uint32_t prmt(std::uint32_t a, std::uint32_t b, std::uint32_t sel) {
  std::uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

//! `decode_e2m1` of the 8 codes of a word (code i in nibble i): the magnitudes' bf16 bit patterns
//! (0, 0.5, 1, 1.5, 2, 3, 4, 6 are all bf16 values) from byte permutes of two 8-entry tables, high
//! bytes {00 3f 3f 3f 40 40 40 40} and low bytes {00 00 80 c0 00 40 80 c0}, then each code's sign
//! bit: ~2.5 integer instructions per code against ~8 for the arithmetic decode.
QUADS_DEVICE_API void decode_e2m1_word(std::uint32_t c, float (&v)[8]) {
  const std::uint32_t m = c & 0x77777777u; // selector nibbles: bit 3 clear (no sign replication)
  const std::uint32_t hi0 = prmt(0x3f3f3f00u, 0x40404040u, m);
  const std::uint32_t hi1 = prmt(0x3f3f3f00u, 0x40404040u, m >> 16);
  const std::uint32_t lo0 = prmt(0xc0800000u, 0xc0804000u, m);
  const std::uint32_t lo1 = prmt(0xc0800000u, 0xc0804000u, m >> 16);
  // bf16 pairs of codes (0, 1), (2, 3), (4, 5), (6, 7): low byte, high byte of each
  const std::uint32_t p[4] = {prmt(lo0, hi0, 0x5140u), prmt(lo0, hi0, 0x7362u),
                              prmt(lo1, hi1, 0x5140u), prmt(lo1, hi1, 0x7362u)};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const std::uint32_t mag = (i & 1) != 0 ? p[i / 2] & 0xffff0000u : p[i / 2] << 16;
    v[i] = __uint_as_float(mag | ((c << (28 - 4 * i)) & 0x80000000u));
  }
}

//! Sign bits of 8 16-bit elements (raw words r0..r3, element 2i in the low half of word i) at
//! bit 3 of nibble i, every other bit zero.
QUADS_DEVICE_API std::uint32_t sign_nibbles16(std::uint32_t r0, std::uint32_t r1, std::uint32_t r2,
                                              std::uint32_t r3) {
  // bytes: sign-replicated high bytes, elements (0, 2, 1, 3) and (4, 6, 5, 7)
  const std::uint32_t e = prmt(r0, r1, 0xfbd9u);
  const std::uint32_t f = prmt(r2, r3, 0xfbd9u);
  const std::uint32_t even = prmt(e, f, 0x5410u); // elements 0, 2, 4, 6: 0x00 / 0xff bytes
  const std::uint32_t odd = prmt(e, f, 0x7632u);  // elements 1, 3, 5, 7
  return ((even & 0x0f0f0f0fu) | (odd & 0xf0f0f0f0u)) & 0x88888888u;
}

//! Sign bits of 8 fp32 values at bit 3 of nibble i, every other bit zero (byte permutes).
QUADS_DEVICE_API std::uint32_t sign_nibbles32(const float (&v)[8]) {
  std::uint32_t u[8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
    u[i] = __float_as_uint(v[i]);
  // sign-replicated top bytes: even elements (0, 2, 4, 6) and odd ones (1, 3, 5, 7)
  const std::uint32_t even = prmt(prmt(u[0], u[2], 0xfbu), prmt(u[4], u[6], 0xfbu), 0x5410u);
  const std::uint32_t odd = prmt(prmt(u[1], u[3], 0xfbu), prmt(u[5], u[7], 0xfbu), 0x5410u);
  return ((even & 0x0f0f0f0fu) | (odd & 0xf0f0f0f0u)) & 0x88888888u;
}

//! Asks for the cache line holding `p` (no register result): issued before a CTA's set-up (the
//! multiplier table and its barrier) so that the first loads' DRAM latency overlaps it.
QUADS_DEVICE_API void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

//! Packed 16-bit pair type of `T` (bf16 / fp16).
template <class T>
using pair16 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;

template <class T>
QUADS_DEVICE_API T low_of(pair16<T> p) {
  return p.x;
}
template <class T>
QUADS_DEVICE_API T high_of(pair16<T> p) {
  return p.y;
}

//! max |x| of a block of 16-bit elements given as 16-byte words, NaN if any element is NaN.
template <class T, int B>
QUADS_DEVICE_API float block_amax_nan16(const raw_block<T, B>& r) {
  using P = pair16<T>;
  constexpr int N = B / 2; // 32-bit words
  P t[N];
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    const std::uint32_t u[4] = {r.w[i].x, r.w[i].y, r.w[i].z, r.w[i].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::uint32_t a = u[j] & 0x7fff7fffu; // integer |x|: exact, NaN stays NaN
      t[4 * i + j] = *reinterpret_cast<const P*>(&a);
    }
  }
#pragma unroll
  for (int w = N / 2; w >= 1; w /= 2) {
#pragma unroll
    for (int i = 0; i < w; ++i)
      t[i] = __hmax2_nan(t[i], t[i + w]);
  }
  return to_float(__hmax_nan(low_of<T>(t[0]), high_of<T>(t[0])));
}

//! `l.offset(r, c)` for `r, c >= 0` (and a layout with non-negative extents): the sign bits are
//! cleared so that the compiler knows the operands are non-negative and turns the layout's
//! signed divisions and remainders by powers of two into shifts and masks (same values).
template <class Layout>
QUADS_DEVICE_API std::size_t nonneg_offset(const Layout& l, int r, int c) {
  constexpr int m = 0x7fffffff;
  const Layout k{l.rows & m, l.cols & m};
  return k.offset(r & m, c & m);
}

//! Shape checks shared by the launchers; returns nullptr when fine, else the reason.
template <class T>
inline const char* check_input(const T* x, const tensor_shape& s, int multiple_of,
                               const char* multiple_msg) {
  if (s.experts < 1 || s.rows < 0 || s.cols < 0)
    return "quads: shape needs experts >= 1, rows >= 0, cols >= 0";
  if (s.experts > 65535) return "quads: at most 65535 experts per launch";
  if (s.cols % multiple_of != 0) return multiple_msg;
  if (s.rstride() < s.cols) return "quads: row_stride must be 0 or >= cols";
  if (s.experts > 1 && s.estride() < static_cast<std::int64_t>(s.rows) * s.rstride())
    return "quads: expert_stride must be 0 or >= rows * row_stride";
  if (s.rows > 0 && s.cols > 0 && x == nullptr) return "quads: input pointer is null";
  if (!aligned(x, 16)) return "quads: input pointer must be 16-byte aligned (vector loads)";
  if ((s.rstride() * static_cast<std::int64_t>(sizeof(T))) % 16 != 0)
    return "quads: row_stride * sizeof(element) must be a multiple of 16 bytes";
  if ((s.estride() * static_cast<std::int64_t>(sizeof(T))) % 16 != 0)
    return "quads: expert_stride * sizeof(element) must be a multiple of 16 bytes";
  return nullptr;
}

} // namespace detail

} // namespace quads::kernels
