// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Device probe of the small-call paths (not a test; no doctest): times the variants that
//! the launchers' benchmark knobs select (`detail::amax_knobs`, `detail::small_knobs`) side by
//! side in one process, with the method of bench/gpu/timing.cuh, plus a few floor diagnostics.
//!
//! Method (as bench/gpu): calls below 32 MiB are timed one launch at a time between two events
//! after a read-only sweep over 4x the L2 (cold L2, isolated call, event / launch floor
//! included), median of 200; `hot` is the per-call time of 20 back-to-back launches on the same
//! buffers (median of 15). Larger calls are timed back-to-back in batches of 8 over a ring of
//! buffer sets of at least 3x the L2 behind a spin kernel (median of 25 batches).
//! Diagnostics: an empty kernel, straight-line code of 8 / 32 KiB executed by one warp (the cost
//! of fetching instructions after the sweep evicted them from the L2), one CTA loading 16 bytes
//! per thread from a cold buffer (one memory round trip), and two dependent cold loads.
//! Usage: smallcall_probe [filter substring]. Output: one line per row, `name cold_us min_us
//! hot_us`.
#include <quads/kernels/kernels.cuh>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace quads;
using bf16 = __nv_bfloat16;
namespace kd = quads::kernels::detail;

#define PROBE_CHECK(expr)                                                                          \
  do {                                                                                             \
    const cudaError_t e_ = (expr);                                                                 \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s -> %s (%s)\n", __FILE__, __LINE__, #expr,                   \
                   cudaGetErrorString(e_), quads::kernels::last_error_message());                  \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

__global__ void flush_kernel(const uint4* p, std::size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}

__global__ void spin_kernel(long long ns) {
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 >= ns) break;
  }
}

__global__ void empty_kernel() {}

//! `I` rounds of 8 multiply-adds x = x * x + a (8 independent chains), unrolled by recursion.
template <int I>
__device__ __forceinline__ void shift_rounds(unsigned (&x)[8], unsigned a) {
  if constexpr (I > 0) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      asm volatile("mad.lo.u32 %0, %0, %0, %1;" : "+r"(x[j]) : "r"(a + I));
    shift_rounds<I - 1>(x, a);
  }
}

//! `N` ALU instructions of straight-line code in 8 independent chains (one warp).
template <int N>
__global__ void code_kernel(unsigned* out, unsigned a) {
  unsigned x[8];
#pragma unroll
  for (int j = 0; j < 8; ++j)
    x[j] = threadIdx.x + j;
  shift_rounds<N / 8>(x, a);
  unsigned r = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j)
    r ^= x[j];
  if (r == 0x9e3779b9u) *out = r;
}

//! One CTA: each thread loads 16 bytes (cold) and folds them into one store.
__global__ void one_load_kernel(const uint4* p, unsigned* out) {
  const uint4 v = p[threadIdx.x];
  const unsigned r = v.x ^ v.y ^ v.z ^ v.w;
  if (r == 0x9e3779b9u) *out = r;
}

//! One thread: two dependent cold loads (the second address comes from the first load).
__global__ void two_dep_loads_kernel(const unsigned* p, unsigned* out) {
  const unsigned i = p[0] & 0xffffu;
  const unsigned r = p[1024 + i * 64];
  if (r == 0x9e3779b9u) *out = r;
}

struct device_mem {
  void* p = nullptr;
  explicit device_mem(std::size_t bytes) { PROBE_CHECK(cudaMalloc(&p, bytes > 0 ? bytes : 1)); }
  ~device_mem() { cudaFree(p); }
  device_mem(const device_mem&) = delete;
  device_mem& operator=(const device_mem&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

cudaStream_t g_stream = nullptr;
std::size_t g_l2 = 0;
device_mem* g_flush = nullptr;
unsigned* g_sink = nullptr;

void flush() {
  const std::size_t n = 4 * g_l2 / 16;
  flush_kernel<<<1024, 512, 0, g_stream>>>(g_flush->as<const uint4>(), n, g_sink);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct row_result {
  double cold, min, hot;
};

//! A row that could not be timed (the launch failed): reported as -1 with the error.
row_result failed(cudaError_t e) {
  std::printf("# launch failed: %s (%s)\n", cudaGetErrorString(e),
              quads::kernels::last_error_message());
  cudaGetLastError();
  return {-1, -1, -1};
}

//! Isolated cold calls (flush, event, launch, event) and the back-to-back hot rate.
row_result time_flush(const std::function<cudaError_t(cudaStream_t)>& launch) {
  cudaEvent_t a, b;
  PROBE_CHECK(cudaEventCreate(&a));
  PROBE_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i)
    if (const cudaError_t e = launch(g_stream); e != cudaSuccess) return failed(e);
  if (const cudaError_t e = cudaStreamSynchronize(g_stream); e != cudaSuccess) return failed(e);
  std::vector<double> us;
  for (int it = 0; it < 200; ++it) {
    flush();
    PROBE_CHECK(cudaEventRecord(a, g_stream));
    launch(g_stream);
    PROBE_CHECK(cudaEventRecord(b, g_stream));
    PROBE_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    PROBE_CHECK(cudaEventElapsedTime(&ms, a, b));
    us.push_back(1e3 * ms);
  }
  std::vector<double> hot;
  for (int r = 0; r < 15; ++r) {
    spin_kernel<<<1, 1, 0, g_stream>>>(20'000 + 8'000LL * 20);
    PROBE_CHECK(cudaEventRecord(a, g_stream));
    for (int i = 0; i < 20; ++i)
      launch(g_stream);
    PROBE_CHECK(cudaEventRecord(b, g_stream));
    PROBE_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    PROBE_CHECK(cudaEventElapsedTime(&ms, a, b));
    hot.push_back(1e3 * ms / 20);
  }
  PROBE_CHECK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return {median(us), *std::min_element(us.begin(), us.end()), median(hot)};
}

//! Back-to-back batches of 8 over `slots` buffer sets (cold L2 when the slots exceed it).
row_result time_ring(const std::function<cudaError_t(int, cudaStream_t)>& launch, int slots) {
  cudaEvent_t a, b;
  PROBE_CHECK(cudaEventCreate(&a));
  PROBE_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < std::max(slots, 3); ++i)
    if (const cudaError_t e = launch(i % slots, g_stream); e != cudaSuccess) return failed(e);
  if (const cudaError_t e = cudaStreamSynchronize(g_stream); e != cudaSuccess) return failed(e);
  const int batch = slots * ((8 + slots - 1) / slots);
  std::vector<double> us;
  int slot = 0;
  for (int it = 0; it < 25; ++it) {
    spin_kernel<<<1, 1, 0, g_stream>>>(20'000 + 8'000LL * batch);
    PROBE_CHECK(cudaEventRecord(a, g_stream));
    for (int i = 0; i < batch; ++i) {
      launch(slot, g_stream);
      slot = (slot + 1) % slots;
    }
    PROBE_CHECK(cudaEventRecord(b, g_stream));
    PROBE_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    PROBE_CHECK(cudaEventElapsedTime(&ms, a, b));
    us.push_back(1e3 * ms / batch);
  }
  PROBE_CHECK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return {median(us), *std::min_element(us.begin(), us.end()), -1};
}

const char* g_filter = nullptr;
bool wanted(const std::string& name) {
  return g_filter == nullptr || name.find(g_filter) != std::string::npos;
}
void print(const std::string& name, const row_result& r) {
  std::printf("%-58s %9.2f %9.2f %9.2f\n", name.c_str(), r.cold, r.min, r.hot);
  std::fflush(stdout);
}

//! Random bf16 values over many binades with signs and rare outliers (as bench/gpu).
std::vector<bf16> random_bf16(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(0.5f, 1.0f);
  std::uniform_int_distribution<int> ex(-12, 4), coin(0, 1), rare(0, 999);
  std::vector<bf16> v(n);
  for (auto& x : v) {
    float f = std::ldexp(u(g), ex(g)) * (coin(g) ? 1.0f : -1.0f);
    if (rare(g) == 0) f *= 64.0f;
    x = __float2bfloat16_rn(f);
  }
  return v;
}

struct shape {
  int rows, cols;
  std::string label() const { return std::to_string(rows) + "x" + std::to_string(cols); }
};

inline constexpr quant_options opt_given{.global = global_scale::given};
inline constexpr quant_options opt_row{.global = global_scale::per_row};
using nv_given = block_quantizer<nvfp4, opt_given>;
using nv_tensor = block_quantizer<nvfp4>;
using nv_row = block_quantizer<nvfp4, opt_row>;
using mx_default = block_quantizer<mxfp4>;

//! One set of buffers of a quantize / QDQ / amax call on a `[rows, cols]` bf16 input.
struct call_buffers {
  device_mem x, codes, scales, ts, amax, y, given;
  call_buffers(shape s, std::uint64_t seed)
      : x(std::size_t(s.rows) * s.cols * 2), codes(std::size_t(s.rows) * s.cols / 2),
        scales(std::size_t(s.rows + 128) * (s.cols / 16 + 4)), ts(std::size_t(s.rows) * 8),
        amax(64), y(std::size_t(s.rows) * s.cols * 2), given(8) {
    const auto h = random_bf16(std::size_t(s.rows) * s.cols, seed);
    PROBE_CHECK(cudaMemcpy(x.p, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    const tensor_scale gs = make_tensor_scale<nvfp4, quant_options{}>(2048.0f);
    PROBE_CHECK(cudaMemcpy(given.p, &gs, sizeof gs, cudaMemcpyHostToDevice));
  }
};

template <class Q, class Layout>
cudaError_t run_quantize(const call_buffers& b, shape s, cudaStream_t st) {
  kernels::scale_args args{};
  args.given = b.given.as<const tensor_scale>();
  args.given_count = 1;
  args.amax_workspace = b.amax.as<float>();
  const kernels::quantized_view out{b.codes.as<std::uint8_t>(), b.scales.as<std::uint8_t>(),
                                    b.ts.as<tensor_scale>()};
  return kernels::quantize<Q, Layout>(b.x.as<const bf16>(),
                                      kernels::tensor_shape{1, s.rows, s.cols}, out, args, st);
}

cudaError_t run_qdq(const call_buffers& b, shape s, cudaStream_t st) {
  kernels::scale_args args{};
  args.given = b.given.as<const tensor_scale>();
  args.given_count = 1;
  return kernels::qdq<nv_given>(b.x.as<const bf16>(), b.y.as<bf16>(),
                                kernels::tensor_shape{1, s.rows, s.cols}, args, nullptr, st);
}

struct amax_variant {
  const char* name;
  kd::amax_tuning knobs;
};
const amax_variant amax_variants[] = {{"memset", {0, 0, false, 256, 4}},
                                      {"pdl", {0, 0, true, 256, 4}},
                                      {"cluster8", {8, 32768, false, 256, 4}},
                                      {"cluster16", {16, 65536, false, 256, 4}},
                                      {"default", {}},
                                      {"memset_u2", {0, 0, false, 256, 2}},
                                      {"memset_u8", {0, 0, false, 256, 8}},
                                      {"memset_t1024", {0, 0, false, 1024, 4}},
                                      {"memset_t1024_u8", {0, 0, false, 1024, 8}}};

void set_amax(const amax_variant& v) { kd::amax_knobs() = v.knobs; }

} // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_filter = argv[1];
  int dev = 0;
  PROBE_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  PROBE_CHECK(cudaGetDeviceProperties(&prop, dev));
  g_l2 = static_cast<std::size_t>(prop.l2CacheSize);
  std::printf("# %s, %d SMs, L2 %zu MiB\n", prop.name, prop.multiProcessorCount, g_l2 >> 20);
  std::printf("%-58s %9s %9s %9s\n", "# row", "cold_us", "min_us", "hot_us");
  PROBE_CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  device_mem flush_buf(4 * g_l2);
  PROBE_CHECK(cudaMemset(flush_buf.p, 1, 4 * g_l2));
  g_flush = &flush_buf;
  device_mem sink(64);
  g_sink = sink.as<unsigned>();
  const kd::amax_tuning amax_default = kd::amax_knobs();
  const kd::small_call_tuning small_default = kd::small_knobs();

  // floor diagnostics
  {
    device_mem cold(std::size_t{64} << 20);
    PROBE_CHECK(cudaMemset(cold.p, 0, std::size_t{64} << 20));
    if (wanted("diag/empty"))
      print("diag/empty_kernel", time_flush([](cudaStream_t st) {
              empty_kernel<<<1, 32, 0, st>>>();
              return cudaGetLastError();
            }));
    if (wanted("diag/code"))
      print("diag/code_512_instr_1warp", time_flush([&](cudaStream_t st) {
              code_kernel<512><<<1, 32, 0, st>>>(g_sink, 7u);
              return cudaGetLastError();
            }));
    if (wanted("diag/code"))
      print("diag/code_2048_instr_1warp", time_flush([&](cudaStream_t st) {
              code_kernel<2048><<<1, 32, 0, st>>>(g_sink, 7u);
              return cudaGetLastError();
            }));
    if (wanted("diag/load"))
      print("diag/one_cold_load_1cta", time_flush([&](cudaStream_t st) {
              one_load_kernel<<<1, 256, 0, st>>>(cold.as<const uint4>(), g_sink);
              return cudaGetLastError();
            }));
    if (wanted("diag/load"))
      print("diag/two_dependent_cold_loads", time_flush([&](cudaStream_t st) {
              two_dep_loads_kernel<<<1, 1, 0, st>>>(cold.as<const unsigned>(), g_sink);
              return cudaGetLastError();
            }));
  }

  const shape smalls[] = {{1, 4096}, {16, 4096}, {64, 4096}};
  // tensor amax, each combine mode
  for (const shape s : smalls) {
    call_buffers b(s, 11);
    for (const amax_variant& v : amax_variants) {
      const std::string name = "amax/tensor/" + std::string(v.name) + "/" + s.label();
      if (!wanted(name)) continue;
      set_amax(v);
      print(name, time_flush([&](cudaStream_t st) {
              return kernels::tensor_amax(b.x.as<const bf16>(),
                                          kernels::tensor_shape{1, s.rows, s.cols},
                                          b.amax.as<float>(), st);
            }));
    }
    kd::amax_knobs() = amax_default;
  }
  // quantize / QDQ small calls under the small-call knobs: the defaults, all off (the kernels
  // before session 6), and each of chunked padding / half-block kernel off
  struct small_variant {
    const char* tag;
    kd::small_call_tuning knobs;
  };
  const small_variant small_variants[] = {{"new", {}},
                                          {"old", {false, false, false, false, false}},
                                          {"nochunk", {true, true, true, false, false}},
                                          {"nohalf", {true, true, false, true, true}}};
  for (const shape s : smalls) {
    call_buffers b(s, 12);
    for (const small_variant& sv : small_variants) {
      kd::small_knobs() = sv.knobs;
      const std::string tag = std::string(sv.tag) + "/";
      const bool is_new = std::string(sv.tag) == "new";
      const auto row = [&](const std::string& kernel, auto&& call) {
        const std::string name = kernel + "/" + tag + s.label();
        if (wanted(name)) print(name, time_flush(call));
      };
      row("quantize/mxfp4_swizzled",
          [&](cudaStream_t st) { return run_quantize<mx_default, swizzled_128x4>(b, s, st); });
      row("quantize/mxfp4_linear",
          [&](cudaStream_t st) { return run_quantize<mx_default, linear_scales>(b, s, st); });
      if (std::string(sv.tag) == "nohalf") continue; // same as new for NVFP4
      row("quantize/nvfp4_swizzled_given",
          [&](cudaStream_t st) { return run_quantize<nv_given, swizzled_128x4>(b, s, st); });
      row("quantize/nvfp4_swizzled_row",
          [&](cudaStream_t st) { return run_quantize<nv_row, swizzled_128x4>(b, s, st); });
      if (std::string(sv.tag) == "nochunk") continue; // no padding in the rows below
      row("quantize/nvfp4_linear_given",
          [&](cudaStream_t st) { return run_quantize<nv_given, linear_scales>(b, s, st); });
      row("qdq/nvfp4_given", [&](cudaStream_t st) { return run_qdq(b, s, st); });
      if (is_new) {
        for (const amax_variant& v : amax_variants) {
          set_amax(v);
          row("quantize/nvfp4_swizzled_tensor_" + std::string(v.name), [&](cudaStream_t st) {
            return run_quantize<nv_tensor, swizzled_128x4>(b, s, st);
          });
        }
        kd::amax_knobs() = amax_default;
      }
    }
    kd::small_knobs() = small_default;
  }
  // the amax criterion size, ring-timed (two 128 MiB slots > 3x the 60 MiB L2? 256 MiB: yes)
  {
    const shape s{8192, 8192};
    const int slots = 2;
    std::vector<device_mem*> xs;
    device_mem out(64);
    for (int i = 0; i < slots; ++i) {
      xs.push_back(new device_mem(std::size_t(s.rows) * s.cols * 2));
      PROBE_CHECK(cudaMemset(xs.back()->p, 0x3c, std::size_t(s.rows) * s.cols * 2));
    }
    for (const amax_variant& v : amax_variants) {
      if (v.knobs.cluster_ctas != 0 && v.knobs.cluster_words > 8192) continue; // not taken
      const std::string name = "amax/tensor/" + std::string(v.name) + "/" + s.label();
      if (!wanted(name)) continue;
      set_amax(v);
      for (int rep = 0; rep < 2; ++rep)
        print(name + (rep ? "/again" : ""), time_ring([&](int slot, cudaStream_t st) {
                return kernels::tensor_amax(xs[slot]->as<const bf16>(),
                                            kernels::tensor_shape{1, s.rows, s.cols},
                                            out.as<float>(), st);
              }, slots));
    }
    kd::amax_knobs() = amax_default;
    // the same kernel without zeroing (accumulating): what the memset launch costs
    if (wanted("amax/tensor/accumulate"))
      print("amax/tensor/accumulate_no_zeroing/" + s.label(),
            time_ring([&](int slot, cudaStream_t st) {
              return kernels::tensor_amax(xs[slot]->as<const bf16>(),
                                          kernels::tensor_shape{1, s.rows, s.cols},
                                          out.as<float>(), st, true);
            }, slots));
    for (auto* p : xs)
      delete p;
  }
  std::printf("# done\n");
  return 0;
}
