// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief RAC GPU benchmarks: the fused quantize + residual kernel (`rac_quantize`) against the
//!        copy bandwidth measured at start-up in the same run, cold L2 (bench/gpu harness).
//!        Exits 77 (Meson SKIP) without a usable GPU.
//!
//! Bytes per call: x read once (rows * K * sizeof(T)), the augmented operand written once
//! (rows * K' / 2 code bytes + rows * K' / 16 scale bytes + tensor scales). Modes with an extra
//! pass (per-tensor amax, `own` residual amax) are charged the same bytes, so their fraction shows
//! the cost of that pass. The plain quantize kernel of include/quads/kernels (no residual) and a
//! cudaMemcpyAsync of the same bytes run in the same binary for comparison.

#include "../gpu/suites.hpp"
#include "../gpu/timing.cuh"

#include <quads/compensation/compensation.hpp>
#include <quads/compensation/rac.cuh>
#include <quads/kernels/kernels.cuh>

#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

namespace qb = quads::bench;
namespace qc = quads::compensation;
namespace qk = quads::compensation::kernels;

namespace {

using nv_given = quads::block_quantizer<quads::nvfp4,
                                        quads::quant_options{.global = quads::global_scale::given}>;
using nv_tensor = quads::block_quantizer<quads::nvfp4>;

struct shape {
  int rows;
  int K;
};

//! Device copies of a selection's tables.
struct tables {
  qb::device_buffer order, slot, blocks;
  qk::device_selection view;
  cudaError_t err = cudaSuccess;
  explicit tables(const qc::channel_selection& sel) {
    const auto t = qk::make_selection_tables(sel);
    auto up = [&](qb::device_buffer& b, const std::vector<int>& v) -> const int* {
      if (v.empty()) return nullptr;
      b = qb::device_buffer(v.size() * sizeof(int));
      if (b.error() != cudaSuccess)
        err = b.error();
      else if (const cudaError_t e =
                   cudaMemcpy(b.get(), v.data(), v.size() * sizeof(int), cudaMemcpyHostToDevice);
               e != cudaSuccess)
        err = e;
      return b.get<const int>();
    };
    view = {sel.channels, sel.selected_blocks(), up(order, t.order), up(slot, t.slot),
            up(blocks, t.blocks)};
  }
};

//! A selection of `ratio` of K's blocks chosen at random (the kernel's speed does not depend on
//! which blocks; statistics are not needed).
qc::channel_selection selection_for(int K, double ratio, qc::permutation p) {
  qc::channel_statistics st(K);
  return qc::select_channels(qc::random_channels{2026}, st, ratio, p);
}

template <class Quantizer, class T, int MinBlocks = 0>
void register_rac(const std::string& label, shape s, double ratio, qc::permutation perm,
                  qc::residual_scale rs) {
  const auto sel = selection_for(s.K, ratio, perm);
  const int Kp = sel.augmented_channels();
  const std::size_t in_bytes = static_cast<std::size_t>(s.rows) * s.K * sizeof(T);
  const std::size_t data_bytes = static_cast<std::size_t>(s.rows) * Kp / 2;
  const std::size_t scale_bytes = static_cast<std::size_t>(s.rows) * (Kp / 16);
  const double bytes =
      static_cast<double>(in_bytes + data_bytes + scale_bytes + 2 * sizeof(quads::tensor_scale));
  const auto [policy, slots] = qb::policy_for(static_cast<std::size_t>(bytes));
  char pct[16];
  std::snprintf(pct, sizeof pct, "%g", 100.0 * ratio);
  const std::string name =
      "rac/" + label + "/" + std::to_string(s.rows) + "x" + std::to_string(s.K) + "/r" + pct;
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    tables tab(sel);
    QUADS_BENCH_TRY(state, tab.err);
    std::vector<qb::device_buffer> x, data, scales;
    qb::device_buffer ts(4 * sizeof(quads::tensor_scale)), given(sizeof(quads::tensor_scale)),
        ws(qk::rac_workspace_floats(s.rows) * sizeof(float));
    const quads::tensor_scale g = quads::make_tensor_scale<quads::nvfp4>(64.0f * 16.0f);
    QUADS_BENCH_TRY(state, cudaMemcpy(given.get(), &g, sizeof g, cudaMemcpyHostToDevice));
    for (int i = 0; i < slots; ++i) {
      x.emplace_back(in_bytes);
      data.emplace_back(data_bytes);
      scales.emplace_back(scale_bytes);
      QUADS_BENCH_TRY(state, x.back().error());
      QUADS_BENCH_TRY(state, data.back().error());
      QUADS_BENCH_TRY(state, scales.back().error());
      QUADS_BENCH_TRY(
          state, qb::fill_random(x.back().get<T>(), in_bytes / sizeof(T), 11 + i, qb::stream()));
      QUADS_BENCH_TRY(state, cudaMemsetAsync(data.back().get(), 0xa5, data_bytes, qb::stream()));
    }
    auto* tsp = ts.get<quads::tensor_scale>();
    const qk::rac_args args{rs, given.get<const quads::tensor_scale>(), ws.get<float>(), 0};
    const bool ok = qb::measure(state, policy, slots, bytes, [&](int slot, cudaStream_t st) {
      return qk::rac_quantize<Quantizer, quads::linear_scales, T, MinBlocks>(
          x[slot].get<const T>(), s.rows, tab.view,
          qk::rac_view{data[slot].get<std::uint8_t>(), scales[slot].get<std::uint8_t>(), tsp,
                       tsp + 1},
          args, st);
    });
    if (!ok) return;
    state.counters["ratio"] = ratio;
    state.counters["K_aug"] = Kp;
    state.SetLabel(std::string("perm=") + qc::to_string(perm) + " residual=" + qc::to_string(rs));
  });
  qb::configure(b, policy);
}

//! The plain quantize kernel (include/quads/kernels, no residual) on the same shape.
void register_plain_quantize(shape s) {
  const std::size_t in_bytes = static_cast<std::size_t>(s.rows) * s.K * 2;
  const std::size_t out_bytes =
      static_cast<std::size_t>(s.rows) * s.K / 2 + static_cast<std::size_t>(s.rows) * s.K / 16;
  const double bytes = static_cast<double>(in_bytes + out_bytes);
  const auto [policy, slots] = qb::policy_for(static_cast<std::size_t>(bytes));
  const std::string name =
      "rac/kernels_quantize_linear_given/" + std::to_string(s.rows) + "x" + std::to_string(s.K);
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    std::vector<qb::device_buffer> x, data, scales;
    qb::device_buffer ts(sizeof(quads::tensor_scale)), given(sizeof(quads::tensor_scale));
    const quads::tensor_scale g = quads::make_tensor_scale<quads::nvfp4>(64.0f * 16.0f);
    QUADS_BENCH_TRY(state, cudaMemcpy(given.get(), &g, sizeof g, cudaMemcpyHostToDevice));
    for (int i = 0; i < slots; ++i) {
      x.emplace_back(in_bytes);
      data.emplace_back(static_cast<std::size_t>(s.rows) * s.K / 2);
      scales.emplace_back(static_cast<std::size_t>(s.rows) * s.K / 16);
      QUADS_BENCH_TRY(state, x.back().error());
      QUADS_BENCH_TRY(state, qb::fill_random(x.back().get<__nv_bfloat16>(), in_bytes / 2, 11 + i,
                                             qb::stream()));
    }
    const quads::kernels::scale_args args{given.get<const quads::tensor_scale>(), 1, nullptr, 0};
    qb::measure(state, policy, slots, bytes, [&](int slot, cudaStream_t st) {
      return quads::kernels::quantize<nv_given>(
          x[slot].get<const __nv_bfloat16>(), quads::kernels::tensor_shape{1, s.rows, s.K, 0, 0},
          quads::kernels::quantized_view{data[slot].get<std::uint8_t>(),
                                         scales[slot].get<std::uint8_t>(),
                                         ts.get<quads::tensor_scale>()},
          args, st);
    });
  });
  qb::configure(b, policy);
}

//! cudaMemcpyAsync moving the same bytes as the 50 % RAC call (read + write = 2 x the copy).
void register_copy(shape s, double ratio) {
  const int Kp = s.K + qc::selected_count(ratio, s.K);
  const double bytes = static_cast<double>(s.rows) * s.K * 2 +
                       static_cast<double>(s.rows) * Kp / 2 +
                       static_cast<double>(s.rows) * (Kp / 16);
  const std::size_t half = static_cast<std::size_t>(bytes / 2) / 16 * 16;
  const auto [policy, slots] = qb::policy_for(static_cast<std::size_t>(bytes));
  const std::string name =
      "rac/copy_same_bytes/" + std::to_string(s.rows) + "x" + std::to_string(s.K);
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    std::vector<qb::device_buffer> in, out;
    for (int i = 0; i < slots; ++i) {
      in.emplace_back(half);
      out.emplace_back(half);
      QUADS_BENCH_TRY(state, in.back().error());
      QUADS_BENCH_TRY(state, out.back().error());
    }
    qb::measure(state, policy, slots, 2.0 * half, [&](int slot, cudaStream_t st) {
      return cudaMemcpyAsync(out[slot].get(), in[slot].get(), half, cudaMemcpyDeviceToDevice, st);
    });
  });
  qb::configure(b, policy);
}

//! Calibration statistics of one batch (amax pass + partial sums + combine).
void register_statistics(shape s) {
  const double bytes = static_cast<double>(s.rows) * s.K * 2;
  const auto [policy, slots] = qb::policy_for(static_cast<std::size_t>(bytes));
  const std::string name =
      "rac/statistics_per_tensor/" + std::to_string(s.rows) + "x" + std::to_string(s.K);
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    std::vector<qb::device_buffer> x;
    for (int i = 0; i < slots; ++i) {
      x.emplace_back(static_cast<std::size_t>(bytes));
      QUADS_BENCH_TRY(state, x.back().error());
      QUADS_BENCH_TRY(state,
                      qb::fill_random(x.back().get<__nv_bfloat16>(),
                                      static_cast<std::size_t>(bytes) / 2, 3 + i, qb::stream()));
    }
    qb::device_buffer se(sizeof(double) * s.K), ma(sizeof(double) * s.K), tok(sizeof(double)),
        ws(qk::statistics_workspace_floats(s.rows, s.K) * sizeof(float));
    QUADS_BENCH_TRY(state, cudaMemset(se.get(), 0, se.size()));
    QUADS_BENCH_TRY(state, cudaMemset(ma.get(), 0, ma.size()));
    QUADS_BENCH_TRY(state, cudaMemset(tok.get(), 0, tok.size()));
    const qk::device_statistics ds{s.K, se.get<double>(), ma.get<double>(), tok.get<double>()};
    qb::measure(state, policy, slots, bytes, [&](int slot, cudaStream_t st) {
      return qk::accumulate_statistics<nv_tensor>(x[slot].get<const __nv_bfloat16>(), s.rows, ds,
                                                  ws.get<float>(), nullptr, st);
    });
  });
  qb::configure(b, policy);
}

void register_rac_suite() {
  using P = qc::permutation;
  using R = qc::residual_scale;
  const shape big{8192, 4096}; // 64 MiB of bf16 input, thousands of CTAs on 132 SMs
  // The target: given x scale, shared residual scale, no permutation, 50 %.
  for (double ratio : {0.0, 0.125, 0.25, 0.5, 0.75, 1.0})
    register_rac<nv_given, __nv_bfloat16>("given_shared_none", big, ratio, P::none, R::shared);
  // Register-budget variants of the column kernel (resident CTAs per SM asked of ptxas).
  register_rac<nv_given, __nv_bfloat16, 2>("given_shared_none_mb2", big, 0.5, P::none, R::shared);
  register_rac<nv_given, __nv_bfloat16, 4>("given_shared_none_mb4", big, 0.5, P::none, R::shared);
  register_rac<nv_given, __nv_bfloat16>("given_shared_none", shape{16384, 8192}, 0.5, P::none,
                                        R::shared);
  register_rac<nv_given, __nv_bfloat16>("given_shared_none", shape{4096, 4096}, 0.5, P::none,
                                        R::shared);
  register_rac<nv_given, __nv_bfloat16>("given_shared_selected_to_end", big, 0.5,
                                        P::selected_to_end, R::shared);
  register_rac<nv_given, __nv_bfloat16>("given_own_none", big, 0.5, P::none, R::own);
  register_rac<nv_tensor, __nv_bfloat16>("tensor_shared_none", big, 0.5, P::none, R::shared);
  register_rac<nv_given, float>("given_shared_none_fp32in", big, 0.5, P::none, R::shared);
  // Decode-sized calls (isolated, flushed L2; launch-bound).
  for (int rows : {16, 64, 256})
    register_rac<nv_given, __nv_bfloat16>("given_shared_none", shape{rows, 4096}, 0.5, P::none,
                                          R::shared);
  register_plain_quantize(big);
  register_copy(big, 0.5);
  register_statistics(big);
}

} // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("quads RAC bench: no CUDA device, skipping\n");
    return 77;
  }
  if (const cudaError_t e = qb::probe_kernel_image(); e != cudaSuccess) {
    std::printf("quads RAC bench: this build cannot run on the device (%s), skipping\n",
                cudaGetErrorString(e));
    return 77;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!qb::measure_device_limits()) {
    std::fprintf(stderr, "quads RAC bench: measuring copy bandwidth failed\n");
    return 1;
  }
  const auto& l = qb::limits();
  std::printf("quads RAC bench: %s, %d SMs, L2 %zu MiB; copy %.1f GB/s (memcpy %.1f, kernel %.1f), "
              "read %.1f GB/s\n",
              l.name.c_str(), l.sms, l.l2_bytes >> 20, l.copy_gbps, l.memcpy_gbps,
              l.copy_kernel_gbps, l.read_gbps);
  benchmark::AddCustomContext("quads_device", l.name);
  benchmark::AddCustomContext("quads_copy_GBps", std::to_string(l.copy_gbps));
  benchmark::AddCustomContext("quads_read_GBps", std::to_string(l.read_gbps));
  register_rac_suite();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
