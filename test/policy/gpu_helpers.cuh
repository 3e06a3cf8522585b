// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Helpers of the policy GPU tests: a device buffer, copies, bf16 conversions, a cuBLAS
//! handle holder.
#pragma once

#include <quads/policy/reference.hpp>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace policy_gpu_test {

#define QUADS_CUDA_REQUIRE(call)                                                                   \
  do {                                                                                             \
    const cudaError_t quads_e_ = (call);                                                           \
    INFO(#call << ": " << std::string(cudaGetErrorString(quads_e_)));                              \
    REQUIRE(quads_e_ == cudaSuccess);                                                              \
  } while (0)

//! Device memory of `n` values of `T` (test-only RAII).
template <class T>
struct dbuf {
  T* p = nullptr;
  std::size_t n = 0;
  explicit dbuf(std::size_t count) : n(count) {
    if (n > 0) REQUIRE(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
  }
  dbuf(const dbuf&) = delete;
  dbuf& operator=(const dbuf&) = delete;
  ~dbuf() { cudaFree(p); }
  void upload(const std::vector<T>& h) {
    REQUIRE(h.size() == n);
    if (n > 0)
      REQUIRE(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> h(n);
    if (n > 0)
      REQUIRE(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
  }
};

inline std::vector<__nv_bfloat16> to_bf16(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint16_t b = quads::reference::bf16_bits(v[i]);
    std::memcpy(static_cast<void*>(&out[i]), &b, 2);
  }
  return out;
}
inline std::vector<float> from_bf16(const std::vector<__nv_bfloat16>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint16_t b;
    std::memcpy(&b, static_cast<const void*>(&v[i]), 2);
    out[i] = quads::reference::from_bf16_bits(b);
  }
  return out;
}
//! Host fp32 values rounded to bf16 (RNE), as the GPU's bf16 outputs round them.
inline std::vector<float> round_bf16(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out[i] = quads::reference::round_bf16(v[i]);
  return out;
}

struct cublas_handle {
  cublasHandle_t h = nullptr;
  cublas_handle() { REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS); }
  ~cublas_handle() { cublasDestroy(h); }
  cublas_handle(const cublas_handle&) = delete;
  cublas_handle& operator=(const cublas_handle&) = delete;
};

} // namespace policy_gpu_test
