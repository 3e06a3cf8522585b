// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Decode-shape baselines of the GEMM benchmark, in the same binary and run: cuBLAS bf16
//!        (cublasGemmEx, fp32 accumulation) and cuBLASLt FP8 E4M3 with per-tensor scales, for
//!        the weights 14336x4096, 4096x14336, 8192x8192 and M in {1, 4, 8, 16}; cold L2 through
//!        the bench/gpu harness (ring of weight copies). The bytes are the operands and the bf16
//!        output, once each.
#include "gemm_baselines.hpp"

#include "../gpu/timing.cuh"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#if QUADS_BENCH_HAVE_CUBLAS
#  include <cublasLt.h>
#  include <cublas_v2.h>
#endif

#include <string>
#include <vector>

namespace quads::bench::gemm {

#if QUADS_BENCH_HAVE_CUBLAS
namespace {

bool cublas_bad(benchmark::State& state, cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return false;
  state.SkipWithError((std::string(what) + ": " + cublasGetStatusString(st)).c_str());
  return true;
}
#  define QUADS_GEMM_CUBLAS_TRY(state, expr)                                                   \
    do {                                                                                        \
      if (cublas_bad((state), (expr), #expr)) return;                                           \
    } while (0)

void register_bf16(int M, int N, int K) {
  const double w_bytes = 2.0 * N * K;
  const double bytes = w_bytes + 2.0 * M * K + 2.0 * M * N;
  const std::string name = "baseline/cublas_bf16/M" + std::to_string(M) + "_W" + std::to_string(N) +
                           "x" + std::to_string(K);
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    const int slots = ring_slots(static_cast<std::size_t>(w_bytes), 8);
    cublasHandle_t h = nullptr;
    QUADS_GEMM_CUBLAS_TRY(state, cublasCreate(&h));
    struct guard {
      cublasHandle_t h;
      ~guard() { cublasDestroy(h); }
    } gh{h};
    QUADS_GEMM_CUBLAS_TRY(state, cublasSetStream(h, stream()));
    std::vector<device_buffer> w;
    device_buffer x(std::size_t{2} * M * K), y(std::size_t{2} * M * N);
    QUADS_BENCH_TRY(state, x.error());
    QUADS_BENCH_TRY(state, y.error());
    QUADS_BENCH_TRY(state, fill_random(x.get<__nv_bfloat16>(), std::size_t{1} * M * K, 3, stream()));
    for (int i = 0; i < slots; ++i) {
      w.emplace_back(static_cast<std::size_t>(w_bytes));
      QUADS_BENCH_TRY(state, w.back().error());
      QUADS_BENCH_TRY(state, fill_random(w.back().get<__nv_bfloat16>(), std::size_t{1} * N * K,
                                         11 + i, stream()));
    }
    const float alpha = 1.0f, beta = 0.0f;
    measure(state, cache::ring, slots, bytes, [&](int slot, cudaStream_t) {
      const cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha,
                                             w[slot].get(), CUDA_R_16BF, K, x.get(), CUDA_R_16BF, K,
                                             &beta, y.get(), CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT);
      return st == CUBLAS_STATUS_SUCCESS ? cudaGetLastError() : cudaErrorUnknown;
    });
  });
  configure(b, cache::ring);
}

void register_fp8(int M, int N, int K) {
  const double w_bytes = 1.0 * N * K;
  const double bytes = w_bytes + 1.0 * M * K + 2.0 * M * N;
  const std::string name = "baseline/cublaslt_fp8/M" + std::to_string(M) + "_W" +
                           std::to_string(N) + "x" + std::to_string(K);
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    const int slots = ring_slots(static_cast<std::size_t>(w_bytes), 8);
    cublasLtHandle_t lt = nullptr;
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
    QUADS_GEMM_CUBLAS_TRY(state, cublasLtCreate(&lt));
    // FP8 needs 16-byte aligned leading dimensions: pad the token count of x / y to 16.
    const int Mp = (M + 15) / 16 * 16;
    std::vector<device_buffer> w;
    device_buffer x(std::size_t{1} * Mp * K), y(std::size_t{2} * Mp * N), scales(8 * sizeof(float)),
        workspace(std::size_t{32} << 20);
    QUADS_BENCH_TRY(state, x.error());
    QUADS_BENCH_TRY(state, y.error());
    QUADS_BENCH_TRY(state, fill_random(x.get<__nv_fp8_e4m3>(), std::size_t{1} * Mp * K, 5, stream()));
    const float host_scales[8] = {0.5f, 0, 0, 0, 0.25f, 0, 0, 0};  // each on 16 bytes
    QUADS_BENCH_TRY(state, cudaMemcpy(scales.get(), host_scales, sizeof host_scales, cudaMemcpyHostToDevice));
    for (int i = 0; i < slots; ++i) {
      w.emplace_back(static_cast<std::size_t>(w_bytes));
      QUADS_BENCH_TRY(state, w.back().error());
      QUADS_BENCH_TRY(state, fill_random(w.back().get<__nv_fp8_e4m3>(), std::size_t{1} * N * K,
                                         13 + i, stream()));
    }
    QUADS_GEMM_CUBLAS_TRY(state, cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    QUADS_GEMM_CUBLAS_TRY(state, cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    QUADS_GEMM_CUBLAS_TRY(state, cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    const float* a_scale = scales.get<float>();
    const float* b_scale = scales.get<float>() + 4;
    QUADS_GEMM_CUBLAS_TRY(state, cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale));
    QUADS_GEMM_CUBLAS_TRY(state, cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale));
    QUADS_GEMM_CUBLAS_TRY(state, cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, N, K));
    QUADS_GEMM_CUBLAS_TRY(state, cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, M, K));
    QUADS_GEMM_CUBLAS_TRY(state, cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
    QUADS_GEMM_CUBLAS_TRY(state, cublasLtMatmulPreferenceCreate(&pref));
    const std::size_t ws = workspace.size();
    QUADS_GEMM_CUBLAS_TRY(state, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t heurs[8] = {};
    int found = 0;
    QUADS_GEMM_CUBLAS_TRY(state, cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 8, heurs, &found));
    const float alpha = 1.0f, beta = 0.0f;
    int pick = -1;
    for (int i = 0; i < found && pick < 0; ++i) {
      const cublasStatus_t st = cublasLtMatmul(lt, op, &alpha, w[0].get(), la, x.get(), lb, &beta, y.get(), lc,
                                               y.get(), lc, &heurs[i].algo, workspace.get(), ws, stream());
      if (st == CUBLAS_STATUS_SUCCESS && cudaStreamSynchronize(stream()) == cudaSuccess) pick = i;
    }
    if (pick < 0) {
      state.SkipWithError("cuBLASLt FP8: no candidate algorithm ran");
      return;
    }
    const cublasLtMatmulAlgo_t algo = heurs[pick].algo;
    state.counters["algo_rank"] = pick;
    measure(state, cache::ring, slots, bytes, [&](int slot, cudaStream_t s) {
      const cublasStatus_t st = cublasLtMatmul(lt, op, &alpha, w[slot].get(), la, x.get(), lb, &beta,
                                               y.get(), lc, y.get(), lc, &algo, workspace.get(), ws, s);
      return st == CUBLAS_STATUS_SUCCESS ? cudaGetLastError() : cudaErrorUnknown;
    });
  });
  configure(b, cache::ring);
}

} // namespace
#endif

void register_decode_baselines(const std::vector<int>& ms, const std::vector<std::pair<int, int>>& shapes) {
#if QUADS_BENCH_HAVE_CUBLAS
  for (const auto& [N, K] : shapes)
    for (int M : ms) {
      register_bf16(M, N, K);
      register_fp8(M, N, K);
    }
#else
  (void)ms;
  (void)shapes;
#endif
}

} // namespace quads::bench::gemm
