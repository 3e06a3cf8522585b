// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Decode GEMM benchmarks (quads/gemm/decode.cuh): emulated W4A4 NVFP4, W4A16 and
//!        W4A4 + RAC (b) at 50 % of channels, for the decode shapes of issue 6, with the cuBLAS
//!        bf16 / cuBLASLt FP8 baselines and the copy bandwidth of bench/gpu in the same binary and
//!        run, cold L2 (bench/gpu harness). Exits 77 (Meson SKIP) without a usable GPU.
//!
//! Bytes per call (the `GBps` / `frac_copy` counters): the weight codes and scales, the
//! activation operand, the bf16 output, once each: the bytes a decode GEMM cannot avoid. The
//! split-K workspace traffic, if any, is *not* counted, so it shows up as a lower fraction.
//! Grouped case (`gemm/grouped/...`): Qwen3-30B-A3B gate_up (E = 128, N = 1536, K = 2048) with
//! 8 active experts (T = 1, top-8: one row each) and 126 active experts (T = 16: 128 rows); bytes
//! = the active experts' weights + activations + output.

#include "../gpu/suites.hpp"
#include "../gpu/timing.cuh"
#include "gemm_baselines.hpp"

#include <quads/gemm/decode.cuh>
#include <quads/gemm/grouped.cuh>

#include <quads/compensation/residual.hpp>
#include <quads/epilogue/epilogue.hpp>

#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace qb = quads::bench;
namespace qe = quads::epilogue;
namespace qg = quads::gemm;

namespace {

using epi = qe::chain<qe::scale_alpha, qe::store<__nv_bfloat16>>;
using epi_own = qe::chain<qe::scale_alpha, qe::rac_residual, qe::store<__nv_bfloat16>>;

enum class operand {
  w4a4, w4a16, rac_shared, rac_own, w4a4_fp16, w4a4_pair, rac_pair_shared, rac_pair_own,
  w4a4_tiled, w4a4_tiled_pair, rac_tiled_pair_shared
};

//! Pair-coded NVFP4 weights (fp16 lanes): the decode fast path.
using pair_nvfp4 = qg::pair_coded<quads::nvfp4>;
//! Chunk-tiled weights (gemm/chunk_tiling.hpp), plain (bf16 lanes) and pair-coded (fp16 lanes).
using tiled_nvfp4 = qg::chunk_tiled<quads::nvfp4>;
using tiled_pair_nvfp4 = qg::chunk_tiled<pair_nvfp4>;

const char* name_of(operand o) {
  switch (o) {
  case operand::w4a4: return "w4a4_nvfp4";
  case operand::w4a16: return "w4a16_bf16";
  case operand::rac_shared: return "w4a4_rac50_shared";
  case operand::rac_own: return "w4a4_rac50_own";
  case operand::w4a4_fp16: return "w4a4_nvfp4_fp16";
  case operand::w4a4_pair: return "w4a4_pair";
  case operand::rac_pair_shared: return "w4a4_pair_rac50_shared";
  case operand::rac_pair_own: return "w4a4_pair_rac50_own";
  case operand::w4a4_tiled: return "w4a4_tiled";
  case operand::w4a4_tiled_pair: return "w4a4_tiled_pair";
  case operand::rac_tiled_pair_shared: return "w4a4_tiled_pair_rac50_shared";
  }
  return "?";
}

//! RAC selection of the bench operands: every other block (each 128-deep chunk holds selected
//! blocks), or the last half of K's blocks (the layout `permutation::selected_to_end` gives: half
//! of the chunks hold none; the residual-buffer loop multiplies their zero residuals all the same).
enum class selection { every_other, tail };

void register_decode(operand op, int M, int N, int K, qg::reduction mode, const char* tag = "",
                     int splits = 0, selection sel = selection::every_other) {
  const bool rac = op == operand::rac_shared || op == operand::rac_own ||
                   op == operand::rac_pair_shared || op == operand::rac_pair_own ||
                   op == operand::rac_tiled_pair_shared;
  const int selected = rac ? K / 2 : 0;
  const int Kp = K + selected;
  const std::size_t w_bytes = static_cast<std::size_t>(N) * K / 2 + static_cast<std::size_t>(N) * K / 16;
  const std::size_t a_bytes = op == operand::w4a16 ? static_cast<std::size_t>(M) * K * 2
                                                   : static_cast<std::size_t>(M) * Kp / 2 +
                                                         static_cast<std::size_t>(M) * Kp / 16;
  const std::size_t y_bytes = static_cast<std::size_t>(M) * N * 2;
  const double bytes = static_cast<double>(w_bytes + a_bytes + y_bytes);
  const auto [policy, slots] = qb::policy_for(w_bytes);
  const std::string name = std::string("gemm/decode/") + name_of(op) + "/M" + std::to_string(M) +
                           "_W" + std::to_string(N) + "x" + std::to_string(K) +
                           (mode == qg::reduction::atomic ? "/atomic" : "/deterministic") + tag;
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    const bool own = op == operand::rac_own || op == operand::rac_pair_own;
    const auto plan = qg::plan_decode(M, N, K, own, {splits, mode}, qb::limits().sms);
    std::vector<qb::device_buffer> wd, wsc;
    for (int i = 0; i < slots; ++i) {
      wd.emplace_back(static_cast<std::size_t>(N) * K / 2);
      wsc.emplace_back(static_cast<std::size_t>(N) * K / 16);
      QUADS_BENCH_TRY(state, wd.back().error());
      QUADS_BENCH_TRY(state, wsc.back().error());
      QUADS_BENCH_TRY(state, cudaMemset(wd.back().get(), 0x5a + i, wd.back().size()));
      QUADS_BENCH_TRY(state, cudaMemset(wsc.back().get(), 0x38, wsc.back().size()));  // UE4M3 1.0
    }
    qb::device_buffer ad(static_cast<std::size_t>(M) * Kp * 2), asc(static_cast<std::size_t>(M) * Kp / 16 + 16),
        slot(sizeof(int) * static_cast<std::size_t>(K / 16)), ts(2 * sizeof(quads::tensor_scale)),
        y(y_bytes), ws(plan.workspace_bytes);
    QUADS_BENCH_TRY(state, cudaMemset(ad.get(), 0x21, ad.size()));
    QUADS_BENCH_TRY(state, cudaMemset(asc.get(), 0x38, asc.size()));
    std::vector<int> slots_h(static_cast<std::size_t>(K / 16), -1);
    const bool tail = sel == selection::tail;
    for (int kb = tail ? K / 32 : 0, j = 0; kb < K / 16; kb += tail ? 1 : 2)
      slots_h[static_cast<std::size_t>(kb)] = j++;
    QUADS_BENCH_TRY(state, cudaMemcpy(slot.get(), slots_h.data(), slot.size(), cudaMemcpyHostToDevice));
    const quads::tensor_scale one[2] = {{1.0f, 1.0f}, {1.0f, 1.0f}};
    QUADS_BENCH_TRY(state, cudaMemcpy(ts.get(), one, sizeof one, cudaMemcpyHostToDevice));
    const auto* tsp = ts.get<const quads::tensor_scale>();
    const qe::alpha_source alpha{.a = tsp, .a_mode = qe::scale_source::tensor, .w = tsp + 1,
                                 .w_mode = qe::scale_source::tensor};
    const bool ok = qb::measure(state, policy, slots, bytes, [&](int s, cudaStream_t st) {
      const cudaError_t e = [&]() -> cudaError_t {
      const qg::fp4_weights<quads::nvfp4> w{wd[s].get<const std::uint8_t>(), wsc[s].get<const std::uint8_t>()};
      const qg::fp4_weights<pair_nvfp4> wp{w.data, w.scales};  // any bytes are valid coded words
      const qg::fp4_activations<quads::nvfp4> a4{ad.get<const std::uint8_t>(), asc.get<const std::uint8_t>()};
      const auto rac_act = [&](quads::compensation::residual_scale r) {
        return qg::rac_activations<quads::nvfp4>{ad.get<const std::uint8_t>(), asc.get<const std::uint8_t>(),
                                                 slot.get<const int>(), selected, r};
      };
      const epi::arguments ea{alpha, {y.get<__nv_bfloat16>(), N}};
      const epi_own::arguments eo{alpha, alpha, {y.get<__nv_bfloat16>(), N}};
      switch (op) {
      case operand::w4a4_fp16:
        return qg::decode_gemm<qg::fp16_lane, epi, quads::nvfp4, qg::fp4_activations<quads::nvfp4>>(
            plan, w, a4, ea, ws.get(), st);
      case operand::w4a4_pair:
        return qg::decode_gemm<qg::fp16_lane, epi, pair_nvfp4, qg::fp4_activations<quads::nvfp4>>(
            plan, wp, a4, ea, ws.get(), st);
      case operand::rac_pair_shared:
        return qg::decode_gemm<qg::fp16_lane, epi>(plan, wp, rac_act(quads::compensation::residual_scale::shared),
                                                   ea, ws.get(), st);
      case operand::rac_pair_own:
        return qg::decode_gemm<qg::fp16_lane, epi_own>(plan, wp, rac_act(quads::compensation::residual_scale::own),
                                                       eo, ws.get(), st);
      case operand::w4a4_tiled:  // timing only: any bytes are valid tiled weights
        return qg::decode_gemm<qg::bf16_lane, epi>(plan, qg::fp4_weights<tiled_nvfp4>{w.data, w.scales},
                                                   a4, ea, ws.get(), st);
      case operand::w4a4_tiled_pair:
        return qg::decode_gemm<qg::fp16_lane, epi>(plan, qg::fp4_weights<tiled_pair_nvfp4>{w.data, w.scales},
                                                   a4, ea, ws.get(), st);
      case operand::rac_tiled_pair_shared:
        return qg::decode_gemm<qg::fp16_lane, epi>(plan, qg::fp4_weights<tiled_pair_nvfp4>{w.data, w.scales},
                                                   rac_act(quads::compensation::residual_scale::shared),
                                                   ea, ws.get(), st);
      case operand::w4a4:
        return qg::decode_gemm<qg::bf16_lane, epi, quads::nvfp4, qg::fp4_activations<quads::nvfp4>>(
            plan, w, qg::fp4_activations<quads::nvfp4>{ad.get<const std::uint8_t>(), asc.get<const std::uint8_t>()},
            epi::arguments{alpha, {y.get<__nv_bfloat16>(), N}}, ws.get(), st);
      case operand::w4a16:
        return qg::decode_gemm<qg::bf16_lane, epi>(
            plan, w, qg::dense_activations<qg::bf16_lane>{ad.get<const __nv_bfloat16>()},
            epi::arguments{alpha, {y.get<__nv_bfloat16>(), N}}, ws.get(), st);
      case operand::rac_shared:
        return qg::decode_gemm<qg::bf16_lane, epi>(
            plan, w,
            qg::rac_activations<quads::nvfp4>{ad.get<const std::uint8_t>(), asc.get<const std::uint8_t>(),
                                              slot.get<const int>(), selected,
                                              quads::compensation::residual_scale::shared},
            epi::arguments{alpha, {y.get<__nv_bfloat16>(), N}}, ws.get(), st);
      default:
        return qg::decode_gemm<qg::bf16_lane, epi_own>(
            plan, w,
            qg::rac_activations<quads::nvfp4>{ad.get<const std::uint8_t>(), asc.get<const std::uint8_t>(),
                                              slot.get<const int>(), selected,
                                              quads::compensation::residual_scale::own},
            epi_own::arguments{alpha, alpha, {y.get<__nv_bfloat16>(), N}}, ws.get(), st);
      }
      }();
      if (e != cudaSuccess) qb::last_message() = quads::kernels::last_error_message();
      return e;
    });
    if (!ok) return;
    state.counters["splits"] = plan.splits;
    state.counters["TFLOPs"] = state.counters["us"] > 0
                                   ? 2.0 * M * N * static_cast<double>(K) / (state.counters["us"] * 1e6)
                                   : 0.0;
  });
  qb::configure(b, policy);
}

void register_grouped(int active, int rows) {
  constexpr int E = 128, N = 1536, K = 2048;
  const std::size_t w_expert = static_cast<std::size_t>(N) * K / 2, s_expert = static_cast<std::size_t>(N) * K / 16;
  const double bytes = static_cast<double>(active) * static_cast<double>(w_expert + s_expert) +
                       rows * (K / 2.0 + K / 16.0) + rows * N * 2.0;
  const auto [policy, slots] = qb::policy_for(static_cast<std::size_t>(bytes));
  const std::string name = "gemm/grouped/w4a4_nvfp4/E128_N1536_K2048/active" + std::to_string(active) +
                           "_rows" + std::to_string(rows);
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    // routing: `rows` rows over `active` experts spread over [0, E), one row each and the rest
    // on the first experts
    std::vector<int> per(E, 0);
    for (int i = 0; i < rows; ++i) per[static_cast<std::size_t>((i % active) * (E / active))] += 1;
    std::vector<int> offsets{0}, eor;
    for (int e = 0; e < E; ++e) {
      offsets.push_back(offsets.back() + per[static_cast<std::size_t>(e)]);
      for (int i = 0; i < per[static_cast<std::size_t>(e)]; ++i) eor.push_back(e);
    }
    const auto plan = qg::plan_grouped(rows, N, K, E, false, {}, qb::limits().sms);
    std::vector<qb::device_buffer> wd, wsc;
    for (int i = 0; i < slots; ++i) {
      wd.emplace_back(w_expert * E);
      wsc.emplace_back(s_expert * E);
      QUADS_BENCH_TRY(state, wd.back().error());
      QUADS_BENCH_TRY(state, wsc.back().error());
      QUADS_BENCH_TRY(state, cudaMemset(wd.back().get(), 0x5a + i, wd.back().size()));
      QUADS_BENCH_TRY(state, cudaMemset(wsc.back().get(), 0x38, wsc.back().size()));
    }
    qb::device_buffer ad(static_cast<std::size_t>(rows) * K / 2), asc(static_cast<std::size_t>(rows) * K / 16),
        off(sizeof(int) * offsets.size()), er(sizeof(int) * eor.size()),
        ts(sizeof(quads::tensor_scale) * (E + 1)), y(static_cast<std::size_t>(rows) * N * 2),
        ws(plan.workspace_bytes);
    QUADS_BENCH_TRY(state, cudaMemset(ad.get(), 0x21, ad.size()));
    QUADS_BENCH_TRY(state, cudaMemset(asc.get(), 0x38, asc.size()));
    QUADS_BENCH_TRY(state, cudaMemcpy(off.get(), offsets.data(), off.size(), cudaMemcpyHostToDevice));
    QUADS_BENCH_TRY(state, cudaMemcpy(er.get(), eor.data(), er.size(), cudaMemcpyHostToDevice));
    const std::vector<quads::tensor_scale> one(E + 1, quads::tensor_scale{1.0f, 1.0f});
    QUADS_BENCH_TRY(state, cudaMemcpy(ts.get(), one.data(), ts.size(), cudaMemcpyHostToDevice));
    const auto* tsp = ts.get<const quads::tensor_scale>();
    const qe::alpha_source alpha{.a = tsp + E, .a_mode = qe::scale_source::tensor, .w = tsp,
                                 .w_mode = qe::scale_source::expert, .expert_of_row = er.get<const int>()};
    const bool ok = qb::measure(state, policy, slots, bytes, [&](int s, cudaStream_t st) {
      const cudaError_t e = qg::grouped_gemm<qg::bf16_lane, epi>(
          plan, qg::fp4_expert_weights<quads::nvfp4>{wd[s].get<const std::uint8_t>(), wsc[s].get<const std::uint8_t>(), E},
          qg::fp4_activations<quads::nvfp4>{ad.get<const std::uint8_t>(), asc.get<const std::uint8_t>()},
          off.get<const int>(), epi::arguments{alpha, {y.get<__nv_bfloat16>(), N}}, ws.get(), st);
      if (e != cudaSuccess) qb::last_message() = quads::kernels::last_error_message();
      return e;
    });
    if (!ok) return;
    state.counters["splits"] = plan.splits;
    state.counters["ctas"] = plan.ctas;
  });
  qb::configure(b, policy);
}

const std::vector<std::pair<int, int>> decode_shapes = {{14336, 4096}, {4096, 14336}, {8192, 8192}};
const std::vector<int> decode_ms = {1, 4, 8, 16};

void register_gemm_suite() {
  for (const auto& [N, K] : decode_shapes)
    for (int M : decode_ms)
      for (operand op : {operand::w4a4, operand::w4a16, operand::rac_shared, operand::rac_own,
                         operand::w4a4_fp16, operand::w4a4_pair, operand::rac_pair_shared,
                         operand::rac_pair_own, operand::w4a4_tiled, operand::w4a4_tiled_pair,
                         operand::rac_tiled_pair_shared})
        register_decode(op, M, N, K, qg::reduction::deterministic);
  // explicit split-K on the fastest weight form, plain and RAC (the plan's choice is the default
  // above)
  for (const auto& [N, K] : decode_shapes)
    for (int M : {1, 16})
      for (operand op : {operand::w4a4_tiled_pair, operand::rac_tiled_pair_shared})
        for (int sp : {1, 2, 4, 8})
          register_decode(op, M, N, K, qg::reduction::deterministic,
                          sp == 1   ? "/splits1"
                          : sp == 2 ? "/splits2"
                          : sp == 4 ? "/splits4"
                                    : "/splits8",
                          sp);
  // RAC on a permuted axis (selected blocks at the end of K), against the rows above
  for (const auto& [N, K] : decode_shapes)
    for (int M : decode_ms)
      for (operand op : {operand::rac_shared, operand::rac_tiled_pair_shared})
        register_decode(op, M, N, K, qg::reduction::deterministic, "/sel:tail", 0,
                        selection::tail);
  register_grouped(8, 8);
  register_grouped(126, 128);
}

} // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("quads GEMM bench: no CUDA device, skipping\n");
    return 77;
  }
  if (const cudaError_t e = qb::probe_kernel_image(); e != cudaSuccess) {
    std::printf("quads GEMM bench: this build cannot run on the device (%s), skipping\n",
                cudaGetErrorString(e));
    return 77;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!qb::measure_device_limits()) {
    std::fprintf(stderr, "quads GEMM bench: measuring copy bandwidth failed\n");
    return 1;
  }
  const auto& l = qb::limits();
  std::printf("quads GEMM bench: %s, %d SMs, L2 %zu MiB; copy %.1f GB/s, read %.1f GB/s\n",
              l.name.c_str(), l.sms, l.l2_bytes >> 20, l.copy_gbps, l.read_gbps);
  benchmark::AddCustomContext("quads_device", l.name);
  benchmark::AddCustomContext("quads_copy_GBps", std::to_string(l.copy_gbps));
  quads::bench::gemm::register_decode_baselines(decode_ms, decode_shapes);
  register_gemm_suite();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
