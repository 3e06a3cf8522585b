// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Baselines measured in the same run: copy and read bandwidth, the launch floor, and
//!        (when cuBLAS is linked) bf16 GEMM and FP8 per-tensor-scaled GEMM.

#include "suites.hpp"
#include "timing.cuh"

#include <quads/kernels/common.cuh>

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#if QUADS_BENCH_HAVE_CUBLAS
#include <cublasLt.h>
#include <cublas_v2.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace quads::bench {

namespace {

// 16-byte copy, four independent loads in flight per thread before the stores. `Streaming` uses
// the evict-first hints (ld.global.cs / st.global.cs); both variants run, the faster one counts.
template <bool Streaming>
__device__ __forceinline__ uint4 load16(const uint4* p) {
  if constexpr (Streaming) return __ldcs(p);
  else return *p;
}
template <bool Streaming>
__device__ __forceinline__ void store16(uint4* p, uint4 v) {
  if constexpr (Streaming) __stcs(p, v);
  else *p = v;
}
template <bool Streaming>
__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = load16<Streaming>(src + i), b = load16<Streaming>(src + i + stride),
                c = load16<Streaming>(src + i + 2 * stride),
                d = load16<Streaming>(src + i + 3 * stride);
    store16<Streaming>(dst + i, a);
    store16<Streaming>(dst + i + stride, b);
    store16<Streaming>(dst + i + 2 * stride, c);
    store16<Streaming>(dst + i + 3 * stride, d);
  }
  for (; i < n; i += stride) store16<Streaming>(dst + i, load16<Streaming>(src + i));
}

// The traffic of a quantize without its arithmetic: every 64 input bytes (four 16-byte words, one
// per grid stride, all in flight) leave as one 16-byte word (their xor), so 4 bytes are read per
// byte written, as bf16 -> E2M1 reads 4 bytes per code byte (scales aside).
// `Pdl`: launched programmatically (as the quantize launchers do), waiting before its loads.
template <bool Pdl>
__global__ void read4_write1_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                    std::size_t n_out) {
  if constexpr (Pdl) kernels::detail::pdl_enter();
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n_out;
       i += stride) {
    const uint4 a = __ldcs(src + 4 * i), b = __ldcs(src + 4 * i + 1), c = __ldcs(src + 4 * i + 2),
                d = __ldcs(src + 4 * i + 3);
    __stcs(dst + i, make_uint4(a.x ^ b.x ^ c.x ^ d.x, a.y ^ b.y ^ c.y ^ d.y, a.z ^ b.z ^ c.z ^ d.z,
                               a.w ^ b.w ^ c.w ^ d.w));
  }
}

// Read-only reduction (the bound for amax): four independent 16-byte loads per step.
__global__ void read_kernel(const uint4* __restrict__ src, std::size_t n, unsigned* out) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  unsigned acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcs(src + i), b = __ldcs(src + i + stride), c = __ldcs(src + i + 2 * stride),
                d = __ldcs(src + i + 3 * stride);
    acc += a.x + a.y + a.z + a.w + b.x + b.y + b.z + b.w + c.x + c.y + c.z + c.w + d.x + d.y +
           d.z + d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldcs(src + i);
    acc += a.x + a.y + a.z + a.w;
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31u) == 0u) atomicAdd(out, acc);
}

template <bool Pdl>
__global__ void empty_kernel() {
  if constexpr (Pdl) kernels::detail::pdl_enter();
}

int grid_for_stream() { return std::max(limits().sms, 1) * 4; }

cudaError_t launch_copy(const void* src, void* dst, std::size_t bytes, cudaStream_t s,
                        bool streaming = true) {
  if (streaming)
    copy_kernel<true><<<grid_for_stream(), 512, 0, s>>>(static_cast<const uint4*>(src),
                                                         static_cast<uint4*>(dst), bytes / 16);
  else
    copy_kernel<false><<<grid_for_stream(), 512, 0, s>>>(static_cast<const uint4*>(src),
                                                          static_cast<uint4*>(dst), bytes / 16);
  return cudaGetLastError();
}
cudaError_t launch_read4_write1(const void* src, void* dst, std::size_t in_bytes, cudaStream_t s,
                                bool pdl) {
  const auto* in = static_cast<const uint4*>(src);
  auto* out = static_cast<uint4*>(dst);
  if (pdl)
    return kernels::detail::launch_kernel(true, read4_write1_kernel<true>,
                                          dim3(grid_for_stream()), dim3(512), 0, s, in, out,
                                          in_bytes / 64);
  read4_write1_kernel<false><<<grid_for_stream(), 512, 0, s>>>(in, out, in_bytes / 64);
  return cudaGetLastError();
}
cudaError_t launch_read(const void* src, std::size_t bytes, unsigned* out, cudaStream_t s) {
  read_kernel<<<grid_for_stream(), 512, 0, s>>>(static_cast<const uint4*>(src), bytes / 16, out);
  return cudaGetLastError();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Median GB/s over `reps` event-timed batches of 4 back-to-back calls of `fn`, each moving
// `bytes`, after ~0.3 s of the same work so the clocks have left their idle state.
template <class Fn>
double time_gbps(Fn&& fn, double bytes, int reps = 15) {
  cudaStream_t s = stream();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(300)) {
    for (int i = 0; i < 8; ++i) fn(s);
    cudaStreamSynchronize(s);
  }
  constexpr int batch = 4;
  std::vector<double> gbps;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(a, s);
    for (int j = 0; j < batch; ++j) fn(s);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    gbps.push_back(batch * bytes / (ms * 1e6));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(gbps);
}

} // namespace

bool measure_device_limits() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return false;
  auto& l = limits();
  l.name = prop.name;
  l.sms = prop.multiProcessorCount;
  l.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  // 1 GiB each way: ~17x the L2, long enough that launch overhead is noise.
  const std::size_t bytes = std::size_t{1} << 30;
  device_buffer src(bytes), dst(bytes), sink(sizeof(unsigned));
  if (src.error() || dst.error() || sink.error()) return false;
  if (fill_random(src.get<float>(), bytes / 4, 1, stream()) != cudaSuccess) return false;
  l.memcpy_gbps = time_gbps(
      [&](cudaStream_t s) { cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s); },
      2.0 * bytes);
  l.copy_kernel_gbps = std::max(
      time_gbps([&](cudaStream_t s) { launch_copy(src.get(), dst.get(), bytes, s, true); },
                2.0 * bytes),
      time_gbps([&](cudaStream_t s) { launch_copy(src.get(), dst.get(), bytes, s, false); },
                2.0 * bytes));
  l.read_gbps = time_gbps(
      [&](cudaStream_t s) { launch_read(src.get(), bytes, sink.get<unsigned>(), s); }, 1.0 * bytes);
  l.copy_gbps = std::max(l.memcpy_gbps, l.copy_kernel_gbps);
  return cudaDeviceSynchronize() == cudaSuccess && cudaGetLastError() == cudaSuccess &&
         l.copy_gbps > 0 && l.read_gbps > 0;
}

namespace {

// Copy and read benchmarks through the harness, over a ring of buffers. 82 and 128 MiB each way
// move the bytes of the issue-3 criterion calls at 8192 x 8192 bf16 (quantize to NVFP4: 128 MiB
// in, 32 + 4 MiB out; QDQ: 128 + 128 MiB), so the per-call constant of back-to-back calls of
// that size is measured for a plain copy too.
void register_bandwidth() {
  for (std::size_t mib : {8, 64, 82, 128, 256, 1024}) {
    const std::size_t bytes = mib << 20;
    for (int kind = 0; kind < 4; ++kind) {
      static const char* names[] = {"baseline/copy_memcpy", "baseline/copy_kernel",
                                    "baseline/read_reduce", "baseline/copy_kernel_plain"};
      const double moved = kind == 2 ? 1.0 * bytes : 2.0 * bytes;
      const auto [policy, unused] = policy_for(static_cast<std::size_t>(moved));
      const std::string name = std::string(names[kind]) + "/" + std::to_string(mib) + "MiB";
      auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
        const int slots = policy == cache::ring ? ring_slots(static_cast<std::size_t>(moved)) : 1;
        std::vector<device_buffer> in, out;
        device_buffer sink(sizeof(unsigned));
        for (int i = 0; i < slots; ++i) {
          in.emplace_back(bytes);
          QUADS_BENCH_TRY(state, in.back().error());
          QUADS_BENCH_TRY(state, fill_random(in.back().get<float>(), bytes / 4, 7 + i, stream()));
          if (kind != 2) {
            out.emplace_back(bytes);
            QUADS_BENCH_TRY(state, out.back().error());
          }
        }
        measure(state, policy, slots, moved, [&](int slot, cudaStream_t s) -> cudaError_t {
          if (kind == 0)
            return cudaMemcpyAsync(out[slot].get(), in[slot].get(), bytes, cudaMemcpyDeviceToDevice,
                                   s);
          if (kind == 1 || kind == 3)
            return launch_copy(in[slot].get(), out[slot].get(), bytes, s, kind == 1);
          return launch_read(in[slot].get(), bytes, sink.get<unsigned>(), s);
        });
      });
      configure(b, policy);
    }
  }
}

// The quantize's traffic without its arithmetic (`read4_write1_kernel`) at the inputs of 8192 x 8192
// and 16384 x 16384 bf16: the physical reference for the quantize rows (bytes: in + in / 4).
// `_pdl`: launched programmatically, as the quantize launchers launch their kernels.
void register_quantize_traffic() {
  for (const bool pdl : {false, true}) {
    for (std::size_t mib : {128, 512}) {
      const std::size_t in = mib << 20;
      const double moved = 1.25 * static_cast<double>(in);
      const auto [policy, unused] = policy_for(static_cast<std::size_t>(moved));
      const std::string name =
          std::string(pdl ? "baseline/read4_write1_pdl/" : "baseline/read4_write1/") +
          std::to_string(mib) + "MiB";
      auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
        const int slots = ring_slots(static_cast<std::size_t>(moved));
        std::vector<device_buffer> src, dst;
        for (int i = 0; i < slots; ++i) {
          src.emplace_back(in);
          QUADS_BENCH_TRY(state, src.back().error());
          QUADS_BENCH_TRY(state, fill_random(src.back().get<float>(), in / 4, 11 + i, stream()));
          dst.emplace_back(in / 4);
          QUADS_BENCH_TRY(state, dst.back().error());
        }
        measure(state, policy, slots, moved, [&](int slot, cudaStream_t s) {
          return launch_read4_write1(src[slot].get(), dst[slot].get(), in, s, pdl);
        });
      });
      configure(b, policy);
    }
  }
}

// The launch-bound floor: an empty kernel timed exactly like the small (flush) and large (ring)
// kernel benchmarks; `_pdl`: launched programmatically.
void register_floor() {
  for (const bool pdl : {false, true}) {
    for (cache policy : {cache::flush, cache::ring}) {
      const std::string name =
          std::string(pdl ? "baseline/empty_kernel_pdl/" : "baseline/empty_kernel/") +
          (policy == cache::flush ? "flush" : "ring");
      auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
        measure(state, policy, 1, 0.0, [pdl](int, cudaStream_t s) {
          if (pdl)
            return kernels::detail::launch_kernel(true, empty_kernel<true>, dim3(1), dim3(32), 0, s);
          empty_kernel<false><<<1, 32, 0, s>>>();
          return cudaGetLastError();
        });
      });
      configure(b, policy);
    }
  }
}

#if QUADS_BENCH_HAVE_CUBLAS

const char* cublas_status_name(cublasStatus_t st) { return cublasGetStatusString(st); }

bool cublas_failed(benchmark::State& state, cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return false;
  const std::string msg = std::string(what) + ": " + cublas_status_name(st);
  state.SkipWithError(msg.c_str());
  return true;
}
#define QUADS_CUBLAS_TRY(state, expr)                                                          \
  do {                                                                                          \
    if (cublas_failed((state), (expr), #expr)) return;                                          \
  } while (0)

struct gemm_shape {
  const char* label;
  int m, n, k; // y[m, n] = x[m, k] * W[n, k]^T  (m = tokens, n = output features)
};
constexpr gemm_shape gemm_shapes[] = {
    {"8192x8192x8192", 8192, 8192, 8192},
    {"M16_W14336x4096", 16, 14336, 4096},
    {"M16_W8192x8192", 16, 8192, 8192},
};

void add_gemm_counters(benchmark::State& state, const gemm_shape& g) {
  const double us = state.counters["us"];
  state.counters["TFLOPs"] = us > 0 ? 2.0 * g.m * g.n * g.k / (us * 1e6) : 0.0;
}

// bf16 GEMM through cublasGemmEx (fp32 accumulation). Column-major view: C[n, m] = W^T... i.e.
// op(A) = W (n x k, stored k-major: transposed), op(B) = x^T (k x m).
void register_cublas_bf16() {
  for (const gemm_shape& g : gemm_shapes) {
    const double w_bytes = 2.0 * g.n * g.k;
    const double bytes = w_bytes + 2.0 * g.m * g.k + 2.0 * g.m * g.n;
    const auto policy = cache::ring;
    const std::string name = std::string("baseline/cublas_bf16_gemm/") + g.label;
    auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
      const int slots = ring_slots(static_cast<std::size_t>(w_bytes), 8);
      cublasHandle_t h = nullptr;
      QUADS_CUBLAS_TRY(state, cublasCreate(&h));
      struct guard {
        cublasHandle_t h;
        ~guard() { cublasDestroy(h); }
      } gh{h};
      QUADS_CUBLAS_TRY(state, cublasSetStream(h, stream()));
      std::vector<device_buffer> w;
      device_buffer x(std::size_t{2} * g.m * g.k), y(std::size_t{2} * g.m * g.n);
      QUADS_BENCH_TRY(state, x.error());
      QUADS_BENCH_TRY(state, y.error());
      QUADS_BENCH_TRY(state, fill_random(x.get<__nv_bfloat16>(), std::size_t{1} * g.m * g.k, 3,
                                         stream()));
      for (int i = 0; i < slots; ++i) {
        w.emplace_back(static_cast<std::size_t>(w_bytes));
        QUADS_BENCH_TRY(state, w.back().error());
        QUADS_BENCH_TRY(state, fill_random(w.back().get<__nv_bfloat16>(),
                                           std::size_t{1} * g.n * g.k, 11 + i, stream()));
      }
      const float alpha = 1.0f, beta = 0.0f;
      bool cublas_ok = true;
      const bool ok = measure(state, policy, slots, bytes, [&](int slot, cudaStream_t) {
        const cublasStatus_t st = cublasGemmEx(
            h, CUBLAS_OP_T, CUBLAS_OP_N, g.n, g.m, g.k, &alpha, w[slot].get(), CUDA_R_16BF, g.k,
            x.get(), CUDA_R_16BF, g.k, &beta, y.get(), CUDA_R_16BF, g.n, CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS) cublas_ok = false;
        return st == CUBLAS_STATUS_SUCCESS ? cudaGetLastError() : cudaErrorUnknown;
      });
      if (!cublas_ok) return;
      if (ok) add_gemm_counters(state, g);
    });
    configure(b, policy);
  }
}

// FP8 e4m3 x e4m3 -> bf16 through cuBLASLt with per-tensor scales (device pointers), TN layout
// as FP8 requires: op(A) = W^T-stored (transposed), op(B) = x (not transposed).
void register_cublaslt_fp8() {
  for (const gemm_shape& g : gemm_shapes) {
    const double w_bytes = 1.0 * g.n * g.k;
    const double bytes = w_bytes + 1.0 * g.m * g.k + 2.0 * g.m * g.n;
    const auto policy = cache::ring;
    const std::string name = std::string("baseline/cublaslt_fp8_gemm/") + g.label;
    auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
      const int slots = ring_slots(static_cast<std::size_t>(w_bytes), 8);
      cublasLtHandle_t lt = nullptr;
      QUADS_CUBLAS_TRY(state, cublasLtCreate(&lt));
      cublasLtMatmulDesc_t op = nullptr;
      cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
      cublasLtMatmulPreference_t pref = nullptr;
      struct guard {
        cublasLtHandle_t& lt;
        cublasLtMatmulDesc_t& op;
        cublasLtMatrixLayout_t &la, &lb, &lc;
        cublasLtMatmulPreference_t& pref;
        ~guard() {
          if (pref) cublasLtMatmulPreferenceDestroy(pref);
          if (lc) cublasLtMatrixLayoutDestroy(lc);
          if (lb) cublasLtMatrixLayoutDestroy(lb);
          if (la) cublasLtMatrixLayoutDestroy(la);
          if (op) cublasLtMatmulDescDestroy(op);
          if (lt) cublasLtDestroy(lt);
        }
      } gd{lt, op, la, lb, lc, pref};
      std::vector<device_buffer> w;
      device_buffer x(std::size_t{1} * g.m * g.k), y(std::size_t{2} * g.m * g.n),
          scales(8 * sizeof(float)), workspace(std::size_t{32} << 20);
      QUADS_BENCH_TRY(state, x.error());
      QUADS_BENCH_TRY(state, y.error());
      QUADS_BENCH_TRY(state, scales.error());
      QUADS_BENCH_TRY(state, workspace.error());
      QUADS_BENCH_TRY(state, fill_random(x.get<__nv_fp8_e4m3>(), std::size_t{1} * g.m * g.k, 5,
                                         stream()));
      // Each scale on its own 16-byte boundary: with B's scale 4 bytes after A's, every
      // candidate algorithm was refused ("not supported") on the H200.
      const float host_scales[8] = {0.5f, 0, 0, 0, 0.25f, 0, 0, 0};
      QUADS_BENCH_TRY(state, cudaMemcpy(scales.get(), host_scales, sizeof host_scales,
                                        cudaMemcpyHostToDevice));
      for (int i = 0; i < slots; ++i) {
        w.emplace_back(static_cast<std::size_t>(w_bytes));
        QUADS_BENCH_TRY(state, w.back().error());
        QUADS_BENCH_TRY(state, fill_random(w.back().get<__nv_fp8_e4m3>(),
                                           std::size_t{1} * g.n * g.k, 13 + i, stream()));
      }
      QUADS_CUBLAS_TRY(state, cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      QUADS_CUBLAS_TRY(state, cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                                             sizeof ta));
      QUADS_CUBLAS_TRY(state, cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                                             sizeof tb));
      const float* a_scale = scales.get<float>();
      const float* b_scale = scales.get<float>() + 4;
      QUADS_CUBLAS_TRY(state, cublasLtMatmulDescSetAttribute(
                                  op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale));
      QUADS_CUBLAS_TRY(state, cublasLtMatmulDescSetAttribute(
                                  op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale));
      // Column-major: A is k x n (ld k), B is k x m (ld k), C/D is n x m (ld n).
      QUADS_CUBLAS_TRY(state, cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, g.k, g.n, g.k));
      QUADS_CUBLAS_TRY(state, cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, g.k, g.m, g.k));
      QUADS_CUBLAS_TRY(state, cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, g.n, g.m, g.n));
      QUADS_CUBLAS_TRY(state, cublasLtMatmulPreferenceCreate(&pref));
      const std::size_t ws = workspace.size();
      QUADS_CUBLAS_TRY(state, cublasLtMatmulPreferenceSetAttribute(
                                  pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
      cublasLtMatmulHeuristicResult_t heurs[8] = {};
      int found = 0;
      QUADS_CUBLAS_TRY(state, cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 8,
                                                             heurs, &found));
      const float alpha = 1.0f, beta = 0.0f;
      // The heuristic's first choice may still be refused at run time: take the first that runs.
      int pick = -1;
      cublasStatus_t last = CUBLAS_STATUS_NOT_SUPPORTED;
      for (int i = 0; i < found && pick < 0; ++i) {
        last = cublasLtMatmul(lt, op, &alpha, w[0].get(), la, x.get(), lb, &beta, y.get(), lc,
                              y.get(), lc, &heurs[i].algo, workspace.get(), workspace.size(),
                              stream());
        if (last == CUBLAS_STATUS_SUCCESS && cudaStreamSynchronize(stream()) == cudaSuccess) pick = i;
      }
      if (pick < 0) {
        const std::string msg = "cuBLASLt FP8: " + std::to_string(found) +
                                " candidate algorithms, none ran; last status " +
                                cublas_status_name(last);
        state.SkipWithError(msg.c_str());
        return;
      }
      const cublasLtMatmulHeuristicResult_t heur = heurs[pick];
      state.counters["algo_rank"] = pick;
      const bool ok = measure(state, policy, slots, bytes, [&](int slot, cudaStream_t s) {
        const cublasStatus_t st =
            cublasLtMatmul(lt, op, &alpha, w[slot].get(), la, x.get(), lb, &beta, y.get(), lc,
                           y.get(), lc, &heur.algo, workspace.get(), ws, s);
        return st == CUBLAS_STATUS_SUCCESS ? cudaGetLastError() : cudaErrorUnknown;
      });
      if (ok) add_gemm_counters(state, g);
    });
    configure(b, policy);
  }
}
#endif

} // namespace

void register_baselines() {
  register_floor();
  register_bandwidth();
  register_quantize_traffic();
}

void register_gemm_baselines() {
#if QUADS_BENCH_HAVE_CUBLAS
  register_cublas_bf16();
  register_cublaslt_fp8();
#endif
}

} // namespace quads::bench
