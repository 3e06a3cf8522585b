// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Helpers of the GPU suite: device buffers, seeds, input generators, comparisons.
#pragma once

#include <quads/kernels/kernels.cuh>

#include <quads/reference/tensor.hpp>

#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace quads::gpu_test {

#define QUADS_CUDA_CHECK(expr)                                                                     \
  do {                                                                                             \
    const cudaError_t quads_e_ = (expr);                                                           \
    if (quads_e_ != cudaSuccess)                                                                   \
      FAIL(#expr << " -> " << std::string(cudaGetErrorString(quads_e_)) << " ("                    \
                 << std::string(::quads::kernels::last_error_message()) << ")");                   \
  } while (0)

//! The run's seed: QUADS_SEED if set, else the clock; printed once by main.
std::uint64_t seed();
//! QUADS_GPU_QUICK=1 shrinks the big sweeps (for compute-sanitizer runs).
bool quick();
//! Host threads for the big host-side checks.
inline unsigned host_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

//! A device allocation of `n` elements of `T` (freed on scope exit).
template <class T>
struct device_buffer {
  T* ptr = nullptr;
  std::size_t n = 0;
  explicit device_buffer(std::size_t count, int fill_byte = 0xAB) : n(count) {
    if (n == 0) n = 1;
    REQUIRE(cudaMalloc(&ptr, n * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaMemset(ptr, fill_byte, n * sizeof(T)) == cudaSuccess);
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { cudaFree(ptr); }
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

// ---------------------------------------------------------------------------------------------
// Element conversion on the host
// ---------------------------------------------------------------------------------------------

template <class T>
inline T to_elem(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(v);
  else
    return v;
}
template <class T>
inline float from_elem(T v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else
    return v;
}
template <class T>
inline std::uint32_t elem_bits(T v) {
  if constexpr (sizeof(T) == 2) {
    std::uint16_t b;
    std::memcpy(&b, &v, 2);
    return b;
  } else {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  }
}
template <class T>
inline T elem_from_bits(std::uint32_t b) {
  T v;
  if constexpr (sizeof(T) == 2) {
    const std::uint16_t h = static_cast<std::uint16_t>(b);
    std::memcpy(static_cast<void*>(&v), &h, 2);
  } else {
    std::memcpy(&v, &b, 4);
  }
  return v;
}
template <class T>
inline const char* elem_name() {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return "bf16";
  else if constexpr (std::is_same_v<T, __half>)
    return "fp16";
  else
    return "fp32";
}

inline std::uint32_t fbits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float from_fbits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

//! `reference::amax` of expert `e` of the `[experts, R, C]` values `x`.
inline float expert_amax(const std::vector<float>& x, int e, int R, int C) {
  return reference::amax(std::span<const float>(x).subspan(
      static_cast<std::size_t>(e) * R * C, static_cast<std::size_t>(R) * C));
}

// ---------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------

//! Kinds of test tensors.
enum class input_kind {
  normal,    //!< Gaussian with per-row scales and outlier channels (x20 .. x100)
  heavy,     //!< Student-t-like (ratio of Gaussians), plus outliers
  boundary,  //!< one ulp (of T) either side of every E2M1 decision point, per block scales 2^j
  underflow, //!< block amax = 2^-k * tensor amax, k = 0 .. 30
  specials,  //!< ±0, ±Inf, NaN, huge and tiny values mixed into random data
  zeros,     //!< all zeros (tensor amax 0), with some -0
  bits,      //!< arbitrary bit patterns of T (everything, NaN and Inf included)
};
inline const char* kind_name(input_kind k) {
  switch (k) {
  case input_kind::normal:
    return "normal";
  case input_kind::heavy:
    return "heavy-tailed";
  case input_kind::boundary:
    return "boundary";
  case input_kind::underflow:
    return "scale-underflow";
  case input_kind::specials:
    return "specials";
  case input_kind::zeros:
    return "zeros";
  case input_kind::bits:
    return "bit-patterns";
  }
  return "?";
}
inline constexpr input_kind all_kinds[] = {
    input_kind::normal,   input_kind::heavy, input_kind::boundary, input_kind::underflow,
    input_kind::specials, input_kind::zeros, input_kind::bits};

//! The largest finite value of T.
template <class T>
inline float max_of() {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return from_fbits(0x7f7f0000u);
  else if constexpr (std::is_same_v<T, __half>)
    return 65504.0f;
  else
    return 3.40282346638528859811704183484516925e+38f;
}

//! Next representable T above / below `v` (finite v), as float.
template <class T>
inline float t_step(float v, int dir) {
  const T t = to_elem<T>(v);
  std::uint32_t b = elem_bits(t);
  const std::uint32_t sign = sizeof(T) == 2 ? 0x8000u : 0x80000000u;
  const bool neg = (b & sign) != 0;
  const std::uint32_t mag = b & ~sign;
  std::uint32_t m2;
  if ((dir > 0) != neg)
    m2 = mag + 1;
  else
    m2 = mag == 0 ? 1 : mag - 1;
  if (mag == 0 && !((dir > 0) != neg))
    b = sign | 1; // below +0: -min subnormal
  else
    b = (b & sign) | m2;
  return from_elem(elem_from_bits<T>(b));
}

//! A `[experts * rows, cols]` tensor of `kind`, as exact values of T (returned as floats).
template <class T>
std::vector<float> make_input(input_kind kind, int experts, int rows, int cols, int block,
                              std::uint64_t s) {
  std::mt19937_64 rng(s);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ui(0, 1 << 30);
  const std::size_t R = static_cast<std::size_t>(experts) * rows;
  std::vector<float> x(R * cols);
  const float tmax = max_of<T>();
  std::vector<float> col_gain(cols, 1.0f);
  for (int c = 0; c < cols; ++c)
    if (ui(rng) % 37 == 0) col_gain[c] = 20.0f + static_cast<float>(ui(rng) % 81);
  static const float thresholds[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                                     6.0f,  0.5f,  1.0f,  1.5f,  2.0f, 3.0f, 4.0f};
  for (std::size_t r = 0; r < R; ++r) {
    const float row_gain = std::ldexp(1.0f, ui(rng) % 9 - 4);
    for (int c = 0; c < cols; ++c) {
      float v = 0.0f;
      switch (kind) {
      case input_kind::normal:
        v = nd(rng) * row_gain * col_gain[c];
        break;
      case input_kind::heavy: {
        const float d = std::fabs(nd(rng)) + 0.05f;
        v = nd(rng) / d * row_gain * (col_gain[c] > 1.0f ? col_gain[c] : 1.0f);
        break;
      }
      case input_kind::boundary: {
        // Block amax 6 * 2^j (j per block), other values at thresholds * 2^j, ±1 ulp of T.
        const int kb = c / block;
        const int j = static_cast<int>((r * 7 + kb * 3) % 9) - 4;
        const float S = std::ldexp(1.0f, j);
        if (c % block == 0) {
          v = 6.0f * S;
        } else {
          const float t = thresholds[ui(rng) % 14] * S;
          const int d = ui(rng) % 3 - 1;
          v = d == 0 ? t : t_step<T>(t, d);
          if (ui(rng) & 1) v = -v;
        }
        break;
      }
      case input_kind::underflow: {
        const int kb = c / block;
        const int k = static_cast<int>((r + kb) % 31);
        v = nd(rng) * std::ldexp(1.0f, -k);
        if (r == 0 && c == 0) v = 1.0f; // tensor amax reference
        break;
      }
      case input_kind::specials: {
        const int pick = ui(rng) % 24;
        const float inf = std::numeric_limits<float>::infinity();
        switch (pick) {
        case 0:
          v = 0.0f;
          break;
        case 1:
          v = -0.0f;
          break;
        case 2:
          v = inf;
          break;
        case 3:
          v = -inf;
          break;
        case 4:
          v = std::numeric_limits<float>::quiet_NaN();
          break;
        case 5:
          v = -std::numeric_limits<float>::quiet_NaN();
          break;
        case 6:
          v = tmax;
          break;
        case 7:
          v = -tmax * 0.75f;
          break;
        case 8:
          v = std::ldexp(1.0f, -130);
          break; // fp32 subnormal (0 in bf16/fp16)
        case 9:
          v = std::ldexp(1.0f, -20);
          break;
        default:
          v = nd(rng) * row_gain;
          break;
        }
        // keep some rows free of NaN/Inf so finite paths are covered in the same tensor
        if (r % 3 == 2 && (pick >= 2 && pick <= 5)) v = 1.5f;
        break;
      }
      case input_kind::zeros:
        v = (ui(rng) % 5 == 0) ? -0.0f : 0.0f;
        break;
      case input_kind::bits: {
        const std::uint32_t b = static_cast<std::uint32_t>(rng());
        v = sizeof(T) == 2 ? from_elem(elem_from_bits<T>(b & 0xffffu)) : from_fbits(b);
        break;
      }
      }
      x[r * cols + c] = from_elem(to_elem<T>(v)); // exact value of T
    }
  }
  return x;
}

//! Uploads `x` (`[R, cols]` floats) as T rows with `row_stride` elements (padding poisoned).
template <class T>
void upload_strided(device_buffer<T>& d, const std::vector<float>& x, std::size_t rows, int cols,
                    std::int64_t row_stride) {
  std::vector<T> h(rows * static_cast<std::size_t>(row_stride), to_elem<T>(-777.0f));
  for (std::size_t r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      h[r * row_stride + c] = to_elem<T>(x[r * cols + c]);
  d.upload(h);
}

//! Reports the first mismatch of two byte vectors (index and both values), fails the check.
inline void expect_bytes(const std::vector<std::uint8_t>& got,
                         const std::vector<std::uint8_t>& want, const std::string& what) {
  REQUIRE_MESSAGE(got.size() == want.size(),
                  what << ": size " << got.size() << " vs " << want.size());
  std::size_t bad = 0, first = got.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      if (bad == 0) first = i;
      ++bad;
    }
  if (bad != 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "%s: %zu of %zu bytes differ, first at %zu: got 0x%02x want 0x%02x", what.c_str(),
                  bad, got.size(), first, got[first], want[first]);
    FAIL_CHECK(buf);
  }
}

inline void expect_scales(const std::vector<tensor_scale>& got,
                          const std::vector<tensor_scale>& want, const std::string& what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (fbits(got[i].encode) != fbits(want[i].encode) ||
        fbits(got[i].decode) != fbits(want[i].decode)) {
      FAIL_CHECK(what << ": tensor scale " << i << " got {" << got[i].encode << ", "
                      << got[i].decode << "} want {" << want[i].encode << ", " << want[i].decode
                      << "}");
      return;
    }
}

//! Bitwise comparison of T outputs against floats cast (RNE) to T.
template <class T>
void expect_elems(const std::vector<T>& got, const std::vector<float>& want_f32, std::size_t rows,
                  int cols, std::int64_t row_stride, const std::string& what) {
  std::size_t bad = 0, fr = 0, fc = 0;
  for (std::size_t r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const std::uint32_t g = elem_bits(got[r * row_stride + c]);
      const std::uint32_t w = elem_bits(to_elem<T>(want_f32[r * cols + c]));
      if (g != w) {
        if (bad == 0) fr = r, fc = static_cast<std::size_t>(c);
        ++bad;
      }
    }
  if (bad != 0)
    FAIL_CHECK(what << ": " << bad << " values differ; first at row " << fr << " col " << fc
                    << ": got bits 0x" << std::hex << elem_bits(got[fr * row_stride + fc])
                    << " want 0x" << elem_bits(to_elem<T>(want_f32[fr * cols + fc])) << std::dec
                    << " (" << want_f32[fr * cols + fc] << ")");
}

//! Random given tensor scales, one per expert (from amax-like values, plus exact {1, 1}).
template <class Quantizer>
std::vector<tensor_scale> make_given(int experts, std::uint64_t s) {
  std::mt19937_64 rng(s ^ 0x51ed);
  std::vector<tensor_scale> g;
  for (int e = 0; e < experts; ++e) {
    if (e == 0) {
      g.push_back({1.0f, 1.0f});
    } else {
      const float amax = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f,
                                    static_cast<int>(rng() % 21) - 10);
      g.push_back(make_tensor_scale<typename Quantizer::format, Quantizer::options>(amax));
    }
  }
  return g;
}

} // namespace quads::gpu_test
