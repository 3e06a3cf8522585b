// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Harness kernels: spin, L2 flush, random fill, and the shared benchmark stream.

#include "timing.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdio>
#include <type_traits>

namespace quads::bench {

namespace {

__device__ __forceinline__ long long global_ns() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(long long ns) {
  const long long t0 = global_ns();
  while (global_ns() - t0 < ns) __nanosleep(1000);
}

// Read-only sweep: each thread sums 16-byte words; the result is written only if impossible, so
// the compiler keeps the loads and no line becomes dirty.
__global__ void sweep_kernel(const uint4* p, std::size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u && threadIdx.x == 1023u) *sink = acc;
}

__device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <class T>
__device__ __forceinline__ T from_float(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else if constexpr (std::is_same_v<T, __nv_fp8_e4m3>) return __nv_fp8_e4m3(v); // saturates
  else return v;
}

template <class T>
__global__ void fill_kernel(T* p, std::size_t n, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const std::uint64_t h = splitmix64(seed ^ (i * 0x2545f4914f6cdd1dull));
    const float mant = 1.0f + static_cast<float>(h & 0xffffffu) * 0x1.0p-24f; // [1, 2)
    const int binade = static_cast<int>((h >> 24) % 17u) - 12;              // 2^-12 .. 2^4
    float v = ldexpf(mant, binade);
    if (((h >> 40) % 1000u) == 0u) v *= 64.0f; // rare outliers, as in real activations
    if ((h >> 63) != 0u) v = -v;
    p[i] = from_float<T>(v);
  }
}

struct flush_buffer {
  device_buffer buf;
  device_buffer sink;
};

} // namespace

cudaStream_t stream() {
  static cudaStream_t s = [] {
    cudaStream_t t = nullptr;
    if (cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking) != cudaSuccess) {
      std::fprintf(stderr, "quads bench: cannot create a stream\n");
      t = nullptr;
    }
    return t;
  }();
  return s;
}

cudaError_t probe_kernel_image() {
  cudaFuncAttributes attr{};
  return cudaFuncGetAttributes(&attr, spin_kernel);
}

void spin(cudaStream_t s, long long ns) { spin_kernel<<<1, 1, 0, s>>>(ns); }

cudaError_t flush_l2(cudaStream_t s) {
  static flush_buffer f = [] {
    flush_buffer b;
    const std::size_t l2 = std::max<std::size_t>(limits().l2_bytes, std::size_t{50} << 20);
    b.buf = device_buffer(4 * l2);
    b.sink = device_buffer(sizeof(unsigned));
    if (b.buf.error() == cudaSuccess) cudaMemset(b.buf.get(), 0x5a, b.buf.size());
    return b;
  }();
  if (f.buf.error() != cudaSuccess) return f.buf.error();
  const std::size_t n = f.buf.size() / sizeof(uint4);
  sweep_kernel<<<std::max(limits().sms, 1) * 8, 512, 0, s>>>(f.buf.get<const uint4>(), n,
                                                              f.sink.get<unsigned>());
  return cudaGetLastError();
}

template <class T>
cudaError_t fill_random(T* p, std::size_t n, std::uint64_t seed, cudaStream_t s) {
  fill_kernel<T><<<std::max(limits().sms, 1) * 8, 256, 0, s>>>(p, n, seed);
  return cudaGetLastError();
}
template cudaError_t fill_random<float>(float*, std::size_t, std::uint64_t, cudaStream_t);
template cudaError_t fill_random<__half>(__half*, std::size_t, std::uint64_t, cudaStream_t);
template cudaError_t fill_random<__nv_fp8_e4m3>(__nv_fp8_e4m3*, std::size_t, std::uint64_t,
                                                cudaStream_t);
template cudaError_t fill_random<__nv_bfloat16>(__nv_bfloat16*, std::size_t, std::uint64_t,
                                                cudaStream_t);

} // namespace quads::bench
