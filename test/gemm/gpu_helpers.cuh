// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Helpers of the GEMM GPU tests: device buffers, operand upload, the accuracy check
//!        against the float64 reference with the documented fp32-summation tolerance.
#pragma once

#include <quads/gemm/decode.cuh>

#include <quads/gemm/reference.hpp>

#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace quads_gemm_test {

#define QUADS_GEMM_CHECK(expr)                                                                     \
  do {                                                                                             \
    const cudaError_t quads_e_ = (expr);                                                           \
    if (quads_e_ != cudaSuccess)                                                                   \
      FAIL(#expr << " -> " << std::string(cudaGetErrorString(quads_e_)) << " ("                    \
                 << std::string(::quads::kernels::last_error_message()) << ")");                   \
  } while (0)

//! A device allocation of `n` elements of `T`, filled with a non-zero pattern.
template <class T>
struct dbuf {
  T* ptr = nullptr;
  std::size_t n = 0;
  explicit dbuf(std::size_t count, int fill = 0x7B) : n(count == 0 ? 1 : count) {
    REQUIRE(cudaMalloc(&ptr, n * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaMemset(ptr, fill, n * sizeof(T)) == cudaSuccess);
  }
  explicit dbuf(const std::vector<T>& h) : dbuf(h.size()) { upload(h); }
  dbuf(const dbuf&) = delete;
  dbuf& operator=(const dbuf&) = delete;
  ~dbuf() { cudaFree(ptr); }
  void upload(const std::vector<T>& h) {
    REQUIRE(h.size() <= n);
    REQUIRE(cudaMemcpy(ptr, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  std::vector<T> download(std::size_t count) const {
    std::vector<T> h(count);
    REQUIRE(cudaMemcpy(h.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
  }
};

inline void sync_ok() {
  const cudaError_t e = cudaDeviceSynchronize();
  REQUIRE_MESSAGE(e == cudaSuccess, std::string(cudaGetErrorString(e)));
}

inline int device_sms() {
  int dev = 0, n = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
  return n > 0 ? n : 132;
}

//! |y - y_ref| <= |alpha| * tolerance(acc) + 2^-23 |y_ref| for every element (y = alpha * acc
//! rounded once more by the fp32 alpha multiply). Reports the first violation.
inline void check_scaled(const std::vector<float>& y, const std::vector<double>& y_ref,
                         const quads::gemm::reference::accumulators& acc,
                         const std::vector<double>& alpha_abs, int splits,
                         const std::string& what) {
  REQUIRE(y.size() == y_ref.size());
  double worst = 0;
  for (int m = 0; m < acc.rows; ++m)
    for (int n = 0; n < acc.cols; ++n) {
      const std::size_t o = acc.index(m, n);
      const double tol = alpha_abs[o] * quads::gemm::reference::tolerance(acc, m, n, splits) +
                         std::ldexp(std::fabs(y_ref[o]), -23) + 1e-37;
      const double err = std::fabs(static_cast<double>(y[o]) - y_ref[o]);
      if (!(err <= tol)) {
        FAIL_CHECK(what << ": (m " << m << ", n " << n << ") got " << y[o] << " want " << y_ref[o]
                        << " |err| " << err << " > tolerance " << tol);
        return;
      }
      if (tol > 0 && err / tol > worst) worst = err / tol;
    }
  MESSAGE(what << ": max |err| / tolerance = " << worst);
}

} // namespace quads_gemm_test
