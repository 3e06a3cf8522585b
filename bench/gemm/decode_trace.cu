// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Diagnostic (not a benchmark): where a streaming decode GEMM call spends its time.
//!        Builds the kernel with QUADS_DECODE_TRACE, so lane 0 of each warp stamps %globaltimer
//!        and clock64 at the phase boundaries (entry, activations staged, chunk loop done per
//!        warp, the two cluster barriers of the split-K reduction, epilogue done; inside the
//!        prologue, warp 0 also stamps the offsets scan of grouped calls, the ring's first issue,
//!        `pdl_wait` and the activation fill), runs one call per shape after an L2 sweep, and
//!        prints per-phase times over the CTAs.
//!
//! Usage: quads_decode_trace [--pair | --stages | --variants | --tiled | --rac | --rac-stages |
//!                            --grouped | --moe | --mma-rate]
//! `--mma-rate` measures the SM's `mma.sync.m16n8k16` (fp16 / bf16, fp32 accumulation) issue
//! rate with independent accumulators at 4-32 warps per SM: the tensor-pipe time a chunk's MMAs
//! need at least (the RAC residual doubles them at 16 tokens).
//! (exits 77 without a GPU). The numbers are of a single cold call (after an L2 sweep; with
//! `QUADS_TRACE_HOT=1` right after the same call instead; `QUADS_TRACE_TABLE=1`: grouped calls
//! read an m-tile table) with the stamps' own stores included; use quads_bench_gemm for timings. Grouped calls
//! whose CTAs stream several n-tiles ("CTAs ran" below the one-n-tile grid) report each CTA's
//! first n-tile: entry to its epilogue.
#define QUADS_DECODE_TRACE 1

#include <quads/gemm/decode.cuh>
#include <quads/gemm/grouped.cuh>
#include <quads/moe/layer.cuh> // gate_up_fp4_epilogue_gpu, the chain moe::forward runs

#include <quads/epilogue/epilogue.hpp>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

namespace qe = quads::epilogue;
namespace qg = quads::gemm;

namespace {

using epi = qe::chain<qe::scale_alpha, qe::store<__nv_bfloat16>>;

#define CHECK(x)                                                                       \
  do {                                                                                 \
    const cudaError_t e_ = (x);                                                        \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                  \
                   cudaGetErrorString(e_));                                            \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

__global__ void sweep(const uint4* p, std::size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    acc ^= __ldcg(p + i).x;
  if (acc == 0x12345678u) *sink = acc;
}

//! `QUADS_TRACE_HOT=1` (read once, through the library's diagnostic-override helper).
bool trace_hot() {
  return qg::detail::env_override(
      "QUADS_TRACE_HOT", [](const char* v) { return v != nullptr && std::strcmp(v, "1") == 0; });
}

//! `QUADS_TRACE_TABLE=1`: grouped calls read an m-tile table (`write_m_tile_table`) instead of
//! scanning the offsets in every CTA.
bool trace_table() {
  return qg::detail::env_override(
      "QUADS_TRACE_TABLE", [](const char* v) { return v != nullptr && std::strcmp(v, "1") == 0; });
}

double pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<std::size_t>(q * (v.size() - 1))];
}
double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

//! Times `launch` (cold, after an L2 sweep; and 10 hot calls), then runs it once with the trace
//! buffer set for `ctas` CTAs and prints per-phase statistics over the CTAs that worked.
template <class Launch>
void trace_calls(Launch&& launch, int ctas, const uint4* flush, std::size_t flush_n, unsigned* sink,
                 const char* label) {
  constexpr std::size_t slots = qg::detail::decode_trace_slot_count;  // per CTA
  unsigned long long* buf;
  CHECK(cudaMalloc(&buf, sizeof(unsigned long long) * slots * ctas));
  unsigned long long* none = nullptr;
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  float ms_cold = 0, ms_hot = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const bool traced = rep == 3;
    CHECK(cudaMemcpyToSymbol(qg::detail::decode_trace_buffer, traced ? &buf : &none, sizeof buf));
    CHECK(cudaMemset(buf, 0, sizeof(unsigned long long) * slots * ctas));
    // QUADS_TRACE_HOT=1: the traced call follows the same call without the L2 sweep (operands
    // and code L2-resident where they fit), to tell memory latency from the rest of a phase
    if (!(traced && trace_hot())) sweep<<<264, 512>>>(flush, flush_n, sink);
    CHECK(cudaEventRecord(e0));
    CHECK(launch());
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    if (rep == 2) CHECK(cudaEventElapsedTime(&ms_cold, e0, e1));
  }
  CHECK(cudaMemcpyToSymbol(qg::detail::decode_trace_buffer, &none, sizeof buf));
  CHECK(cudaEventRecord(e0));
  for (int i = 0; i < 10; ++i)
    CHECK(launch());
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  CHECK(cudaEventElapsedTime(&ms_hot, e0, e1));
  std::vector<unsigned long long> h(slots * ctas);
  CHECK(cudaMemcpy(h.data(), buf, h.size() * 8, cudaMemcpyDeviceToHost));
  unsigned long long t0 = ~0ull, tend = 0;
  for (int c = 0; c < ctas; ++c) {
    if (h[slots * c + 12] == 0) continue; // a grouped m-tile slot without work
    t0 = std::min(t0, h[slots * c + 0]);
    tend = std::max(tend, h[slots * c + 12]);
  }
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  std::vector<double> entry, prologue, loop_mean, loop_max, loop_spread, bar1, bar2, epi_t, end, total;
  // warp 0's prologue steps (points 20-23; 20 only in grouped calls, 23 only where the first
  // fill ran): the m-tile (offsets + scan, or the m-tile table's entry with
  // QUADS_TRACE_TABLE=1), the ring's first issue, pdl_wait, the activation fill (loads
  // and stores), then the first ring wait and the staging barrier (point 1)
  std::vector<double> pro_offsets, pro_issue, pro_pdl, pro_fill, pro_wait;
  for (int c = 0; c < ctas; ++c) {
    if (h[slots * c + 12] == 0) continue;
    const unsigned long long* g = &h[slots * c];
    const unsigned long long* k = g + qg::detail::decode_trace_points;  // clock64 stamps
    auto cyc = [&](unsigned long long a, unsigned long long b) { return (double)(b - a) / (clock_khz * 1e-3); };
    entry.push_back((g[0] - t0) * 1e-3);
    end.push_back((g[12] - t0) * 1e-3);
    prologue.push_back(cyc(k[0], k[1]));
    if (k[21] != 0 && k[22] != 0 && k[23] != 0) {
      const unsigned long long after_offsets = k[20] != 0 ? k[20] : k[0];
      if (k[20] != 0) pro_offsets.push_back(cyc(k[0], k[20]));
      pro_issue.push_back(cyc(after_offsets, k[21]));
      pro_pdl.push_back(cyc(k[21], k[22]));
      pro_fill.push_back(cyc(k[22], k[23]));
      pro_wait.push_back(cyc(k[23], k[1]));
    }
    double lm = 0, lx = 0, ln = 1e30;
    int nw = 0;
    for (int w = 0; w < 8; ++w) {
      if (k[2 + w] == 0) continue;
      const double d = cyc(k[1], k[2 + w]);
      lm += d; lx = std::max(lx, d); ln = std::min(ln, d); ++nw;
    }
    loop_mean.push_back(nw ? lm / nw : 0);
    loop_max.push_back(lx);
    loop_spread.push_back(nw ? lx - ln : 0);
    bar1.push_back(cyc(k[2], k[10]));  // warp 0's loop end -> first cluster barrier passed
    bar2.push_back(cyc(k[10], k[11]));
    epi_t.push_back(cyc(k[11], k[12]));
    total.push_back(cyc(k[0], k[12]));
  }
  std::printf("[%s, %llu threads] %s | %zu CTAs ran | event cold %.1f us, hot %.1f us/call | "
              "span %.1f us\n",
              h[13] ? "resident" : "slabs", h[14], label, total.size(), ms_cold * 1e3,
              ms_hot * 1e2, (tend - t0) * 1e-3);
  auto row = [](const char* n, const std::vector<double>& v) {
    std::printf("  %-34s mean %6.2f  p10 %6.2f  p50 %6.2f  p90 %6.2f  max %6.2f us\n", n, mean(v),
                pct(v, 0.1), pct(v, 0.5), pct(v, 0.9), pct(v, 1.0));
  };
  row("CTA entry after first entry", entry);
  row("CTA end after first entry", end);
  row("CTA lifetime", total);
  row("prologue (staging, first chunk)", prologue);
  if (!pro_offsets.empty())
    row(trace_table() ? "  m-tile table entry" : "  offsets, scan, 2 barriers", pro_offsets);
  if (!pro_issue.empty()) {
    row("  m-tile lookup, first ring issue", pro_issue);
    row("  pdl_wait", pro_pdl);
    row("  activation fill (loads + stores)", pro_fill);
    row("  first ring wait + staging barrier", pro_wait);
  }
  row("chunk loop, mean over warps", loop_mean);
  row("chunk loop, slowest warp", loop_max);
  row("chunk loop, slowest - fastest warp", loop_spread);
  row("warp 0 loop end -> cluster barrier 1", bar1);
  row("push partials + cluster barrier 2", bar2);
  row("reduce + epilogue", epi_t);
  CHECK(cudaFree(buf));
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
}

//! The operands of one traced call: weight codes / scales (`w_code_bytes` code bytes, constant
//! bytes: the timing does not depend on them), `rows` activation rows of `Ka` columns, a RAC slot
//! table over K selecting every other block, unit tensor scales, the bf16 output and the
//! workspace. Freed on destruction.
struct trace_operands {
  void *wd = nullptr, *wsc = nullptr, *ad = nullptr, *asc = nullptr, *ts = nullptr, *y = nullptr,
       *ws = nullptr;
  int* slot = nullptr;
  trace_operands(std::size_t w_code_bytes, int rows, int K, int Ka, int N, std::size_t ws_bytes) {
    CHECK(cudaMalloc(&wd, w_code_bytes));
    CHECK(cudaMalloc(&wsc, w_code_bytes / 8));
    CHECK(cudaMalloc(&ad, static_cast<std::size_t>(rows) * Ka / 2));
    CHECK(cudaMalloc(&asc, static_cast<std::size_t>(rows) * Ka / 16));
    CHECK(cudaMalloc(&slot, sizeof(int) * (K / 16)));
    std::vector<int> h(K / 16, -1);
    for (int kb = 0, j = 0; kb < K / 16; kb += 2)
      h[kb] = j++;
    CHECK(cudaMemcpy(slot, h.data(), sizeof(int) * h.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&ts, 2 * sizeof(quads::tensor_scale)));
    CHECK(cudaMalloc(&y, static_cast<std::size_t>(rows) * N * 2));
    CHECK(cudaMalloc(&ws, std::max<std::size_t>(ws_bytes, 16)));
    CHECK(cudaMemset(wd, 0x5a, w_code_bytes));
    CHECK(cudaMemset(wsc, 0x38, w_code_bytes / 8));
    CHECK(cudaMemset(ad, 0x21, static_cast<std::size_t>(rows) * Ka / 2));
    CHECK(cudaMemset(asc, 0x38, static_cast<std::size_t>(rows) * Ka / 16));
    const quads::tensor_scale one[2] = {{1.0f, 1.0f}, {1.0f, 1.0f}};
    CHECK(cudaMemcpy(ts, one, sizeof one, cudaMemcpyHostToDevice));
  }
  trace_operands(const trace_operands&) = delete;
  trace_operands& operator=(const trace_operands&) = delete;
  ~trace_operands() {
    for (void* q : {wd, wsc, ad, asc, ts, y, ws, static_cast<void*>(slot)})
      cudaFree(q);
  }
  const quads::tensor_scale* scales() const { return static_cast<const quads::tensor_scale*>(ts); }
  //! The store epilogue's arguments: alpha from the two unit scales, bf16 output of N columns.
  epi::arguments store_args(int N) const {
    return {{.a = scales(),
             .a_mode = qe::scale_source::tensor,
             .w = scales() + 1,
             .w_mode = qe::scale_source::tensor},
            {static_cast<__nv_bfloat16*>(y), N}};
  }
  template <class Act>
  Act activations(int K) const {
    Act a{static_cast<const std::uint8_t*>(ad), static_cast<const std::uint8_t*>(asc)};
    if constexpr (std::is_same_v<Act, qg::rac_activations<quads::nvfp4>>) {
      a.slot = slot;
      a.selected = K / 2;
    }
    return a;
  }
};

template <class WF, class Tuning = qg::stream_tuning<>, bool Rac = false>
void trace_shape(int M, int N, int K, const uint4* flush, std::size_t flush_n, unsigned* sink,
                 int splits = 0) {
  const int Ka = Rac ? K + K / 2 : K; // RAC 50 %: every other block selected
  const int sms = quads::kernels::detail::sm_count();
  const auto plan = qg::plan_decode(M, N, K, false, {splits, qg::reduction::deterministic}, sms);
  const trace_operands o(static_cast<std::size_t>(N) * K / 2, M, K, Ka, N, plan.workspace_bytes);
  const epi::arguments ea = o.store_args(N);
  const qg::fp4_weights<WF> w{static_cast<const std::uint8_t*>(o.wd),
                              static_cast<const std::uint8_t*>(o.wsc)};
  using Act =
      std::conditional_t<Rac, qg::rac_activations<quads::nvfp4>, qg::fp4_activations<quads::nvfp4>>;
  const Act a = o.activations<Act>(K);
  using Lane =
      std::conditional_t<qg::is_pair_coded<qg::value_format_t<WF>> || qg::is_pair_coded<WF> ||
                             std::is_same_v<WF, qg::chunk_tiled<qg::pair_coded<quads::nvfp4>>>,
                         qg::fp16_lane, qg::bf16_lane>;
  const int ctas = plan.splits * ((N + 127) / 128) * ((M + 15) / 16);
  char label[256];
  std::snprintf(
      label, sizeof label, "%s%s S=%d dual=%d %-12s M=%-2d splits=%d chunks/split=%d ctas=%d",
      Rac ? "rac50 " : "",
      qg::is_chunk_tiled<WF> ? (std::is_same_v<Lane, qg::fp16_lane> ? "tiled-pair" : "tiled")
                             : (qg::is_pair_coded<WF> ? "pair" : "plain"),
      Tuning::stages, int(Tuning::dual_acc), (std::to_string(N) + "x" + std::to_string(K)).c_str(),
      M, plan.splits, plan.chunks_per_split, ctas);
  trace_calls(
      [&] { return qg::decode_gemm<Lane, epi, WF, Act, Tuning>(plan, w, a, ea, o.ws, nullptr); },
      ctas, flush, flush_n, sink, label);
}

//! A grouped call (quads/gemm/grouped.cuh) at MoE decode routings: `rows` rows over `active` of
//! `E` experts (spread over [0, E), one row each first), plain W4A4 or RAC 50 % (shared scale,
//! one slot table), with the plain store epilogue (the layer's epilogues are not traced here).
template <class WF = quads::nvfp4, bool Rac = false, bool MoeEpi = false>
void trace_grouped(int E, int active, int rows, int N, int K, const uint4* flush,
                   std::size_t flush_n, unsigned* sink) {
  const int Ka = Rac ? K + K / 2 : K;
  const auto plan = qg::plan_grouped(rows, N, K, E, false, {}, quads::kernels::detail::sm_count());
  std::vector<int> per(static_cast<std::size_t>(E), 0);
  for (int i = 0; i < rows; ++i)
    per[static_cast<std::size_t>((i % active) * (E / active))] += 1;
  std::vector<int> offsets{0};
  for (int e = 0; e < E; ++e)
    offsets.push_back(offsets.back() + per[static_cast<std::size_t>(e)]);
  const trace_operands o(static_cast<std::size_t>(N) * K / 2 * E, rows, K, Ka, N,
                         plan.workspace_bytes);
  void* off;
  CHECK(cudaMalloc(&off, sizeof(int) * offsets.size()));
  CHECK(cudaMemcpy(off, offsets.data(), sizeof(int) * offsets.size(), cudaMemcpyHostToDevice));
  void* entries = nullptr;
  qg::grouped_m_tile_table table{};
  if (trace_table()) {
    CHECK(cudaMalloc(&entries, sizeof(qg::grouped_m_tile) * plan.stream_m_tiles));
    table = qg::m_tile_table_for(plan, static_cast<qg::grouped_m_tile*>(entries));
    CHECK(qg::write_m_tile_table(plan, static_cast<const int*>(off), table.entries, nullptr));
  }
  const auto* tsp = o.scales();
  const epi::arguments ea = o.store_args(N);
  // MoeEpi: the MoE layer's gate_up epilogue (alpha, SwiGLU, quantize h to NVFP4 with RAC 50 %
  // residual blocks when Rac: a slot table per expert) into h / hs
  const int I = N / 2, nkb_i = I / 16;
  void *h, *hs, *eor, *dslot;
  CHECK(cudaMalloc(&h, static_cast<std::size_t>(rows) * (I + I / 2) / 2));
  CHECK(cudaMalloc(&hs, static_cast<std::size_t>(rows) * (I + I / 2) / 16));
  CHECK(cudaMalloc(&eor, sizeof(int) * rows));
  CHECK(cudaMalloc(&dslot, sizeof(int) * E * nkb_i));
  {
    std::vector<int> er;
    for (int e = 0; e < E; ++e)
      for (int i = 0; i < per[static_cast<std::size_t>(e)]; ++i)
        er.push_back(e);
    CHECK(cudaMemcpy(eor, er.data(), sizeof(int) * er.size(), cudaMemcpyHostToDevice));
    std::vector<int> ds(static_cast<std::size_t>(E) * nkb_i, -1);
    for (int e = 0; e < E; ++e)
      for (int b = e % 2, j = 0; b < nkb_i; b += 2)
        ds[static_cast<std::size_t>(e) * nkb_i + b] = j++;
    CHECK(cudaMemcpy(dslot, ds.data(), sizeof(int) * ds.size(), cudaMemcpyHostToDevice));
  }
  using moe_epi = quads::moe::gate_up_fp4_epilogue_gpu;
  const moe_epi::arguments me{{.a = tsp,
                               .a_mode = qe::scale_source::tensor,
                               .w = tsp + 1,
                               .w_mode = qe::scale_source::tensor,
                               .expert_of_row = static_cast<const int*>(eor)},
                              {},
                              {nullptr, I},
                              {static_cast<std::uint8_t*>(h), static_cast<std::uint8_t*>(hs), tsp,
                               qe::scale_source::tensor, static_cast<const int*>(eor),
                               Rac ? static_cast<const int*>(dslot) : nullptr, Rac ? I / 2 : 0,
                               rows, I, 0}};
  const qg::fp4_expert_weights<WF> w{static_cast<const std::uint8_t*>(o.wd),
                                     static_cast<const std::uint8_t*>(o.wsc), E};
  constexpr bool pair = std::is_same_v<WF, qg::chunk_tiled<qg::pair_coded<quads::nvfp4>>>;
  using Lane = std::conditional_t<pair, qg::fp16_lane, qg::bf16_lane>;
  using Act =
      std::conditional_t<Rac, qg::rac_activations<quads::nvfp4>, qg::fp4_activations<quads::nvfp4>>;
  const Act a = o.activations<Act>(K);
  const int ctas = plan.splits * ((N + 127) / 128) * plan.stream_m_tiles;
  char label[256];
  std::snprintf(label, sizeof label,
                "grouped %s%s%s%sE=%d active=%d rows=%d %dx%d tile_rows=%d splits=%d "
                "chunks/split=%d one-n-tile grid=%d (weights %.1f MB)",
                table.entries != nullptr ? "m-tile-table " : "",
                MoeEpi ? "moe-gate_up-epilogue " : "", Rac ? "rac50 " : "",
                pair ? "tiled-pair " : "", E, active, rows, N, K, plan.stream_tile_rows,
                plan.splits, plan.chunks_per_split, ctas,
                active * (N * (K / 2.0 + K / 16.0)) * 1e-6);
  trace_calls(
      [&] {
        if constexpr (MoeEpi)
          return qg::grouped_gemm<Lane, moe_epi>(plan, w, a, static_cast<const int*>(off), me, o.ws,
                                                 nullptr, table);
        else
          return qg::grouped_gemm<Lane, epi>(plan, w, a, static_cast<const int*>(off), ea, o.ws,
                                             nullptr, table);
      },
      ctas, flush, flush_n, sink, label);
  for (void* q : {off, h, hs, eor, dslot, entries})
    CHECK(cudaFree(q));
}

//! `iters` x 8 independent `mma.sync.m16n8k16` per warp (8 accumulator sets, so no MMA waits on
//! the previous one); the operands are register values the compiler cannot fold.
template <class Lane>
__global__ void mma_rate_kernel(int iters, float* sink) {
  const std::uint32_t a = threadIdx.x * 0x00010001u, b = 0x3c003c00u ^ threadIdx.x;
  float d[8][4] = {};
  for (int i = 0; i < iters; ++i)
#pragma unroll
    for (int c = 0; c < 8; ++c) qg::detail::mma_16816<Lane>(d[c], a, a + i, a ^ i, a, b, b + i);
  float s = 0;
#pragma unroll
  for (int c = 0; c < 8; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  if (s == 1.2345f) *sink = s;
}

//! MMAs per SM per us at `warps` warps per SM (one CTA of `warps` warps per SM).
template <class Lane>
void mma_rate(int warps, int sms, float* sink) {
  const int iters = 4096;
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  mma_rate_kernel<Lane><<<sms, 32 * warps>>>(iters, sink);  // warm-up
  CHECK(cudaEventRecord(e0));
  mma_rate_kernel<Lane><<<sms, 32 * warps>>>(iters, sink);
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  const double per_sm_us = 8.0 * iters * warps / (ms * 1e3);
  std::printf("mma.sync m16n8k16 %s, %2d warps per SM: %.1f us, %.0f MMAs per SM per us "
              "(%.1f TFLOP/s over %d SMs)\n",
              std::is_same_v<Lane, qg::bf16_lane> ? "bf16" : "fp16", warps, ms * 1e3, per_sm_us,
              per_sm_us * sms * 4096.0 * 1e-6, sms);
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
}

} // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  const bool pair = argc > 1 && std::strcmp(argv[1], "--pair") == 0;
  const bool stages = argc > 1 && std::strcmp(argv[1], "--stages") == 0;
  const bool variants = argc > 1 && std::strcmp(argv[1], "--variants") == 0;
  const bool tiled = argc > 1 && std::strcmp(argv[1], "--tiled") == 0;
  const bool rac = argc > 1 && std::strcmp(argv[1], "--rac") == 0;
  const bool rac_stages = argc > 1 && std::strcmp(argv[1], "--rac-stages") == 0;
  const bool grouped = argc > 1 && std::strcmp(argv[1], "--grouped") == 0;
  const bool moe = argc > 1 && std::strcmp(argv[1], "--moe") == 0;
  if (argc > 1 && std::strcmp(argv[1], "--mma-rate") == 0) {
    float* sink;
    CHECK(cudaMalloc(&sink, 4));
    const int sms = quads::kernels::detail::sm_count();
    for (const int w : {4, 8, 16, 32}) {
      mma_rate<qg::fp16_lane>(w, sms, sink);
      mma_rate<qg::bf16_lane>(w, sms, sink);
    }
    CHECK(cudaFree(sink));
    return 0;
  }
  const std::size_t flush_bytes = 512ull << 20;
  uint4* flush;
  unsigned* sink;
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaMalloc(&sink, 4));
  CHECK(cudaMemset(flush, 1, flush_bytes));
  if (moe) { // the MoE layer's gate_up epilogue against the plain store, Qwen3-30B-A3B gate_up
    for (const int T : {1, 16}) {
      const int active = T == 1 ? 8 : 82, E = 128, N = 1536, K = 2048;
      trace_grouped(E, active, 8 * T, N, K, flush, flush_bytes / 16, sink);
      trace_grouped<quads::nvfp4, false, true>(E, active, 8 * T, N, K, flush, flush_bytes / 16,
                                               sink);
      trace_grouped<quads::nvfp4, true>(E, active, 8 * T, N, K, flush, flush_bytes / 16, sink);
      trace_grouped<quads::nvfp4, true, true>(E, active, 8 * T, N, K, flush, flush_bytes / 16,
                                              sink);
    }
    return 0;
  }
  if (grouped) { // Qwen3-30B-A3B and DeepSeek-V3 expert GEMMs at T = 1, 4, 16, 64 (top-8)
    const int moe[4][3] = {
        {128, 1536, 2048}, {128, 2048, 768}, {256, 4096, 7168}, {256, 7168, 2048}};
    for (const auto& m : moe)
      for (const int T : {1, 4, 16, 64}) {
        // expected distinct experts of T tokens' top-8 (the "active" columns of
        // docs/history/moe.md, "4a" / "4b")
        const int active = T == 1    ? 8
                           : T == 4  ? (m[0] == 128 ? 25 : 31)
                           : T == 16 ? (m[0] == 128 ? 82 : 100)
                                     : (m[0] == 128 ? 125 : 224);
        using TP = qg::chunk_tiled<qg::pair_coded<quads::nvfp4>>;
        trace_grouped(m[0], active, 8 * T, m[1], m[2], flush, flush_bytes / 16, sink);
        trace_grouped<quads::nvfp4, true>(m[0], active, 8 * T, m[1], m[2], flush, flush_bytes / 16,
                                          sink);
        trace_grouped<TP>(m[0], active, 8 * T, m[1], m[2], flush, flush_bytes / 16, sink);
        trace_grouped<TP, true>(m[0], active, 8 * T, m[1], m[2], flush, flush_bytes / 16, sink);
      }
    return 0;
  }
  const int shapes[3][2] = {{14336, 4096}, {8192, 8192}, {4096, 14336}};
  for (const auto& s : shapes)
    for (int M : {1, 16}) {
      if (pair) {
        trace_shape<qg::pair_coded<quads::nvfp4>>(M, s[0], s[1], flush, flush_bytes / 16, sink);
      } else if (tiled) {  // chunk-tiled weights (the bytes are constant: timing only)
        trace_shape<qg::chunk_tiled<quads::nvfp4>>(M, s[0], s[1], flush, flush_bytes / 16, sink);
        trace_shape<qg::chunk_tiled<qg::pair_coded<quads::nvfp4>>>(M, s[0], s[1], flush,
                                                                   flush_bytes / 16, sink);
        const auto base = qg::plan_decode(M, s[0], s[1], false, {}, 132);
        trace_shape<qg::chunk_tiled<quads::nvfp4>>(M, s[0], s[1], flush, flush_bytes / 16, sink,
                                                   2 * base.splits);
      } else if (rac_stages) {  // RAC at M = 16 (slab mode) against plain: ring depth, splits
        using TP = qg::chunk_tiled<qg::pair_coded<quads::nvfp4>>;
        if (M != 16) continue;
        const auto rac_rings = [&]<int... S>(int splits) {
          (trace_shape<TP, qg::stream_tuning<S>, true>(M, s[0], s[1], flush, flush_bytes / 16,
                                                       sink, splits),
           ...);
        };
        const int sp = qg::plan_decode(M, s[0], s[1], false, {}, 132).splits;
        trace_shape<TP>(M, s[0], s[1], flush, flush_bytes / 16, sink);
        rac_rings.template operator()<3, 4, 6, 8, 2>(0);  // 0: the plan's splits
        rac_rings.template operator()<2, 3>(2 * sp);      // more CTAs, more warps per SM
      } else if (rac) {  // RAC (b) 50 %, shared residual scale, against plain W4A4
        using TP = qg::chunk_tiled<qg::pair_coded<quads::nvfp4>>;
        trace_shape<TP>(M, s[0], s[1], flush, flush_bytes / 16, sink);
        trace_shape<TP, qg::stream_tuning<>, true>(M, s[0], s[1], flush, flush_bytes / 16, sink);
      } else if (variants) {  // more CTAs per SM (splits x 2) and two accumulator sets
        const auto base = qg::plan_decode(M, s[0], s[1], false, {}, 132);
        trace_shape<quads::nvfp4>(M, s[0], s[1], flush, flush_bytes / 16, sink, 2 * base.splits);
        trace_shape<quads::nvfp4, qg::stream_tuning<3, 2, 0, true>>(M, s[0], s[1], flush,
                                                                    flush_bytes / 16, sink);
        trace_shape<quads::nvfp4, qg::stream_tuning<3, 2, 0, true>>(M, s[0], s[1], flush,
                                                                    flush_bytes / 16, sink,
                                                                    2 * base.splits);
      } else if (stages) {  // ring depth: chunks in flight per warp = stages - 1
        trace_shape<quads::nvfp4, qg::stream_tuning<4>>(M, s[0], s[1], flush, flush_bytes / 16, sink);
        trace_shape<quads::nvfp4, qg::stream_tuning<6>>(M, s[0], s[1], flush, flush_bytes / 16, sink);
        trace_shape<quads::nvfp4, qg::stream_tuning<8>>(M, s[0], s[1], flush, flush_bytes / 16, sink);
      } else
        trace_shape<quads::nvfp4>(M, s[0], s[1], flush, flush_bytes / 16, sink);
    }
  return 0;
}
