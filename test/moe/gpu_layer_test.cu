// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The fused MoE layer on the GPU vs the host reference, stage by stage from the same
//!        quantized operands, for every policy and T in {1, 4, 16, 64, 256}, plus a Qwen3-shaped
//!        case, CUDA-graph capture/replay and run-to-run determinism.
//!
//! Per stage: routing exact; gathered input operand byte-exact; h_pre (fp32 SwiGLU output) within
//! the fp32-summation bound of the float64 reference; h bytes == the host node run on the GPU's
//! own h_pre (bit-exact); Y within the bound of the host down GEMM run on the GPU's own h; the
//! combine bit-exact on the GPU's own Y; end to end (host stages on host operands) reported.
#include <doctest/doctest.h>

#include "gpu_helpers.cuh"

#include <quads/moe/layer.cuh>
#include <quads/moe/reference.hpp>

#include <test_support/seed.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace qm = quads::moe;
namespace qr = quads::moe::reference;
using moe_test::dbuf;

namespace {

struct gpu_run {
  std::vector<float> out_f32, h_pre, y;
  std::vector<std::uint16_t> out;
  std::vector<std::uint8_t> a1, a1s, h, hs;
  qm::routing_result routing;
};

//! The expert stacks of `d` in `expert_weight_form::tiled_pair` (made on the device by
//! `make_tiled_pair_weights_async`), with `view` pointing at them.
struct tiled_pair_weights {
  dbuf gu, gus, dn, dns;
  qm::layer_weights_view view;
  tiled_pair_weights(const moe_test::problem& p, const moe_test::device_problem& d) {
    const auto& s = p.shape;
    const std::size_t gu_codes =
                          static_cast<std::size_t>(s.experts) * 2 * s.intermediate * s.hidden / 2,
                      dn_codes =
                          static_cast<std::size_t>(s.experts) * s.hidden * s.intermediate / 2;
    gu = dbuf(gu_codes);
    gus = dbuf(gu_codes / 8);
    dn = dbuf(dn_codes);
    dns = dbuf(dn_codes / 8);
    MOE_CUDA_OK(qm::make_tiled_pair_weights_async(
        d.w.gate_up, d.w.gate_up_scales, gu.get<std::uint8_t>(), gus.get<std::uint8_t>(),
        2 * s.intermediate, s.hidden, s.experts, nullptr));
    MOE_CUDA_OK(qm::make_tiled_pair_weights_async(d.w.down, d.w.down_scales, dn.get<std::uint8_t>(),
                                                  dns.get<std::uint8_t>(), s.hidden, s.intermediate,
                                                  s.experts, nullptr));
    MOE_CUDA_OK(cudaDeviceSynchronize());
    view = d.w;
    view.gate_up = gu.get<std::uint8_t>();
    view.gate_up_scales = gus.get<std::uint8_t>();
    view.down = dn.get<std::uint8_t>();
    view.down_scales = dns.get<std::uint8_t>();
    view.form = qm::expert_weight_form::tiled_pair;
  }
};

template <qm::layer_policy P>
gpu_run run_layer(const moe_test::problem& p, const moe_test::device_problem& d, bool graph = false,
                  int repeats = 1, const qm::layer_weights_view* weights = nullptr,
                  bool programmatic = true, bool m_tile_table = true) {
  const auto& s = p.shape;
  const int T = p.tokens, n = T * s.top_k, H = s.hidden, I = s.intermediate;
  const qm::layer_weights_view& wv = weights != nullptr ? *weights : d.w;
  qm::layer_tuning tune{};
  tune.programmatic_min_rows = programmatic ? 0 : std::numeric_limits<int>::max();
  tune.m_tile_table = m_tile_table;
  const auto plan = qm::plan_layer<P>(T, s, p.rc, p.num.gate_up_sel.selected,
                                      p.num.down_selected(), 132, tune);
  REQUIRE(plan.valid);
  dbuf ws(plan.workspace_bytes), out(static_cast<std::size_t>(T) * H * 2),
      outf(static_cast<std::size_t>(T) * H * 4), hpre(static_cast<std::size_t>(n) * I * 4);
  qm::layer_io io{d.x_bf16(), d.logits.get<float>(), out.get<__nv_bfloat16>(), outf.get<float>(),
                  hpre.get<float>()};
  cudaStream_t st;
  MOE_CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  // The operands were uploaded with pageable cudaMemcpy on the legacy stream, which may return
  // before its DMA lands, and a non-blocking stream does not wait for the legacy one.
  MOE_CUDA_OK(cudaDeviceSynchronize());
  if (graph) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    MOE_CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    MOE_CUDA_OK(qm::forward(plan, wv, d.num, io, ws.get(), st));
    MOE_CUDA_OK(cudaStreamEndCapture(st, &g));
    MOE_CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < repeats; ++i)
      MOE_CUDA_OK(cudaGraphLaunch(ge, st));
    MOE_CUDA_OK(cudaStreamSynchronize(st));
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
  } else {
    for (int i = 0; i < repeats; ++i)
      MOE_CUDA_OK(qm::forward(plan, wv, d.num, io, ws.get(), st));
    MOE_CUDA_OK(cudaStreamSynchronize(st));
  }
  cudaStreamDestroy(st);
  gpu_run r;
  const auto* base = ws.get<std::uint8_t>();
  r.out_f32 = moe_test::download<float>(outf.get(), static_cast<std::size_t>(T) * H);
  r.out = moe_test::download<std::uint16_t>(out.get(), static_cast<std::size_t>(T) * H);
  r.h_pre = moe_test::download<float>(hpre.get(), static_cast<std::size_t>(n) * I);
  r.y = moe_test::download<float>(base + plan.off_y, static_cast<std::size_t>(n) * H);
  const int Hp = H + plan.gu_selected, Ip = I + plan.dn_selected;
  if constexpr (qm::fp4_activations(P)) {
    r.a1 =
        moe_test::download<std::uint8_t>(base + plan.off_a1, static_cast<std::size_t>(n) * Hp / 2);
    r.a1s = moe_test::download<std::uint8_t>(base + plan.off_a1s,
                                             static_cast<std::size_t>(n) * Hp / 16);
    r.h = moe_test::download<std::uint8_t>(base + plan.off_h, static_cast<std::size_t>(n) * Ip / 2);
    r.hs =
        moe_test::download<std::uint8_t>(base + plan.off_hs, static_cast<std::size_t>(n) * Ip / 16);
  } else {
    r.a1 =
        moe_test::download<std::uint8_t>(base + plan.off_a1, static_cast<std::size_t>(n) * H * 2);
    r.h = moe_test::download<std::uint8_t>(base + plan.off_h, static_cast<std::size_t>(n) * I * 2);
  }
  const auto rv = qm::routing_in(plan, ws.get());
  r.routing.tokens = T;
  r.routing.experts = s.experts;
  r.routing.top_k = s.top_k;
  r.routing.topk_expert = moe_test::download<int>(rv.topk_expert, n);
  r.routing.topk_weight = moe_test::download<float>(rv.topk_weight, n);
  r.routing.offsets = moe_test::download<int>(rv.offsets, s.experts + 1);
  r.routing.row_of_pair = moe_test::download<int>(rv.row_of_pair, n);
  r.routing.pair_of_row = moe_test::download<int>(rv.pair_of_row, n);
  r.routing.expert_of_row = moe_test::download<int>(rv.expert_of_row, n);
  r.routing.weight_of_row = moe_test::download<float>(rv.weight_of_row, n);
  return r;
}

double silu(double g) { return g / (1.0 + std::exp(-g)); }

//! Prints one stage mismatch with its routing context (for the device-run logs).
//! Two runs of the same layer gave the same bits: outputs, h and the gathered input.
void same_bits(const gpu_run& a, const gpu_run& b) {
  CHECK(std::memcmp(a.out_f32.data(), b.out_f32.data(), a.out_f32.size() * sizeof(float)) == 0);
  CHECK(a.out == b.out);
  CHECK(a.h == b.h);
  CHECK(a.a1 == b.a1);
}

void report_mismatch(const char* stage, const qm::routing_result& r, int row, int col, double ref,
                     double got, double bound) {
  const int e = r.expert_of_row[row];
  std::printf("  %s mismatch: row %d (expert %d, rows [%d, %d), pair %d) col %d: ref %.6g got "
              "%.6g bound %.3g\n",
              stage, row, e, r.offsets[e], r.offsets[e + 1], r.pair_of_row[row], col, ref, got,
              bound);
}

//! Compares a GPU run with the host reference stage by stage (see the file comment).
template <qm::layer_policy P>
void check_layer(const moe_test::problem& p, const gpu_run& g) {
  const auto& s = p.shape;
  const int T = p.tokens, n = T * s.top_k, H = s.hidden, I = s.intermediate;
  const auto want = qr::forward(P, p.x, p.logits, T, p.rc, p.w, p.num);
  // 1. routing
  REQUIRE(g.routing.offsets == want.routing.offsets);
  REQUIRE(g.routing.pair_of_row == want.routing.pair_of_row);
  CHECK(std::memcmp(g.routing.weight_of_row.data(), want.routing.weight_of_row.data(),
                    sizeof(float) * n) == 0);
  // 2. the gathered input operand
  if constexpr (qm::fp4_activations(P)) {
    CHECK(g.a1 == want.a1.data);
    CHECK(g.a1s == want.a1.scales);
  } else {
    const auto bits = moe_test::to_bf16_bits(want.a1.dense);
    CHECK(std::memcmp(g.a1.data(), bits.data(), bits.size() * 2) == 0);
  }
  // 3. h_pre within the fp32-summation bound
  const auto plan =
      qm::plan_layer<P>(T, s, p.rc, p.num.gate_up_sel.selected, p.num.down_selected());
  const int splits_gu = P == qm::layer_policy::bf16 ? 1 : plan.gu.splits;
  const int splits_dn = P == qm::layer_policy::bf16 ? 1 : plan.dn.splits;
  const auto gu_alpha = qr::gate_up_alpha(P, &p.num.x_scale, p.w.gate_up.tensor_scales.data(),
                                          want.routing.expert_of_row.data());
  int bad = 0;
  double worst = 0;
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < I; ++j) {
      const double a = quads::gemm::reference::alpha_at(gu_alpha, r, 2 * j);
      const double gv = a * want.gu.acc.acc[want.gu.acc.index(r, 2 * j)];
      const double uv = a * want.gu.acc.acc[want.gu.acc.index(r, 2 * j + 1)];
      const double tg = a * quads::gemm::reference::tolerance(want.gu.acc, r, 2 * j, splits_gu);
      const double tu = a * quads::gemm::reference::tolerance(want.gu.acc, r, 2 * j + 1, splits_gu);
      const double ref = silu(gv) * uv;
      const double bound = 1.1 * std::fabs(uv) * tg + (std::fabs(silu(gv)) + 1.1 * tg) * tu +
                           1e-5 * (std::fabs(ref) + std::fabs(uv) + std::fabs(gv)) + 1e-30;
      const double err = std::fabs(g.h_pre[static_cast<std::size_t>(r) * I + j] - ref);
      worst = std::max(worst, err / bound);
      if (err > bound && bad++ < 4)
        report_mismatch("h_pre", want.routing, r, j, ref,
                        g.h_pre[static_cast<std::size_t>(r) * I + j], bound);
    }
  if (bad > 0) std::printf("  h_pre: %d mismatches, worst error / bound = %.3g\n", bad, worst);
  CHECK(bad == 0);
  // 4. h bytes == the host node on the GPU's own h_pre
  qr::operand gh;
  if constexpr (qm::fp4_activations(P)) {
    const bool rac = P == qm::layer_policy::quads_rac;
    const std::vector<int> slots = rac ? qr::down_slot_tables(p.num, I) : std::vector<int>{};
    gh = qr::quantize_h(g.h_pre, n, I, p.num, want.routing, slots, rac);
    CHECK(g.h == gh.data);
    CHECK(g.hs == gh.scales);
    gh.data = g.h;
    gh.scales = g.hs;
  } else {
    gh.rows = n;
    gh.cols = I;
    gh.dense.resize(static_cast<std::size_t>(n) * I);
    for (std::size_t i = 0; i < gh.dense.size(); ++i)
      gh.dense[i] = qr::round_bf16(g.h_pre[i]);
    const auto bits = moe_test::to_bf16_bits(gh.dense);
    CHECK(std::memcmp(g.h.data(), bits.data(), bits.size() * 2) == 0);
  }
  // 5. Y within the bound of the host down GEMM on the GPU's h
  const auto dn = qr::down(P, gh, want.routing, p.w, p.num);
  const auto dn_alpha =
      qr::down_alpha(P, p.num.h_scales.data(), p.num.h_mode(), p.w.down.tensor_scales.data(),
                     want.routing.expert_of_row.data());
  bad = 0;
  worst = 0;
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < H; ++c) {
      const double aw = std::fabs(quads::gemm::reference::alpha_at(dn_alpha, r, c) *
                                  want.routing.weight_of_row[r]);
      const double ref = dn.y[static_cast<std::size_t>(r) * H + c];
      const double bound = aw * quads::gemm::reference::tolerance(dn.acc, r, c, splits_dn) +
                           1e-6 * std::fabs(ref) + 1e-30;
      const double err = std::fabs(g.y[static_cast<std::size_t>(r) * H + c] - ref);
      worst = std::max(worst, err / bound);
      if (err > bound && bad++ < 4)
        report_mismatch("Y", want.routing, r, c, ref, g.y[static_cast<std::size_t>(r) * H + c],
                        bound);
    }
  if (bad > 0) std::printf("  Y: %d mismatches, worst error / bound = %.3g\n", bad, worst);
  CHECK(bad == 0);
  // 6. combine bit-exact on the GPU's Y; bf16 output = RNE of the fp32 one
  const auto comb = qr::combine(g.y, want.routing, H);
  CHECK(std::memcmp(comb.data(), g.out_f32.data(), comb.size() * sizeof(float)) == 0);
  CHECK(g.out == moe_test::to_bf16_bits(g.out_f32));
  // 7. end to end (host operands throughout): only h codes near a rounding boundary may differ
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.out.size(); ++i) {
    num += (static_cast<double>(g.out_f32[i]) - want.out[i]) * (g.out_f32[i] - want.out[i]);
    den += static_cast<double>(want.out[i]) * want.out[i];
  }
  const double rel = std::sqrt(num / (den > 0 ? den : 1));
  std::printf("  moe layer %-10s E=%d k=%d H=%d I=%d T=%-4d end-to-end rel. diff vs host %.3g\n",
              qm::to_string(P), s.experts, s.top_k, H, I, T, rel);
  CHECK(rel < 2e-2);
}

//! QUADS_MOE_QUICK=1 (compute-sanitizer runs): T in {1, 16} only, no Qwen-shaped case.
bool quick() {
  const char* q = std::getenv("QUADS_MOE_QUICK");
  return q != nullptr && *q == '1';
}

template <qm::layer_policy P>
void sweep(std::uint64_t seed, bool tiled_pair = false) {
  for (int T : {1, 4, 16, 64, 256}) {
    if (quick() && T != 1 && T != 16) continue;
    const bool big = T % 2 == 0;
    const qm::layer_shape s{big ? 16 : 8, big ? 4 : 2, 256, 128};
    const auto p = moe_test::make_problem(s, T, seed + static_cast<std::uint64_t>(T), T == 16, 0.5);
    const moe_test::device_problem d(p);
    CAPTURE(T);
    CAPTURE(tiled_pair);
    if (tiled_pair) {
      const tiled_pair_weights tw(p, d);
      check_layer<P>(p, run_layer<P>(p, d, false, 1, &tw.view));
    } else {
      check_layer<P>(p, run_layer<P>(p, d));
    }
  }
}

} // namespace

TEST_SUITE("moe.layer.gpu") {

  TEST_CASE("naive W4A4 layer matches the host reference stage by stage") {
    sweep<qm::layer_policy::naive_w4a4>(quads_test::derived_seed("moe.gpu.naive"));
  }
  TEST_CASE("QUADS (W4A4 + RAC 50%) layer matches the host reference stage by stage") {
    sweep<qm::layer_policy::quads_rac>(quads_test::derived_seed("moe.gpu.quads"));
  }
  TEST_CASE(
      "naive W4A4 and QUADS layers on tiled pair-coded expert weights match the host reference") {
    sweep<qm::layer_policy::naive_w4a4>(quads_test::derived_seed("moe.gpu.tiled.naive"), true);
    sweep<qm::layer_policy::quads_rac>(quads_test::derived_seed("moe.gpu.tiled.quads"), true);
  }
  TEST_CASE("W4A16 layer matches the host reference stage by stage") {
    sweep<qm::layer_policy::w4a16>(quads_test::derived_seed("moe.gpu.w4a16"));
  }
  TEST_CASE("bf16 layer (plain reference kernel) matches the host reference stage by stage") {
    sweep<qm::layer_policy::bf16>(quads_test::derived_seed("moe.gpu.bf16"));
  }

  TEST_CASE("Qwen3-30B-A3B-shaped layer (E=128, k=8, H=2048, I=768) matches for every policy") {
    if (quick()) return;
    const qm::layer_shape s{128, 8, 2048, 768};
    const int T = 4;
    const auto p =
        moe_test::make_problem(s, T, quads_test::derived_seed("moe.gpu.qwen"), true, 0.5);
    const moe_test::device_problem d(p);
    check_layer<qm::layer_policy::quads_rac>(p, run_layer<qm::layer_policy::quads_rac>(p, d));
    check_layer<qm::layer_policy::naive_w4a4>(p, run_layer<qm::layer_policy::naive_w4a4>(p, d));
    check_layer<qm::layer_policy::w4a16>(p, run_layer<qm::layer_policy::w4a16>(p, d));
    const tiled_pair_weights tw(p, d);
    check_layer<qm::layer_policy::quads_rac>(
        p, run_layer<qm::layer_policy::quads_rac>(p, d, false, 1, &tw.view));
  }

  TEST_CASE("the layer captured in a CUDA graph and replayed equals a direct run bit for bit") {
    for (int T : {4, 300}) {
      const qm::layer_shape s{16, 8, 256, 128};
      const auto p = moe_test::make_problem(s, T, quads_test::derived_seed("moe.gpu.graph") + T);
      const moe_test::device_problem d(p);
      const auto direct = run_layer<qm::layer_policy::quads_rac>(p, d, false, 1);
      const auto replay = run_layer<qm::layer_policy::quads_rac>(p, d, true, 3);
      CAPTURE(T);
      CHECK(std::memcmp(direct.out_f32.data(), replay.out_f32.data(),
                        direct.out_f32.size() * sizeof(float)) == 0);
      CHECK(direct.h == replay.h);
      const auto again = run_layer<qm::layer_policy::quads_rac>(p, d, false, 2);
      CHECK(std::memcmp(direct.out_f32.data(), again.out_f32.data(),
                        direct.out_f32.size() * sizeof(float)) == 0);
    }
  }

  TEST_CASE("the m-tile table on and off give the same bits on every routing path") {
    const qm::layer_shape s{32, 8, 512, 256};
    if (std::getenv("QUADS_MOE_TILE_TABLE") == nullptr) {  // the default: the routing writes it
      const auto plan = qm::plan_layer<qm::layer_policy::quads_rac>(16, s, {32, 8}, 128, 64);
      CHECK(plan.m_tile_table);
      CHECK(plan.gu.stream_m_tiles == plan.dn.stream_m_tiles);
    }
    // T = 300: 2400 rows, the CUB routing path and the table kernel after it
    for (int T : {1, 16, 64, 300}) {
      const auto p = moe_test::make_problem(s, T, quads_test::derived_seed("moe.gpu.tiles") + T);
      const moe_test::device_problem d(p);
      const tiled_pair_weights tw(p, d);
      CAPTURE(T);
      using enum qm::layer_policy;
      same_bits(run_layer<quads_rac>(p, d, false, 1, &tw.view, true, false),
           run_layer<quads_rac>(p, d, true, 2, &tw.view, true, true));
      same_bits(run_layer<naive_w4a4>(p, d, false, 1, nullptr, true, false),
           run_layer<naive_w4a4>(p, d, false, 1, nullptr, true, true));
      same_bits(run_layer<w4a16>(p, d, false, 1, nullptr, true, false),
           run_layer<w4a16>(p, d, false, 1, nullptr, true, true));
    }
  }

  // Programmatic launch lets each stage's CTAs start while the previous stage finishes (the
  // grouped GEMMs read the offsets and prefetch weights before waiting); a missing wait shows as
  // different bits here. T = 1 / 16 / 64 / 300 give 4-, 8- and 16-row m-tiles and a multi-kernel
  // routing; graph replays repeat the chain back to back.
  TEST_CASE("programmatic launch on and off give the same bits, direct and replayed") {
    const qm::layer_shape s{32, 8, 512, 256};
    if (std::getenv("QUADS_MOE_PDL") == nullptr) { // the default: all stages, late release < 64 rows
      using plan_t = qm::layer_plan<qm::layer_policy::quads_rac>;
      for (int T : {1, 7, 8, 300}) {
        const auto plan = qm::plan_layer<qm::layer_policy::quads_rac>(T, s, {32, 8}, 128, 64);
        CAPTURE(T);
        REQUIRE(plan.valid);
        CHECK(plan.programmatic == plan_t::pdl_all);
        CHECK(plan.gu.programmatic);
        CHECK(plan.dn.programmatic);
        CHECK(plan.gu.late_release == (T * 8 < 64));
        CHECK(plan.dn.late_release == (T * 8 < 64));
      }
      qm::layer_tuning never{};
      never.programmatic_min_rows = std::numeric_limits<int>::max();
      const auto off = qm::plan_layer<qm::layer_policy::quads_rac>(300, s, {32, 8}, 128, 64, 132,
                                                                  never);
      CHECK(off.programmatic == 0u);
      CHECK_FALSE(off.dn.programmatic);
    }
    for (int T : {1, 16, 64, 300}) {
      const auto p = moe_test::make_problem(s, T, quads_test::derived_seed("moe.gpu.pdl") + T);
      const moe_test::device_problem d(p);
      const tiled_pair_weights tw(p, d);
      CAPTURE(T);
      {
        using enum qm::layer_policy;
        const auto off = run_layer<quads_rac>(p, d, false, 1, &tw.view, false);
        same_bits(off, run_layer<quads_rac>(p, d, false, 2, &tw.view, true));
        same_bits(off, run_layer<quads_rac>(p, d, true, 3, &tw.view, true));
        const auto off_n = run_layer<naive_w4a4>(p, d, false, 1, nullptr, false);
        same_bits(off_n, run_layer<naive_w4a4>(p, d, true, 3, nullptr, true));
        const auto off_16 = run_layer<w4a16>(p, d, false, 1, nullptr, false);
        same_bits(off_16, run_layer<w4a16>(p, d, true, 3, nullptr, true));
      }
    }
  }

  TEST_CASE("forward refuses missing operands without launching") {
    const qm::layer_shape s{8, 2, 256, 128};
    const auto plan = qm::plan_layer<qm::layer_policy::naive_w4a4>(4, s, {8, 2});
    REQUIRE(plan.valid);
    dbuf ws(plan.workspace_bytes);
    CHECK(qm::forward(plan, {}, {}, {}, ws.get(), nullptr) == cudaErrorInvalidValue);
    CHECK(!qm::plan_layer<qm::layer_policy::naive_w4a4>(4, s, {8, 3}).valid);
    // the tiled pair form: W4A4 policies only, H and I multiples of 128
    const moe_test::problem p = moe_test::make_problem(s, 4, 7);
    const moe_test::device_problem d(p);
    qm::layer_weights_view wv = d.w;
    wv.form = qm::expert_weight_form::tiled_pair;
    dbuf out(4 * 256 * 2);
    const qm::layer_io io{d.x_bf16(), d.logits.get<float>(), out.get<__nv_bfloat16>(), nullptr,
                          nullptr};
    const auto p16 = qm::plan_layer<qm::layer_policy::w4a16>(4, s, {8, 2});
    dbuf ws16(p16.workspace_bytes);
    CHECK(qm::forward(p16, wv, d.num, io, ws16.get(), nullptr) == cudaErrorInvalidValue);
    CHECK(std::string(quads::kernels::last_error_message()).find("W4A4 policy") !=
          std::string::npos);
    const qm::layer_shape s96{8, 2, 256, 96};
    const auto p96 = moe_test::make_problem(s96, 4, 7);
    const moe_test::device_problem d96(p96);
    qm::layer_weights_view wv96 = d96.w;
    wv96.form = qm::expert_weight_form::tiled_pair;
    const auto plan96 = qm::plan_layer<qm::layer_policy::naive_w4a4>(4, s96, {8, 2});
    dbuf ws96(plan96.workspace_bytes);
    const qm::layer_io io96{d96.x_bf16(), d96.logits.get<float>(), out.get<__nv_bfloat16>(),
                            nullptr, nullptr};
    CHECK(qm::forward(plan96, wv96, d96.num, io96, ws96.get(), nullptr) == cudaErrorInvalidValue);
    CHECK(std::string(quads::kernels::last_error_message()).find("multiples of 128") !=
          std::string::npos);
  }

} // TEST_SUITE
