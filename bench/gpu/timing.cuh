// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GPU benchmark harness: CUDA-event timing with a cold L2, medians, bandwidth counters.
//!
//! Every GPU benchmark times its kernel through `measure()`:
//! - `cache::ring`: the inputs and outputs live in `slots` copies (together several times the
//!   L2), each timed batch launches once per slot in turn behind a spin kernel that lets the host
//!   queue the whole batch, so the events measure back-to-back GPU time with a cold L2;
//! - `cache::flush`: before each single launch a read-only sweep over 4x the L2 evicts the
//!   working set (clean lines only: a write flush would leave dirty lines that the timed kernel
//!   pays to write back), then one launch is timed by its own event pair. Small sizes use this.
//! The median over iterations is reported (`us`), with `GBps` (bytes read + written per call over
//! the median) and `frac_copy` (that over the copy bandwidth measured at start-up by main.cu).
//! `cache::flush` benchmarks also report `us_hot`: the per-call time of 20 back-to-back launches
//! on the same buffers (inputs L2-resident), the rate a stream of small launches sustains.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace quads::bench {

//! The physical limits measured once per run, before any benchmark (see main.cu).
struct device_limits {
  double copy_gbps = 0;        //!< max(cudaMemcpyAsync D2D, copy kernel), read + write bytes
  double memcpy_gbps = 0;      //!< cudaMemcpyAsync device-to-device alone
  double copy_kernel_gbps = 0; //!< 16-byte copy kernel alone (best of streaming / plain hints)
  double read_gbps = 0;        //!< read-only reduction
  int sms = 0;
  std::size_t l2_bytes = 0;
  std::string name;
};
inline device_limits& limits() {
  static device_limits l;
  return l;
}

//! The stream every benchmark launches on (non-blocking, created on first use).
cudaStream_t stream();

//! cudaSuccess if this build holds code the device can run (checked on a harness kernel).
cudaError_t probe_kernel_image();
//! Launches a kernel that spins for `ns` nanoseconds of GPU time (%globaltimer).
void spin(cudaStream_t s, long long ns);
//! Evicts the L2 with a read-only sweep over a buffer of 4x its size.
cudaError_t flush_l2(cudaStream_t s);
//! Fills `n` values of type T with reproducible pseudo-random data: signs, many binades (2^-12 ..
//! 2^4), one outlier in ~1000 (x 64), so the block scales vary as on real activations/weights.
template <class T>
cudaError_t fill_random(T* p, std::size_t n, std::uint64_t seed, cudaStream_t s);

//! Owns device memory; move-only.
class device_buffer {
public:
  device_buffer() = default;
  explicit device_buffer(std::size_t bytes) { err_ = alloc(bytes); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer(device_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)), err_(o.err_) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(err_, o.err_);
    return *this;
  }
  ~device_buffer() {
    if (p_) cudaFree(p_);
  }
  cudaError_t alloc(std::size_t bytes) {
    n_ = bytes;
    return cudaMalloc(&p_, bytes > 0 ? bytes : 1);
  }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }
  std::size_t size() const { return n_; }
  cudaError_t error() const { return err_; }

private:
  void* p_ = nullptr;
  std::size_t n_ = 0;
  cudaError_t err_ = cudaSuccess;
};

//! How the L2 is kept cold.
enum class cache { ring, flush };

//! Working sets at or above this size per call are timed with `cache::ring`, smaller ones with
//! `cache::flush` (a ring of small buffers would need thousands of slots to exceed the L2).
inline constexpr std::size_t ring_threshold_bytes = std::size_t{32} << 20;

//! Ring slots needed so `slots * bytes_per_slot >= 3 * L2`; at least 2, at most `max_slots`.
inline int ring_slots(std::size_t bytes_per_slot, int max_slots = 16) {
  const std::size_t want = 3 * std::max<std::size_t>(limits().l2_bytes, std::size_t{50} << 20);
  const std::size_t n = (want + bytes_per_slot - 1) / std::max<std::size_t>(bytes_per_slot, 1);
  return static_cast<int>(std::clamp<std::size_t>(n, 2, static_cast<std::size_t>(max_slots)));
}
//! The policy and slot count for a call that moves `bytes` through device memory.
inline std::pair<cache, int> policy_for(std::size_t bytes) {
  return bytes >= ring_threshold_bytes ? std::pair{cache::ring, ring_slots(bytes)}
                                       : std::pair{cache::flush, 1};
}

//! A launcher's own explanation of its last failure, added to the next error report.
inline std::string& last_message() {
  static std::string m;
  return m;
}

//! Reports a CUDA error on `state`; true if there was one.
inline bool failed(benchmark::State& state, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return false;
  std::string msg = std::string(what) + ": " + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ")";
  if (!last_message().empty()) msg += ": " + std::exchange(last_message(), std::string());
  state.SkipWithError(msg.c_str());
  return true;
}
//! Checks `expr` (a cudaError_t); on failure skips the benchmark and returns from the caller.
#define QUADS_BENCH_TRY(state, expr)                                                           \
  do {                                                                                          \
    if (::quads::bench::failed((state), (expr), #expr)) return;                                 \
  } while (0)

//! Adds the common counters for a per-call median of `us` microseconds moving `bytes`.
inline void report(benchmark::State& state, double us, double us_min, double bytes) {
  state.counters["us"] = us;
  state.counters["us_min"] = us_min;
  state.counters["bytes"] = bytes;
  const double gbps = us > 0 ? bytes / (us * 1e3) : 0.0;
  state.counters["GBps"] = gbps;
  state.counters["frac_copy"] = limits().copy_gbps > 0 ? gbps / limits().copy_gbps : 0.0;
  state.counters["frac_read"] = limits().read_gbps > 0 ? gbps / limits().read_gbps : 0.0;
}

//! Times `launch(slot, stream) -> cudaError_t` as the policy says and fills the counters.
//! `bytes` is what one call must read plus write (each input once, each output once).
//! Returns false (after SkipWithError) on any CUDA error.
template <class Launch>
bool measure(benchmark::State& state, cache policy, int slots, double bytes, Launch&& launch) {
  cudaStream_t s = stream();
  cudaEvent_t start = nullptr, stop = nullptr;
  auto cleanup = [&] {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  };
  if (failed(state, cudaEventCreate(&start), "cudaEventCreate") ||
      failed(state, cudaEventCreate(&stop), "cudaEventCreate")) {
    cleanup();
    return false;
  }
  slots = std::max(slots, 1);
  // Warm-up: every slot once (module load, first-touch of the buffers), then check.
  for (int i = 0; i < std::max(slots, 3); ++i)
    if (failed(state, launch(i % slots, s), "launch (warm-up)")) {
      cleanup();
      return false;
    }
  if (failed(state, cudaStreamSynchronize(s), "warm-up") ||
      failed(state, cudaGetLastError(), "warm-up")) {
    cleanup();
    return false;
  }
  // A ring batch visits each slot at least once and holds at least 8 launches.
  const int batch = policy == cache::ring ? slots * ((8 + slots - 1) / slots) : 1;
  std::vector<double> per_call_us;
  int slot = 0;
  bool ok = true;
  for (auto _ : state) {
    cudaError_t e = cudaSuccess;
    if (policy == cache::flush) {
      e = flush_l2(s); // also keeps the GPU busy while the host queues the timed launch
    } else {
      spin(s, 20'000 + 8'000LL * batch); // covers the host's time to queue the batch
      e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaEventRecord(start, s);
    for (int i = 0; i < batch && e == cudaSuccess; ++i) {
      e = launch(slot, s);
      slot = (slot + 1) % slots;
    }
    if (e == cudaSuccess) e = cudaEventRecord(stop, s);
    if (e == cudaSuccess) e = cudaEventSynchronize(stop);
    if (e == cudaSuccess) e = cudaGetLastError();
    float ms = 0;
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, start, stop);
    if (failed(state, e, "timed launch")) {
      ok = false;
      break;
    }
    const double us = 1e3 * ms / batch;
    per_call_us.push_back(us);
    state.SetIterationTime(us * 1e-6);
  }
  // Small sizes also get the back-to-back rate on the same (L2-resident) buffers: what a stream
  // of such launches sustains, e.g. an activation quantize right after the kernel producing it.
  double hot_us = -1;
  if (ok && policy == cache::flush && !per_call_us.empty()) {
    constexpr int hot_batch = 20;
    std::vector<double> hot;
    for (int r = 0; r < 15 && ok; ++r) {
      spin(s, 20'000 + 8'000LL * hot_batch);
      cudaError_t e = cudaEventRecord(start, s);
      for (int i = 0; i < hot_batch && e == cudaSuccess; ++i) e = launch(0, s);
      if (e == cudaSuccess) e = cudaEventRecord(stop, s);
      if (e == cudaSuccess) e = cudaEventSynchronize(stop);
      float ms = 0;
      if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, start, stop);
      if (failed(state, e, "hot launch")) ok = false;
      else hot.push_back(1e3 * ms / hot_batch);
    }
    if (!hot.empty()) {
      std::sort(hot.begin(), hot.end());
      hot_us = hot[hot.size() / 2];
    }
  }
  cleanup();
  if (!ok || per_call_us.empty()) return ok;
  std::sort(per_call_us.begin(), per_call_us.end());
  const std::size_t n = per_call_us.size();
  const double median =
      n % 2 ? per_call_us[n / 2] : 0.5 * (per_call_us[n / 2 - 1] + per_call_us[n / 2]);
  report(state, median, per_call_us.front(), bytes);
  state.counters["slots"] = slots;
  state.counters["cold_l2"] = policy == cache::ring ? 1.0 : 2.0; // 1 = ring, 2 = flush
  if (hot_us >= 0) state.counters["us_hot"] = hot_us;
  return true;
}

//! Iterations per benchmark: enough for a stable median, few enough to fit the device budget.
inline constexpr int iterations_flush = 200;
inline constexpr int iterations_ring = 25;

//! Registers with manual time and a fixed iteration count matched to the policy.
inline benchmark::internal::Benchmark* configure(benchmark::internal::Benchmark* b, cache policy) {
  return b->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(
      policy == cache::flush ? iterations_flush : iterations_ring);
}

} // namespace quads::bench
