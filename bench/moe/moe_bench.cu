// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief MoE expert-layer benchmark (quads/moe/layer.cuh): the whole layer including routing at
//!        Qwen3-30B-A3B and DeepSeek-V3 expert shapes, T in {1, ..., 4096}, policies naive W4A4,
//!        QUADS (W4A4 + RAC 50 %) and W4A16, against the NVFP4 weight-streaming floor of the
//!        active experts (copy bandwidth measured at start-up in the same run). The bf16 / FP8
//!        grouped baselines come from bench/moe/torch_baseline.py, run in the same device call.
//!
//! Timing: the layer is captured once into a CUDA graph (as a decode engine runs it); each
//! iteration evicts the L2 (bench/gpu `flush_l2`, a read sweep of 4x its size), then one graph
//! launch is timed with CUDA events; the median is reported (`us`). Counters: `active` experts
//! of the routing (exact, from the host routing of the same logits), `floor_us` = active experts'
//! NVFP4 bytes (codes + scales of gate_up and down) / copy bandwidth, `x_floor` = us / floor_us,
//! `frac_copy` = floor_us / us. Weights are random codes and scale bytes (values do not change
//! the time). Rows `moe_route/<model>/T:<T>` time the routing alone (graph launch after an L2
//! flush); run back to back on one SM they keep the routing kernel in that SM's instruction
//! caches, which the layer's GEMMs evict inside a layer call, so the layer's `moe_stages` rows
//! are the ones to compare routing forms by. Exits 77 (Meson SKIP) without a usable GPU.

#include "../gpu/suites.hpp"
#include "../gpu/timing.cuh"

#include <quads/moe/layer.cuh>
#include <quads/moe/routing.hpp>

#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace qb = quads::bench;
namespace qm = quads::moe;

namespace {

struct model {
  const char* name;
  qm::layer_shape shape;
};

__global__ void fill_bytes(std::uint8_t* p, std::size_t n, std::uint64_t seed, int lo, int span) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    p[i] = static_cast<std::uint8_t>(span > 0 ? lo + static_cast<int>(h % span) : (h & 0xff));
  }
}

//! One model's weights (shared by every benchmark of that model) and calibration data.
struct model_data {
  qm::layer_shape s{};
  qb::device_buffer gu, gus, dn, dns, ts, gslot, gblocks, dslots;
  qb::device_buffer tgu, tgus, tdn, tdns; // the same stacks in expert_weight_form::tiled_pair
  cudaError_t init(const qm::layer_shape& shape) {
    s = shape;
    const std::size_t E = s.experts, H = s.hidden, I = s.intermediate;
    const std::size_t gu_n = E * 2 * I * H, dn_n = E * H * I;
    if (auto e = gu.alloc(gu_n / 2); e != cudaSuccess) return e;
    if (auto e = gus.alloc(gu_n / 16); e != cudaSuccess) return e;
    if (auto e = dn.alloc(dn_n / 2); e != cudaSuccess) return e;
    if (auto e = dns.alloc(dn_n / 16); e != cudaSuccess) return e;
    cudaStream_t st = qb::stream();
    const unsigned grid = 132 * 8;
    fill_bytes<<<grid, 256, 0, st>>>(gu.get<std::uint8_t>(), gu_n / 2, 1, 0, 0);
    fill_bytes<<<grid, 256, 0, st>>>(gus.get<std::uint8_t>(), gu_n / 16, 2, 0x30, 16);
    fill_bytes<<<grid, 256, 0, st>>>(dn.get<std::uint8_t>(), dn_n / 2, 3, 0, 0);
    fill_bytes<<<grid, 256, 0, st>>>(dns.get<std::uint8_t>(), dn_n / 16, 4, 0x30, 16);
    for (auto [buf, bytes] : {std::pair{&tgu, gu_n / 2}, std::pair{&tgus, gu_n / 16},
                              std::pair{&tdn, dn_n / 2}, std::pair{&tdns, dn_n / 16}})
      if (auto e = buf->alloc(bytes); e != cudaSuccess) return e;
    if (auto e = qm::make_tiled_pair_weights_async(
            gu.get<std::uint8_t>(), gus.get<std::uint8_t>(), tgu.get<std::uint8_t>(),
            tgus.get<std::uint8_t>(), static_cast<int>(2 * I), static_cast<int>(H),
            static_cast<int>(E), st);
        e != cudaSuccess)
      return e;
    if (auto e = qm::make_tiled_pair_weights_async(dn.get<std::uint8_t>(), dns.get<std::uint8_t>(),
                                                   tdn.get<std::uint8_t>(),
                                                   tdns.get<std::uint8_t>(), static_cast<int>(H),
                                                   static_cast<int>(I), static_cast<int>(E), st);
        e != cudaSuccess)
      return e;
    // tensor scales: [0] x, [1] h, [2, 2 + E) gate_up, [2 + E, 2 + 2E) down
    std::vector<quads::tensor_scale> t(2 + 2 * E, quads::tensor_scale{448.0f, 1.0f / 448.0f});
    if (auto e = ts.alloc(t.size() * sizeof(t[0])); e != cudaSuccess) return e;
    if (auto e = cudaMemcpy(ts.get(), t.data(), t.size() * sizeof(t[0]), cudaMemcpyHostToDevice);
        e != cudaSuccess)
      return e;
    // RAC 50 %: gate_up every other block; down every other block, offset by the expert
    const int nkb_h = static_cast<int>(H / 16), nkb_i = static_cast<int>(I / 16);
    std::vector<int> slot(static_cast<std::size_t>(nkb_h), -1), blocks;
    for (int b = 0; b < nkb_h; b += 2) {
      slot[static_cast<std::size_t>(b)] = static_cast<int>(blocks.size());
      blocks.push_back(b);
    }
    std::vector<int> ds(E * static_cast<std::size_t>(nkb_i), -1);
    for (std::size_t e = 0; e < E; ++e) {
      int j = 0;
      for (int b = static_cast<int>(e % 2); b < nkb_i; b += 2)
        ds[e * nkb_i + b] = j++;
    }
    for (auto [buf, v] :
         {std::pair{&gslot, &slot}, std::pair{&gblocks, &blocks}, std::pair{&dslots, &ds}}) {
      if (auto e = buf->alloc(v->size() * sizeof(int)); e != cudaSuccess) return e;
      if (auto e =
              cudaMemcpy(buf->get(), v->data(), v->size() * sizeof(int), cudaMemcpyHostToDevice);
          e != cudaSuccess)
        return e;
    }
    return cudaStreamSynchronize(st);
  }
  qm::layer_weights_view weights(bool tiled = false) const {
    qm::layer_weights_view w;
    w.gate_up = (tiled ? tgu : gu).get<std::uint8_t>();
    w.gate_up_scales = (tiled ? tgus : gus).get<std::uint8_t>();
    w.gate_up_ts = ts.get<quads::tensor_scale>() + 2;
    w.down = (tiled ? tdn : dn).get<std::uint8_t>();
    w.down_scales = (tiled ? tdns : dns).get<std::uint8_t>();
    w.form = tiled ? qm::expert_weight_form::tiled_pair : qm::expert_weight_form::row_major;
    w.down_ts = ts.get<quads::tensor_scale>() + 2 + s.experts;
    return w;
  }
  qm::layer_numerics_view numerics() const {
    qm::layer_numerics_view n;
    n.x_scale = ts.get<quads::tensor_scale>();
    n.h_scales = ts.get<quads::tensor_scale>() + 1;
    n.h_mode = quads::epilogue::scale_source::tensor;
    n.gate_up_sel.channels = s.hidden;
    n.gate_up_sel.selected_blocks = s.hidden / 32;
    n.gate_up_sel.slot = gslot.get<int>();
    n.gate_up_sel.blocks = gblocks.get<int>();
    n.down_slots = dslots.get<int>();
    return n;
  }
};

model_data& data_of(const model& m) {
  static std::unique_ptr<model_data> cur;
  static std::string cur_name;
  if (!cur || cur_name != m.name) {
    cur.reset(); // free the previous model's weights first
    cur = std::make_unique<model_data>();
    cur_name = m.name;
    if (const cudaError_t e = cur->init(m.shape); e != cudaSuccess)
      std::fprintf(stderr, "moe bench: weight init failed: %s\n", cudaGetErrorString(e));
  }
  return *cur;
}

//! Deterministic normal-ish logits (sum of 4 uniforms), the same on every run.
std::vector<float> make_logits(int T, int E, std::uint64_t seed) {
  std::vector<float> l(static_cast<std::size_t>(T) * E);
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& v : l) {
    float s = 0;
    for (int i = 0; i < 4; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      s += static_cast<float>(x >> 40) / static_cast<float>(1ull << 24);
    }
    v = 2.0f * (s - 2.0f);
  }
  return l;
}

int iterations_for(const qm::layer_shape& s, int T) {
  const double work = static_cast<double>(T) * s.top_k * s.hidden * s.intermediate;
  return work > 5e10 ? 5 : (work > 5e9 ? 10 : 40);
}

//! Times graph `exec` on `st`: one warm-up launch, then per benchmark iteration an L2 flush and
//! one launch between CUDA events (`us`), then `hot_reps` runs of `hot_n` back-to-back launches
//! without the flush (`hot`, per launch; L2 may hold the data); both sorted. False, with the
//! benchmark skipped, on a CUDA error.
bool time_graph(benchmark::State& state, cudaGraphExec_t exec, cudaStream_t st, int hot_reps,
                int hot_n, std::vector<double>& us, std::vector<double>& hot) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const bool ok = [&] {
    if (qb::failed(state, cudaGraphLaunch(exec, st), "warm-up launch") ||
        qb::failed(state, cudaStreamSynchronize(st), "warm-up"))
      return false;
    for (auto _ : state) {
      if (qb::failed(state, qb::flush_l2(st), "flush_l2")) return false;
      cudaEventRecord(a, st);
      if (qb::failed(state, cudaGraphLaunch(exec, st), "cudaGraphLaunch")) return false;
      cudaEventRecord(b, st);
      if (qb::failed(state, cudaEventSynchronize(b), "cudaEventSynchronize")) return false;
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      us.push_back(1e3 * ms);
      state.SetIterationTime(ms * 1e-3);
    }
    for (int r = 0; r < hot_reps; ++r) {
      cudaEventRecord(a, st);
      for (int i = 0; i < hot_n; ++i)
        cudaGraphLaunch(exec, st);
      cudaEventRecord(b, st);
      cudaEventSynchronize(b);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      hot.push_back(1e3 * ms / hot_n);
    }
    return !qb::failed(state, cudaGetLastError(), "hot launches");
  }();
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(us.begin(), us.end());
  std::sort(hot.begin(), hot.end());
  return ok;
}

template <qm::layer_policy P>
void run_layer_bench(benchmark::State& state, const model& m, int T, qm::layer_tuning tune = {},
                     bool breakdown = false, bool tiled = false) {
  model_data& d = data_of(m);
  const auto& s = m.shape;
  const qm::routing_config rc{s.experts, s.top_k, qm::scoring::softmax, true, 1.0f};
  const auto plan =
      qm::plan_layer<P>(T, s, rc, s.hidden / 2, s.intermediate / 2, qb::limits().sms, tune);
  if (!plan.valid) {
    state.SkipWithError("invalid plan");
    return;
  }
  const std::vector<float> logits = make_logits(T, s.experts, 7 + T);
  const auto routing = qm::route(logits, T, rc);
  int active = 0;
  for (int e = 0; e < s.experts; ++e)
    active += routing.offsets[e + 1] > routing.offsets[e];
  qb::device_buffer ws(plan.workspace_bytes), lg(logits.size() * 4),
      x(static_cast<std::size_t>(T) * s.hidden * 2),
      out(static_cast<std::size_t>(T) * s.hidden * 2);
  for (auto* b : {&ws, &lg, &x, &out})
    QUADS_BENCH_TRY(state, b->error());
  cudaStream_t st = qb::stream();
  QUADS_BENCH_TRY(state,
                  cudaMemcpy(lg.get(), logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
  QUADS_BENCH_TRY(state, qb::fill_random(x.get<__nv_bfloat16>(),
                                         static_cast<std::size_t>(T) * s.hidden, 11, st));
  qm::layer_io io{x.get<__nv_bfloat16>(), lg.get<float>(), out.get<__nv_bfloat16>(), nullptr,
                  nullptr};
  const auto w = d.weights(tiled);
  const auto num = d.numerics();
  // direct run first (argument errors surface here), then capture
  QUADS_BENCH_TRY(state, qm::forward(plan, w, num, io, ws.get(), st));
  QUADS_BENCH_TRY(state, cudaStreamSynchronize(st));
  state.counters["splits_gu"] = plan.gu.splits;
  state.counters["splits_dn"] = plan.dn.splits;
  if (breakdown) { // stage times of direct (stream) runs after an L2 flush
    cudaEvent_t ev[6];
    for (auto& e : ev)
      cudaEventCreate(&e);
    qm::layer_io pio = io;
    pio.stage_events = ev + 1;
    std::vector<std::vector<double>> t(6);
    for (auto _ : state) {
      QUADS_BENCH_TRY(state, qb::flush_l2(st));
      cudaEventRecord(ev[0], st);
      QUADS_BENCH_TRY(state, qm::forward(plan, w, num, pio, ws.get(), st));
      QUADS_BENCH_TRY(state, cudaEventSynchronize(ev[5]));
      float ms = 0;
      for (int i = 1; i < 6; ++i) {
        cudaEventElapsedTime(&ms, ev[i - 1], ev[i]);
        t[i].push_back(1e3 * ms);
      }
      cudaEventElapsedTime(&ms, ev[0], ev[5]);
      t[0].push_back(1e3 * ms);
      state.SetIterationTime(ms * 1e-3);
    }
    for (auto& e : ev)
      cudaEventDestroy(e);
    const char* names[6] = {"us_stream",  "us_route", "us_input",
                            "us_gate_up", "us_down",  "us_combine"};
    for (int i = 0; i < 6; ++i) {
      std::sort(t[i].begin(), t[i].end());
      state.counters[names[i]] = t[i][t[i].size() / 2];
    }
    state.counters["T"] = T;
    return;
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  QUADS_BENCH_TRY(state, cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  const cudaError_t fe = qm::forward(plan, w, num, io, ws.get(), st);
  QUADS_BENCH_TRY(state, cudaStreamEndCapture(st, &graph));
  QUADS_BENCH_TRY(state, fe);
  QUADS_BENCH_TRY(state, cudaGraphInstantiate(&exec, graph, 0));
  std::vector<double> us, hot;
  const bool timed = time_graph(state, exec, st, T <= 64 ? 5 : 1, T <= 64 ? 10 : 2, us, hot);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  if (!timed) return;
  const double med = us[us.size() / 2];
  const double expert_bytes =
      (2.0 * s.intermediate * s.hidden + 1.0 * s.hidden * s.intermediate) * (0.5 + 1.0 / 16.0);
  const double floor_us = active * expert_bytes / (qb::limits().copy_gbps * 1e3);
  state.counters["us"] = med;
  state.counters["us_min"] = us.front();
  state.counters["us_hot"] = hot[hot.size() / 2];
  state.counters["active"] = active;
  state.counters["floor_us"] = floor_us;
  state.counters["x_floor"] = med / floor_us;
  state.counters["frac_copy"] = floor_us / med;
  state.counters["T"] = T;
}

//! Routing alone (`moe_route/...`): one graph launch of `qm::route` after an L2 flush, CUDA
//! events, median; `us_hot`: back-to-back launches without the flush. Softmax top-k with
//! renormalisation at the model's E and k, the layer's logits.
void run_route_bench(benchmark::State& state, const model& m, int T) {
  const auto& s = m.shape;
  const qm::routing_config rc{s.experts, s.top_k, qm::scoring::softmax, true, 1.0f};
  const auto plan = qm::plan_routing(T, rc);
  const std::vector<float> logits = make_logits(T, s.experts, 7 + T);
  const std::size_t n = static_cast<std::size_t>(plan.pairs);
  qb::device_buffer lg(logits.size() * 4), ws(plan.workspace_bytes + 256), te(4 * n), tw(4 * n),
      off(4 * (static_cast<std::size_t>(s.experts) + 1)), rop(4 * n), por(4 * n), eor(4 * n),
      wor(4 * n);
  for (auto* b : {&lg, &ws, &te, &tw, &off, &rop, &por, &eor, &wor})
    QUADS_BENCH_TRY(state, b->error());
  QUADS_BENCH_TRY(state,
                  cudaMemcpy(lg.get(), logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
  const qm::routing_view v{te.get<int>(),  tw.get<float>(), off.get<int>(),  rop.get<int>(),
                           por.get<int>(), eor.get<int>(),  wor.get<float>()};
  cudaStream_t st = qb::stream();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  QUADS_BENCH_TRY(state, cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  const cudaError_t re = qm::route(plan, lg.get<float>(), v, ws.get(), st);
  QUADS_BENCH_TRY(state, cudaStreamEndCapture(st, &graph));
  QUADS_BENCH_TRY(state, re);
  QUADS_BENCH_TRY(state, cudaGraphInstantiate(&exec, graph, 0));
  std::vector<double> us, hot;
  const bool timed = time_graph(state, exec, st, 5, 20, us, hot);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  if (!timed) return;
  state.counters["us"] = us[us.size() / 2];
  state.counters["us_hot"] = hot[hot.size() / 2];
  state.counters["fused"] = plan.fused ? 1 : 0;
  state.counters["T"] = T;
}

void register_moe() {
  static const model models[] = {{"qwen3_30b_a3b", {128, 8, 2048, 768}},
                                 {"deepseek_v3", {256, 8, 7168, 2048}}};
  const char* only = std::getenv("QUADS_MOE_BENCH_MODEL"); // optional filter
  for (const model& m : models) {
    if (only != nullptr && std::string(only) != m.name) continue;
    for (int T : {1, 4, 16, 64, 256, 1024, 4096}) {
      const int it = iterations_for(m.shape, T);
      auto reg = [&](const char* pol, auto fn) {
        const std::string name =
            std::string("moe/") + m.name + "/" + pol + "/T:" + std::to_string(T);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { fn(st, m, T); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->Iterations(it);
      };
      reg("naive_w4a4", [](benchmark::State& st, const model& mm, int t) {
        run_layer_bench<qm::layer_policy::naive_w4a4>(st, mm, t);
      });
      reg("quads_rac50", [](benchmark::State& st, const model& mm, int t) {
        run_layer_bench<qm::layer_policy::quads_rac>(st, mm, t);
      });
      reg("naive_w4a4_tiled", [](benchmark::State& st, const model& mm, int t) {
        run_layer_bench<qm::layer_policy::naive_w4a4>(st, mm, t, {}, false, true);
      });
      reg("quads_rac50_tiled", [](benchmark::State& st, const model& mm, int t) {
        run_layer_bench<qm::layer_policy::quads_rac>(st, mm, t, {}, false, true);
      });
      reg("w4a16", [](benchmark::State& st, const model& mm, int t) {
        run_layer_bench<qm::layer_policy::w4a16>(st, mm, t);
      });
    }
    // routing alone (graph timing)
    for (int T : {1, 4, 8, 9, 16, 32, 64, 256})
      benchmark::RegisterBenchmark(
          (std::string("moe_route/") + m.name + "/T:" + std::to_string(T)).c_str(),
          [=](benchmark::State& st) { run_route_bench(st, m, T); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond)
          ->Iterations(40);
    // stage breakdown (stream launches, events between the stages)
    for (int T : {1, 16, 64, 256}) {
      auto reg = [&](const char* pol, auto fn) {
        const std::string name =
            std::string("moe_stages/") + m.name + "/" + pol + "/T:" + std::to_string(T);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { fn(st, m, T); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->Iterations(10);
      };
      reg("naive_w4a4", [](benchmark::State& st, const model& mm, int t) {
        run_layer_bench<qm::layer_policy::naive_w4a4>(st, mm, t, {}, true);
      });
      reg("quads_rac50", [](benchmark::State& st, const model& mm, int t) {
        run_layer_bench<qm::layer_policy::quads_rac>(st, mm, t, {}, true);
      });
      reg("quads_rac50_tiled", [](benchmark::State& st, const model& mm, int t) {
        run_layer_bench<qm::layer_policy::quads_rac>(st, mm, t, {}, true, true);
      });
      reg("w4a16", [](benchmark::State& st, const model& mm, int t) {
        run_layer_bench<qm::layer_policy::w4a16>(st, mm, t, {}, true);
      });
    }
    // split-K sweep of both GEMMs at decode sizes (graph timing)
    for (int T : {1, 4, 16, 64})
      for (int sp : {1, 2, 4, 8, 16}) {
        auto reg = [&](const char* pol, auto fn) {
          const std::string name = std::string("moe_splits/") + m.name + "/" + pol +
                                   "/T:" + std::to_string(T) + "/splits:" + std::to_string(sp);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [=](benchmark::State& st) { fn(st, m, T, sp); })
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond)
              ->Iterations(10);
        };
        reg("naive_w4a4", [](benchmark::State& st, const model& mm, int t, int spl) {
          run_layer_bench<qm::layer_policy::naive_w4a4>(st, mm, t, {{spl}, {spl}});
        });
        reg("quads_rac50", [](benchmark::State& st, const model& mm, int t, int spl) {
          run_layer_bench<qm::layer_policy::quads_rac>(st, mm, t, {{spl}, {spl}});
        });
        // the down GEMM alone split (gate_up planned as usual), tiled pair-coded weights
        reg("quads_rac50_tiled_down", [](benchmark::State& st, const model& mm, int t, int spl) {
          run_layer_bench<qm::layer_policy::quads_rac>(st, mm, t, {{}, {spl}}, false, true);
        });
        // the gate_up GEMM alone split (down planned as usual), tiled pair-coded weights
        reg("quads_rac50_tiled_gu", [](benchmark::State& st, const model& mm, int t, int spl) {
          run_layer_bench<qm::layer_policy::quads_rac>(st, mm, t, {{spl}, {}}, false, true);
        });
      }
  }
}

} // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("quads MoE bench: no CUDA device, skipping\n");
    return 77;
  }
  if (const cudaError_t e = qb::probe_kernel_image(); e != cudaSuccess) {
    std::printf("quads MoE bench: this build cannot run on the device (%s), skipping\n",
                cudaGetErrorString(e));
    return 77;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!qb::measure_device_limits()) {
    std::fprintf(stderr, "quads MoE bench: measuring copy bandwidth failed\n");
    return 1;
  }
  const auto& l = qb::limits();
  std::printf("quads MoE bench: %s, %d SMs, L2 %zu MiB; copy %.1f GB/s\n", l.name.c_str(), l.sms,
              l.l2_bytes >> 20, l.copy_gbps);
  benchmark::AddCustomContext("quads_device", l.name);
  benchmark::AddCustomContext("quads_copy_GBps", std::to_string(l.copy_gbps));
  register_moe();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
