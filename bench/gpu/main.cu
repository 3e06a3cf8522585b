// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GPU benchmark main: exits 77 (Meson SKIP) without a usable GPU, measures the device's
//!        copy and read bandwidth first, records them in the JSON context, then runs the suites.

#include "suites.hpp"
#include "timing.cuh"

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

namespace {

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

} // namespace

int main(int argc, char** argv) {
  // Listing needs no device: registration only depends on the shapes.
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--benchmark_list_tests", 0) == 0) {
      benchmark::Initialize(&argc, argv);
      quads::bench::register_baselines();
      quads::bench::register_kernels();
      quads::bench::register_gemm_baselines();
      benchmark::RunSpecifiedBenchmarks();
      benchmark::Shutdown();
      return 0;
    }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("quads bench: no CUDA device, skipping\n");
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::printf("quads bench: cannot query device 0, skipping\n");
    return 77;
  }
  // The binary holds code for the gpu_arch option's targets only (sm_90a by default).
  if (const cudaError_t e = quads::bench::probe_kernel_image(); e != cudaSuccess) {
    std::printf("quads bench: %s (sm_%d%d) cannot run this build's kernels (%s), skipping\n",
                prop.name, prop.major, prop.minor, cudaGetErrorString(e));
    return 77;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  if (!quads::bench::measure_device_limits()) {
    std::fprintf(stderr, "quads bench: measuring copy/read bandwidth failed: %s\n",
                 cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  const auto& l = quads::bench::limits();
  std::printf("quads bench: %s, %d SMs, L2 %zu MiB; copy %s GB/s (memcpy %s, kernel %s), read %s "
              "GB/s\n",
              l.name.c_str(), l.sms, l.l2_bytes >> 20, fmt(l.copy_gbps).c_str(),
              fmt(l.memcpy_gbps).c_str(), fmt(l.copy_kernel_gbps).c_str(),
              fmt(l.read_gbps).c_str());
  benchmark::AddCustomContext("quads_device", l.name);
  benchmark::AddCustomContext("quads_sms", std::to_string(l.sms));
  benchmark::AddCustomContext("quads_l2_bytes", std::to_string(l.l2_bytes));
  benchmark::AddCustomContext("quads_copy_GBps", fmt(l.copy_gbps));
  benchmark::AddCustomContext("quads_memcpy_GBps", fmt(l.memcpy_gbps));
  benchmark::AddCustomContext("quads_copy_kernel_GBps", fmt(l.copy_kernel_gbps));
  benchmark::AddCustomContext("quads_read_GBps", fmt(l.read_gbps));
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  benchmark::AddCustomContext("quads_cuda_runtime", std::to_string(runtime));
  benchmark::AddCustomContext("quads_cuda_driver", std::to_string(driver));

  quads::bench::register_baselines();
  quads::bench::register_kernels();
  quads::bench::register_gemm_baselines();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
