// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GPU trainer path: fake quantization, straight-through gradients, weight sync, and a
//! linear layer forward/backward under a fake-quant policy, with cuBLAS for the matmuls.
//!
//! What runs where (one stream, nothing synchronises):
//! - fake quantization: `quads::kernels::qdq<Quantizer>` (the one QDQ path; bf16 in, bf16 out =
//!   RNE of the fp32 fake-quantized value). fp32 master weights: `qdq` fp32 -> fp32, then an RNE
//!   cast to bf16;
//! - matmuls: `cublasGemmEx`, bf16 operands, fp32 accumulation (`CUBLAS_COMPUTE_32F`), one call
//!   per expert group; `y` and `dx` stored as bf16, `dW` as fp32;
//! - STE: `apply_ste` recomputes each block's multiplier from the master values and the tensor
//!   scales the forward pass used (`block_multiplier`), then scales the gradient in place;
//! - weight sync: `kernels::quantize<Quantizer, Layout>`, byte-identical to
//!   `reference::sync_weights` (see `policy/weight_sync.hpp` for the contract).
//!
//! Error scheme (as `quads/kernels/`): every function returns `cudaError_t`; `cudaSuccess` means
//! all work was enqueued; an argument check that fails returns `cudaErrorInvalidValue` before
//! enqueuing anything, a cuBLAS failure maps to a CUDA error code (`cudaErrorNotSupported`,
//! `cudaErrorMemoryAllocation`, `cudaErrorInvalidValue` or `cudaErrorUnknown`), and
//! `quads::trainer::last_error_message()` says which argument or call failed and why.
//! The cuBLAS handle's stream and pointer mode are set for the call and restored afterwards.
#pragma once

#include <quads/kernels/kernels.cuh>
#include <quads/policy/linear_shape.hpp>
#include <quads/policy/policies.hpp>
#include <quads/policy/ste.hpp>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace quads::trainer {

using bf16 = __nv_bfloat16;

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

namespace detail {
inline std::string& error_text() {
  thread_local std::string text;
  return text;
}
inline cudaError_t fail(std::string why, cudaError_t code = cudaErrorInvalidValue) {
  error_text() = std::move(why);
  return code;
}
inline cudaError_t ok() {
  error_text().clear();
  return cudaSuccess;
}
//! Wraps a `quads::kernels` launcher status, naming the step that failed.
inline cudaError_t kernel_status(cudaError_t e, const char* step) {
  if (e == cudaSuccess) return cudaSuccess;
  return fail(std::string("quads: ") + step + ": " + kernels::last_error_message(), e);
}
inline cudaError_t launch_status(const char* step) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return cudaSuccess;
  return fail(std::string("quads: ") + step + ": " + cudaGetErrorString(e), e);
}
inline const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  default: return "cuBLAS error";
  }
}
inline cudaError_t cublas_status(cublasStatus_t s, const char* step, int expert) {
  if (s == CUBLAS_STATUS_SUCCESS) return cudaSuccess;
  const cudaError_t code = s == CUBLAS_STATUS_NOT_SUPPORTED ? cudaErrorNotSupported
                           : s == CUBLAS_STATUS_ALLOC_FAILED ? cudaErrorMemoryAllocation
                           : s == CUBLAS_STATUS_INVALID_VALUE ? cudaErrorInvalidValue
                                                              : cudaErrorUnknown;
  return fail(std::string("quads: cublasGemmEx (") + step + ", expert " + std::to_string(expert) +
                  ") failed: " + cublas_status_name(s),
              code);
}
} // namespace detail

//! Why the last `quads::trainer` call on this host thread failed, or "" if it succeeded.
inline const char* last_error_message() { return detail::error_text().c_str(); }

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

//! Device-side twin of `fake_quant_args`: given tensor scales in device memory (`*_count` is 1
//! or the number of experts; only read under `global_scale::given`) and the Philox seeds
//! (activations of expert group `e` use `act_seed + e`).
struct device_fake_quant_args {
  const tensor_scale* weight_given = nullptr;
  int weight_given_count = 0;
  const tensor_scale* act_given = nullptr;
  int act_given_count = 0;
  std::uint64_t weight_seed = 0;
  std::uint64_t act_seed = 0;
};

namespace detail {
template <class Quantizer>
inline constexpr bool per_row_scales =
    Quantizer::format::has_tensor_scale && Quantizer::options.global == global_scale::per_row;

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

//! True when `x` is contiguous `[experts, rows, cols]`.
inline bool contiguous(const kernels::tensor_shape& s) {
  return (s.row_stride == 0 || s.row_stride == s.cols) &&
         (s.expert_stride == 0 ||
          s.expert_stride == static_cast<std::int64_t>(s.rows) * s.rstride());
}

constexpr int threads = 256;
inline unsigned grid_for(std::uint64_t work) {
  const std::uint64_t g = (work + threads - 1) / threads;
  return static_cast<unsigned>(g < 1 ? 1 : (g > 4096 ? 4096 : g));
}

template <class T>
QUADS_DEVICE_API float load_float(const T* p) {
  if constexpr (std::is_same_v<T, float>) return *p;
  else return __bfloat162float(*p);
}
template <class T>
QUADS_DEVICE_API void store_float(T* p, float v) {
  if constexpr (std::is_same_v<T, float>) *p = v;
  else *p = __float2bfloat16_rn(v);
}

//! One thread per block: the block's multiplier from the master values, then the STE factor on
//! each gradient value (`ste::apply_ste` semantics; bf16 gradients are converted via fp32).
template <class Quantizer, class Ste, class TM, class TG>
__global__ void __launch_bounds__(threads)
    ste_kernel(const TM* master, TG* grad, std::uint64_t blocks, int rows, int nkb,
               const tensor_scale* scales, int scale_count, std::uint64_t seed) {
  using F = typename Quantizer::format;
  constexpr int B = F::block_size;
  for (std::uint64_t b = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       b < blocks; b += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t row = b / static_cast<std::uint64_t>(nkb);  // e * rows + r
    float v[B];
#pragma unroll
    for (int i = 0; i < B; ++i) v[i] = load_float(master + b * B + i);
    float m = 1.0f;
    if constexpr (Ste::needs_multiplier) {
      tensor_scale ts{};
      if constexpr (F::has_tensor_scale) {
        if constexpr (per_row_scales<Quantizer>) {
          ts = scales[row];
        } else {
          const std::uint64_t e = row / static_cast<std::uint64_t>(rows);
          ts = scales[scale_count == 1 ? 0 : e];
        }
      }
      m = block_multiplier<Quantizer>(v, ts, Quantizer::bits_for(seed, b));
    }
#pragma unroll
    for (int i = 0; i < B; ++i) {
      TG* g = grad + b * B + i;
      store_float(g, quads::apply_ste<Ste>(load_float(g), v[i], m));
    }
  }
}

template <class TIn>
__global__ void __launch_bounds__(threads) to_bf16_kernel(const TIn* x, bf16* y, std::uint64_t n) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    y[i] = __float2bfloat16_rn(load_float(x + i));
}

//! `y[r, j] = T(acc[r, j] + bias[j])` for `rows` rows of `n` columns: the fp32 GEMM result plus
//! the bias, rounded once. (Templates, so that a header kernel has no external definition that
//! two translation units would both emit.)
template <class T>
__global__ void __launch_bounds__(threads)
    bias_add_kernel(const float* acc, const T* bias, T* y, std::uint64_t rows, int n) {
  const std::uint64_t total = rows * static_cast<std::uint64_t>(n);
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    store_float(y + i, acc[i] + load_float(bias + i % static_cast<std::uint64_t>(n)));
}

//! `out[j] = sum over rows of dy[r, j]` in fp32, rows ascending (one thread per column).
template <class T>
__global__ void __launch_bounds__(threads)
    column_sum_kernel(const T* dy, float* out, int rows, int n) {
  for (int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); j < n;
       j += static_cast<int>(gridDim.x * blockDim.x)) {
    float s = 0.0f;
    for (int r = 0; r < rows; ++r) s += load_float(dy + static_cast<std::int64_t>(r) * n + j);
    out[j] = s;
  }
}

//! Sets the handle's stream and host pointer mode for the call; restores both in the destructor.
class cublas_scope {
public:
  cublas_scope(cublasHandle_t h, cudaStream_t s) : h_(h) {
    cublasGetStream(h_, &old_stream_);
    cublasGetPointerMode(h_, &old_mode_);
    status_ = cublasSetStream(h_, s);
    if (status_ == CUBLAS_STATUS_SUCCESS)
      status_ = cublasSetPointerMode(h_, CUBLAS_POINTER_MODE_HOST);
  }
  ~cublas_scope() {
    cublasSetStream(h_, old_stream_);
    cublasSetPointerMode(h_, old_mode_);
  }
  cublas_scope(const cublas_scope&) = delete;
  cublas_scope& operator=(const cublas_scope&) = delete;
  cublasStatus_t status() const { return status_; }

private:
  cublasHandle_t h_;
  cudaStream_t old_stream_ = nullptr;
  cublasPointerMode_t old_mode_ = CUBLAS_POINTER_MODE_HOST;
  cublasStatus_t status_ = CUBLAS_STATUS_SUCCESS;
};

//! Column-major GEMM `C[m, n] = op(A) op(B) (+ beta C)`, bf16 operands, fp32 accumulation.
inline cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const bf16* a, int lda, const bf16* b, int ldb, float beta,
                           void* c, cudaDataType_t ctype, int ldc) {
  const float alpha = 1.0f;
  return cublasGemmEx(h, ta, tb, m, n, k, &alpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &beta,
                      c, ctype, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}
} // namespace detail

// ---------------------------------------------------------------------------------------------
// Fake quantization, STE, weight sync
// ---------------------------------------------------------------------------------------------

//! Applies STE rule `Ste` in place to `grad` (`dL/dQDQ(master)` in, `dL/dmaster` out), for a
//! contiguous `[experts, rows, cols]` tensor that `kernels::qdq<Quantizer>` fake-quantized with
//! `args` (same seed) and wrote `tensor_scales` for (`experts` entries, `experts * rows` with
//! `per_row`; under `global_scale::given` pass `args.given` / `args.given_count` instead; ignored
//! by MXFP4). `TM`, `TG`: `__nv_bfloat16` or `float`. Bit-identical to `reference::apply_ste`.
//! `ste::identity` enqueues nothing.
template <class Quantizer, straight_through_estimator Ste, class TM, class TG>
cudaError_t apply_ste(const TM* master, TG* grad, const kernels::tensor_shape& shape,
                      const tensor_scale* tensor_scales, const kernels::scale_args& args,
                      cudaStream_t stream = nullptr) {
  static_assert(is_block_quantizer<Quantizer>, "quads: apply_ste needs a block_quantizer<F, O>");
  static_assert(std::is_same_v<TM, bf16> || std::is_same_v<TM, float>,
                "quads: master values must be __nv_bfloat16 or float");
  static_assert(std::is_same_v<TG, bf16> || std::is_same_v<TG, float>,
                "quads: gradients must be __nv_bfloat16 or float");
  using F = typename Quantizer::format;
  constexpr int B = F::block_size;
  if constexpr (std::is_same_v<Ste, ste::identity>) {
    (void)master, (void)grad, (void)shape, (void)tensor_scales, (void)args, (void)stream;
    return detail::ok();
  } else {
    if (shape.experts < 1 || shape.rows < 0 || shape.cols < 0)
      return detail::fail("quads: apply_ste: shape needs experts >= 1, rows >= 0, cols >= 0");
    if (shape.cols % B != 0)
      return detail::fail("quads: apply_ste: cols must be a multiple of the block size " +
                          std::to_string(B));
    if (!detail::contiguous(shape))
      return detail::fail("quads: apply_ste: the tensor must be contiguous (strides 0 or dense)");
    const std::uint64_t blocks =
        static_cast<std::uint64_t>(shape.experts) * shape.rows * (shape.cols / B);
    if (blocks == 0) return detail::ok();
    if (master == nullptr || grad == nullptr)
      return detail::fail("quads: apply_ste: master / grad pointer is null");
    const tensor_scale* scales = tensor_scales;
    int count = shape.experts;
    if constexpr (F::has_tensor_scale && Quantizer::options.global == global_scale::given) {
      scales = args.given;
      count = args.given_count;
      if (scales == nullptr || (count != 1 && count != shape.experts))
        return detail::fail("quads: apply_ste: global_scale::given needs args.given with 1 or "
                            "`experts` entries");
    }
    if (F::has_tensor_scale && Ste::needs_multiplier && scales == nullptr)
      return detail::fail(
          "quads: apply_ste: tensor_scales is null (pass the scales the qdq wrote)");
    detail::ste_kernel<Quantizer, Ste, TM, TG>
        <<<detail::grid_for(blocks), detail::threads, 0, stream>>>(
            master, grad, blocks, shape.rows, shape.cols / B, scales, count, args.seed);
    if (const cudaError_t e = detail::launch_status("apply_ste kernel")) return e;
    return detail::ok();
  }
}

//! The trainer's fake-quantized weights `wq = QDQ(w)` (`[experts, n, k]`, same element type as
//! the master `w`: bf16 or fp32) through `kernels::qdq<P::weight_quantizer>`. `tensor_scales`
//! receives the scales used (`experts`, or `experts * n` with per_row); `amax_workspace` holds
//! `experts` floats (per_tensor). Equal, element for element, to the dequantized output of
//! `sync_weights` with the same arguments (fp32: to `reference::fake_quant_weights`).
template <fake_quant_policy P, class TW>
  requires P::quantizes_weights
cudaError_t fake_quant_weights(const TW* w, TW* wq, int experts, int n, int k,
                               tensor_scale* tensor_scales, float* amax_workspace,
                               const device_fake_quant_args& args = {},
                               cudaStream_t stream = nullptr) {
  const kernels::scale_args sa{args.weight_given, args.weight_given_count, amax_workspace,
                               args.weight_seed};
  const cudaError_t e = detail::kernel_status(
      kernels::qdq<typename P::weight_quantizer>(w, wq, kernels::tensor_shape{experts, n, k}, sa,
                                                 tensor_scales, stream),
      "fake_quant_weights (kernels::qdq)");
  return e != cudaSuccess ? e : detail::ok();
}

//! Weight sync (GPU): packs the master weights `w` (`[experts, n, k]`, bf16 or fp32) into `out`
//! (E2M1 codes, block scales in `Layout`, tensor scales) with `kernels::quantize`, for the
//! rollout engine. Byte-identical to `reference::sync_weights<P, Layout>` (every option but
//! `rcp_approx`, which only the GPU runs), and `kernels::dequantize` of it equals
//! `fake_quant_weights` bit for bit. `amax_workspace`: `experts` floats (per_tensor).
template <fake_quant_policy P, scale_layout Layout = linear_scales, class TW>
  requires P::quantizes_weights
cudaError_t sync_weights(const TW* w, int experts, int n, int k, const kernels::quantized_view& out,
                         float* amax_workspace, const device_fake_quant_args& args = {},
                         cudaStream_t stream = nullptr) {
  const kernels::scale_args sa{args.weight_given, args.weight_given_count, amax_workspace,
                               args.weight_seed};
  const cudaError_t e = detail::kernel_status(
      kernels::quantize<typename P::weight_quantizer, Layout>(
          w, kernels::tensor_shape{experts, n, k}, out, sa, stream),
      "sync_weights (kernels::quantize)");
  return e != cudaSuccess ? e : detail::ok();
}

// ---------------------------------------------------------------------------------------------
// Linear layer
// ---------------------------------------------------------------------------------------------

//! Device buffers of the linear path. The forward pass writes them, the backward pass reads
//! them as the forward left them (so keep them per layer between the two). Carve them out of
//! one allocation with `carve_linear_workspace`; unused fields are null.
struct linear_workspace {
  bf16* weight_op = nullptr;            //!< `[E, n, k]`: bf16 QDQ(W) (or bf16(W) for fp32 masters)
  float* weight_f32 = nullptr;          //!< `[E, n, k]`: fp32 QDQ(W), fp32 masters only
  bf16* act_op = nullptr;               //!< `[M, k]`: QDQ(x), policies that quantize activations
  tensor_scale* weight_scales = nullptr;  //!< `E` (per_row: `E * n`)
  tensor_scale* act_scales = nullptr;     //!< `E` (per_row: `M`)
  float* amax = nullptr;                  //!< `E` floats
  float* y_f32 = nullptr;                 //!< `[M, n]` fp32 GEMM result, forward with a bias only
};

namespace detail {
inline std::size_t round_up(std::size_t x) { return (x + 255) / 256 * 256; }

template <fake_quant_policy P, class TW>
struct workspace_plan {
  std::size_t weight_op = 0, weight_f32 = 0, act_op = 0, weight_scales = 0, act_scales = 0,
              amax = 0;
  std::size_t y_f32 = 0;
  explicit workspace_plan(const linear_shape& s, bool with_bias = false) {
    const std::size_t W = s.weight_size();
    const std::size_t M = static_cast<std::size_t>(s.total_rows());
    const std::size_t E = static_cast<std::size_t>(s.experts);
    if (P::quantizes_weights || std::is_same_v<TW, float>) weight_op = W * sizeof(bf16);
    if constexpr (P::quantizes_weights) {
      if (std::is_same_v<TW, float>) weight_f32 = W * sizeof(float);
      weight_scales =
          (per_row_scales<typename P::weight_quantizer> ? E * s.n : E) * sizeof(tensor_scale);
    }
    if constexpr (P::quantizes_activations) {
      act_op = M * static_cast<std::size_t>(s.k) * sizeof(bf16);
      act_scales =
          (per_row_scales<typename P::activation_quantizer> ? M : E) * sizeof(tensor_scale);
    }
    if (P::quantizes_weights || P::quantizes_activations) amax = E * sizeof(float);
    if (with_bias) y_f32 = M * static_cast<std::size_t>(s.n) * sizeof(float);
  }
  std::size_t total() const {
    return round_up(weight_op) + round_up(weight_f32) + round_up(act_op) +
           round_up(weight_scales) + round_up(act_scales) + round_up(amax) + round_up(y_f32);
  }
};
} // namespace detail

//! Bytes of device memory `carve_linear_workspace<P, TW>` needs for shape `s` (`with_bias`: the
//! forward pass gets a bias, which needs an fp32 `[M, n]` buffer so that `y` is rounded once).
template <fake_quant_policy P, class TW = bf16>
std::size_t linear_workspace_bytes(const linear_shape& s, bool with_bias = false) {
  return detail::workspace_plan<P, TW>(s, with_bias).total();
}

//! Splits `base` (at least `linear_workspace_bytes<P, TW>(s, with_bias)` bytes, 256-byte aligned,
//! e.g. from cudaMalloc) into the buffers of policy `P` with master weights of type `TW`.
template <fake_quant_policy P, class TW = bf16>
linear_workspace carve_linear_workspace(void* base, const linear_shape& s, bool with_bias = false) {
  const detail::workspace_plan<P, TW> p(s, with_bias);
  auto* at = static_cast<unsigned char*>(base);
  auto take = [&](std::size_t bytes) -> void* {
    if (bytes == 0) return nullptr;
    void* r = at;
    at += detail::round_up(bytes);
    return r;
  };
  linear_workspace ws;
  ws.weight_op = static_cast<bf16*>(take(p.weight_op));
  ws.weight_f32 = static_cast<float*>(take(p.weight_f32));
  ws.act_op = static_cast<bf16*>(take(p.act_op));
  ws.weight_scales = static_cast<tensor_scale*>(take(p.weight_scales));
  ws.act_scales = static_cast<tensor_scale*>(take(p.act_scales));
  ws.amax = static_cast<float*>(take(p.amax));
  ws.y_f32 = static_cast<float*>(take(p.y_f32));
  return ws;
}

namespace detail {

template <fake_quant_policy P, class TW>
cudaError_t check_linear(cublasHandle_t h, const linear_shape& s, const void* x, const TW* w,
                         const linear_workspace& ws, const device_fake_quant_args& args) {
  if (h == nullptr) return fail("quads: cublasHandle_t is null (create one with cublasCreate)");
  if (const char* why = s.check()) return fail(why);
  const std::int64_t M = s.total_rows();
  if (M * s.k >= (std::int64_t{1} << 31) ||
      static_cast<std::int64_t>(s.n) * s.k >= (std::int64_t{1} << 31) ||
      M * s.n >= (std::int64_t{1} << 31))
    return fail("quads: linear: M * k, n * k and M * n must each be < 2^31");
  if constexpr (P::quantizes_weights) {
    constexpr int B = P::weight_quantizer::block_size;
    if (s.k % B != 0)
      return fail("quads: linear: k = " + std::to_string(s.k) + " must be a multiple of the weight "
                  "block size " + std::to_string(B) + "; pad explicitly");
  }
  if constexpr (P::quantizes_activations) {
    constexpr int B = P::activation_quantizer::block_size;
    if (s.k % B != 0)
      return fail("quads: linear: k = " + std::to_string(s.k) + " must be a multiple of the "
                  "activation block size " + std::to_string(B) + "; pad explicitly");
  }
  if (M > 0 && s.k > 0 && x == nullptr) return fail("quads: linear: x is null");
  if (s.weight_size() > 0 && w == nullptr) return fail("quads: linear: W is null");
  const workspace_plan<P, TW> p(s);
  if ((p.weight_op && ws.weight_op == nullptr) || (p.weight_f32 && ws.weight_f32 == nullptr) ||
      (p.act_op && ws.act_op == nullptr) || (p.weight_scales && ws.weight_scales == nullptr) ||
      (p.act_scales && ws.act_scales == nullptr) || (p.amax && ws.amax == nullptr))
    return fail("quads: linear: a workspace buffer this policy needs is null (use "
                "carve_linear_workspace)");
  if ((P::quantizes_weights && !aligned16(w)) || (P::quantizes_activations && !aligned16(x)) ||
      !aligned16(ws.weight_op) || !aligned16(ws.weight_f32) || !aligned16(ws.act_op))
    return fail("quads: linear: x, W and the workspace buffers must be 16-byte aligned");
  if constexpr (P::quantizes_weights) {
    using Q = typename P::weight_quantizer;
    if (Q::format::has_tensor_scale && Q::options.global == global_scale::given &&
        (args.weight_given == nullptr ||
         (args.weight_given_count != 1 && args.weight_given_count != s.experts)))
      return fail("quads: linear: global_scale::given weights need weight_given with 1 or "
                  "`experts` entries");
  }
  if constexpr (P::quantizes_activations) {
    using Q = typename P::activation_quantizer;
    if (Q::format::has_tensor_scale && Q::options.global == global_scale::given &&
        (args.act_given == nullptr ||
         (args.act_given_count != 1 && args.act_given_count != s.experts)))
      return fail("quads: linear: global_scale::given activations need act_given with 1 or "
                  "`experts` entries");
  }
  return cudaSuccess;
}

//! The scale args of activation group `e`.
inline kernels::scale_args act_scale_args(const device_fake_quant_args& a, float* amax, int e) {
  const bool per_expert = a.act_given_count > 1;
  return {a.act_given == nullptr ? nullptr : a.act_given + (per_expert ? e : 0),
          a.act_given_count > 0 ? 1 : 0, amax, a.act_seed + static_cast<std::uint64_t>(e)};
}

template <class Q>
tensor_scale* act_scales_of(const linear_workspace& ws, std::int64_t row0, int e) {
  return ws.act_scales == nullptr ? nullptr : ws.act_scales + (per_row_scales<Q> ? row0 : e);
}

//! The bf16 weight operand the GEMMs use.
template <fake_quant_policy P, class TW>
const bf16* weight_operand(const TW* w, const linear_workspace& ws) {
  if constexpr (!P::quantizes_weights && std::is_same_v<TW, bf16>) {
    (void)ws;
    return w;
  } else {
    return ws.weight_op;
  }
}

} // namespace detail

//! Forward pass of policy `P`: `y = Xop Wop^T (+ bias)` for a dense layer or an expert stack
//! (`linear_shape`). `x`: `[M, k]` bf16, grouped by expert; `w`: master `[E, n, k]` (`TW` =
//! `__nv_bfloat16` or `float`); `bias`: `[E, n]` bf16 or null (a bias needs `ws` carved with
//! `with_bias = true`); `y`: `[M, n]` bf16.
//! `Wop` = bf16 RNE of `QDQ(W)` (fp32 value), `Xop` likewise for policies quantizing activations
//! (each expert group its own tensor, seed `act_seed + e`). Per expert group one `cublasGemmEx`
//! (bf16 x bf16 -> bf16, fp32 accumulation); with a bias the GEMM writes fp32 to `ws.y_f32` and
//! a kernel adds the bias and rounds to bf16 once. Writes `ws` for the backward pass.
template <class P, class TW = bf16>
cudaError_t linear_forward(cublasHandle_t handle, const bf16* x, const TW* w, const bf16* bias,
                           bf16* y, const linear_shape& s, const linear_workspace& ws,
                           const device_fake_quant_args& args = {}, cudaStream_t stream = nullptr) {
  static_assert(check_fake_quant_policy<P>());
  static_assert(std::is_same_v<TW, bf16> || std::is_same_v<TW, float>,
                "quads: master weights must be __nv_bfloat16 or float");
  if (const cudaError_t e = detail::check_linear<P, TW>(handle, s, x, w, ws, args)) return e;
  const std::int64_t M = s.total_rows();
  if (M > 0 && s.n > 0 && y == nullptr) return detail::fail("quads: linear_forward: y is null");
  if (bias != nullptr && M > 0 && s.n > 0 && ws.y_f32 == nullptr)
    return detail::fail(
        "quads: linear_forward: a bias needs workspace y_f32 (carve_linear_workspace "
        "with with_bias = true)");
  const std::uint64_t W = s.weight_size();

  // Weight operand.
  if constexpr (P::quantizes_weights) {
    const kernels::scale_args sa{args.weight_given, args.weight_given_count, ws.amax,
                                 args.weight_seed};
    const kernels::tensor_shape ws_shape{s.experts, s.n, s.k};
    if constexpr (std::is_same_v<TW, bf16>) {
      if (const cudaError_t e = detail::kernel_status(
              kernels::qdq<typename P::weight_quantizer>(w, ws.weight_op, ws_shape, sa,
                                                         ws.weight_scales, stream),
              "linear_forward: weight qdq"))
        return e;
    } else {
      if (const cudaError_t e = detail::kernel_status(
              kernels::qdq<typename P::weight_quantizer>(w, ws.weight_f32, ws_shape, sa,
                                                         ws.weight_scales, stream),
              "linear_forward: weight qdq"))
        return e;
      if (W > 0) {
        detail::to_bf16_kernel<<<detail::grid_for(W), detail::threads, 0, stream>>>(
            ws.weight_f32, ws.weight_op, W);
        if (const cudaError_t e = detail::launch_status("linear_forward: bf16 cast")) return e;
      }
    }
  } else if constexpr (std::is_same_v<TW, float>) {
    if (W > 0) {
      detail::to_bf16_kernel<<<detail::grid_for(W), detail::threads, 0, stream>>>(w, ws.weight_op,
                                                                                  W);
      if (const cudaError_t e = detail::launch_status("linear_forward: bf16 cast")) return e;
    }
  }
  const bf16* wop = detail::weight_operand<P>(w, ws);

  detail::cublas_scope scope(handle, stream);
  if (scope.status() != CUBLAS_STATUS_SUCCESS)
    return detail::cublas_status(scope.status(), "set stream / pointer mode", -1);
  for (int e = 0; e < s.experts; ++e) {
    const int rows = s.rows[static_cast<std::size_t>(e)];
    if (rows == 0 || s.n == 0) continue;
    const std::int64_t r0 = s.row_offset(e);
    const bf16* xop = x + r0 * s.k;
    if constexpr (P::quantizes_activations) {
      using AQ = typename P::activation_quantizer;
      if (s.k > 0) {
        if (const cudaError_t err = detail::kernel_status(
                kernels::qdq<AQ>(x + r0 * s.k, ws.act_op + r0 * s.k,
                                 kernels::tensor_shape{1, rows, s.k},
                                 detail::act_scale_args(args, ws.amax, e),
                                 detail::act_scales_of<AQ>(ws, r0, e), stream),
                "linear_forward: activation qdq"))
          return err;
      }
      xop = ws.act_op + r0 * s.k;
    }
    bf16* ye = y + r0 * s.n;
    const std::size_t count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(s.n);
    // With a bias the GEMM writes fp32 and one kernel adds the bias and rounds once. (cuBLAS with
    // beta = 1 on a bf16 C holding the bias was measured on the H200 to exceed the one-rounding
    // bound, 0.0054 S against 2^-8 S, as if the product were rounded before the bias is added.)
    void* c = bias != nullptr ? static_cast<void*>(ws.y_f32 + r0 * s.n) : static_cast<void*>(ye);
    if (s.k == 0) {
      const cudaError_t err =
          cudaMemsetAsync(c, 0, count * (bias != nullptr ? sizeof(float) : sizeof(bf16)), stream);
      if (err != cudaSuccess)
        return detail::fail(std::string("quads: linear_forward: ") + cudaGetErrorString(err), err);
    } else {
      // Row-major y_e [rows, n] = x_e [rows, k] W_e^T is column-major y^T [n, rows] = W_e x_e^T.
      const cublasStatus_t st =
          detail::gemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, s.n, rows, s.k,
                       wop + static_cast<std::int64_t>(e) * s.n * s.k, s.k, xop, s.k, 0.0f, c,
                       bias != nullptr ? CUDA_R_32F : CUDA_R_16BF, s.n);
      if (st != CUBLAS_STATUS_SUCCESS) return detail::cublas_status(st, "forward y = x W^T", e);
    }
    if (bias != nullptr) {
      detail::bias_add_kernel<bf16><<<detail::grid_for(count), detail::threads, 0, stream>>>(
          ws.y_f32 + r0 * s.n, bias + static_cast<std::int64_t>(e) * s.n, ye,
          static_cast<std::uint64_t>(rows), s.n);
      if (const cudaError_t err = detail::launch_status("linear_forward: bias")) return err;
    }
  }
  if (const cudaError_t e = detail::launch_status("linear_forward")) return e;
  return detail::ok();
}

//! Backward pass of `linear_forward<P, TW>` (same shape, `x`, `w`, `ws` and `args`; `ws` as the
//! forward left it). `dy`: `[M, n]` bf16. Outputs (each may be null to skip it):
//! `dx` `[M, k]` bf16 = `dy Wop`, through `P::activation_gradient` when activations are
//! quantized; `dw` `[E, n, k]` fp32 = `dy^T Xop` through `P::weight_gradient` (experts with no
//! rows get 0); `dbias` `[E, n]` fp32 = column sums of `dy`. Overwrites (no accumulation).
template <class P, class TW = bf16>
cudaError_t linear_backward(cublasHandle_t handle, const bf16* dy, const bf16* x, const TW* w,
                            bf16* dx, float* dw, float* dbias, const linear_shape& s,
                            const linear_workspace& ws, const device_fake_quant_args& args = {},
                            cudaStream_t stream = nullptr) {
  static_assert(check_fake_quant_policy<P>());
  if (const cudaError_t e = detail::check_linear<P, TW>(handle, s, x, w, ws, args)) return e;
  const std::int64_t M = s.total_rows();
  if (M > 0 && s.n > 0 && dy == nullptr) return detail::fail("quads: linear_backward: dy is null");
  const bf16* wop = detail::weight_operand<P>(w, ws);

  {
    detail::cublas_scope scope(handle, stream);
    if (scope.status() != CUBLAS_STATUS_SUCCESS)
      return detail::cublas_status(scope.status(), "set stream / pointer mode", -1);
    for (int e = 0; e < s.experts; ++e) {
      const int rows = s.rows[static_cast<std::size_t>(e)];
      const std::int64_t r0 = s.row_offset(e);
      const bf16* dye = dy + r0 * s.n;
      const bf16* xop = P::quantizes_activations ? ws.act_op + r0 * s.k : x + r0 * s.k;
      const std::size_t wsz = static_cast<std::size_t>(s.n) * s.k;
      if (dx != nullptr && rows > 0 && s.k > 0) {
        bf16* dxe = dx + r0 * s.k;
        if (s.n == 0) {
          const cudaError_t err =
              cudaMemsetAsync(dxe, 0, sizeof(bf16) * rows * static_cast<std::size_t>(s.k), stream);
          if (err != cudaSuccess)
            return detail::fail(std::string("quads: linear_backward: ") + cudaGetErrorString(err),
                                err);
        } else {
          // dx_e [rows, k] = dy_e [rows, n] W_e [n, k]: column-major dx^T = W_e^T dy_e^T.
          const cublasStatus_t st =
              detail::gemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, s.k, rows, s.n, wop + e * wsz, s.k,
                           dye, s.n, 0.0f, dxe, CUDA_R_16BF, s.k);
          if (st != CUBLAS_STATUS_SUCCESS)
            return detail::cublas_status(st, "backward dx = dy W", e);
        }
      }
      if (dw != nullptr && wsz > 0) {
        float* dwe = dw + e * wsz;
        if (rows == 0) {
          const cudaError_t err = cudaMemsetAsync(dwe, 0, sizeof(float) * wsz, stream);
          if (err != cudaSuccess)
            return detail::fail(std::string("quads: linear_backward: ") + cudaGetErrorString(err),
                                err);
        } else {
          // dW_e [n, k] = dy_e^T [n, rows] Xop_e [rows, k]: column-major dW^T = Xop^T dy.
          const cublasStatus_t st = detail::gemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, s.k, s.n, rows,
                                                 xop, s.k, dye, s.n, 0.0f, dwe, CUDA_R_32F, s.k);
          if (st != CUBLAS_STATUS_SUCCESS)
            return detail::cublas_status(st, "backward dW = dy^T x", e);
        }
      }
      if (dbias != nullptr && s.n > 0) {
        detail::column_sum_kernel<bf16>
            <<<detail::grid_for(static_cast<std::uint64_t>(s.n)), detail::threads, 0, stream>>>(
                dye, dbias + static_cast<std::int64_t>(e) * s.n, rows, s.n);
        if (const cudaError_t err = detail::launch_status("linear_backward: dbias")) return err;
      }
    }
  }

  if constexpr (P::quantizes_activations) {
    using AQ = typename P::activation_quantizer;
    if (dx != nullptr) {
      for (int e = 0; e < s.experts; ++e) {
        const int rows = s.rows[static_cast<std::size_t>(e)];
        if (rows == 0) continue;
        const std::int64_t r0 = s.row_offset(e);
        if (const cudaError_t err = apply_ste<AQ, typename P::activation_gradient>(
                x + r0 * s.k, dx + r0 * s.k, kernels::tensor_shape{1, rows, s.k},
                detail::act_scales_of<AQ>(ws, r0, e), detail::act_scale_args(args, nullptr, e),
                stream))
          return err;
      }
    }
  }
  if constexpr (P::quantizes_weights) {
    if (dw != nullptr) {
      const kernels::scale_args sa{args.weight_given, args.weight_given_count, nullptr,
                                   args.weight_seed};
      if (const cudaError_t err =
              apply_ste<typename P::weight_quantizer, typename P::weight_gradient>(
                  w, dw, kernels::tensor_shape{s.experts, s.n, s.k}, ws.weight_scales, sa, stream))
        return err;
    }
  }
  if (const cudaError_t e = detail::launch_status("linear_backward")) return e;
  return detail::ok();
}

} // namespace quads::trainer
