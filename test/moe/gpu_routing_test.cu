// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GPU routing vs the host reference: indices, offsets, row maps exactly; weights bit for
//!        bit; random logits (seeded) and adversarial ones, every path (fused, single-CTA, CUB).
#include <doctest/doctest.h>

#include "gpu_helpers.cuh"

#include <quads/moe/routing.cuh>

#include <test_support/seed.hpp>

#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace qm = quads::moe;
using moe_test::dbuf;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

//! Routes on the device (optionally through a captured CUDA graph) and compares with the host.
void check_device_routing(const std::vector<float>& logits, int T, const qm::routing_config& cfg,
                          bool graph = false) {
  const auto want = qm::route(logits, T, cfg);
  const int n = T * cfg.top_k;
  const auto plan = qm::plan_routing(T, cfg);
  dbuf dl = moe_test::upload(logits);
  dbuf te(4 * n + 4), tw(4 * n + 4), off(4 * (cfg.experts + 1)), rop(4 * n + 4), por(4 * n + 4),
      eor(4 * n + 4), wor(4 * n + 4), ws(plan.workspace_bytes + 256);
  // with the m-tile table of the grouped GEMMs over these rows (every call: each path writes it)
  const auto gemm_plan = quads::gemm::plan_grouped(n, 256, 256, cfg.experts, false);
  dbuf tiles(sizeof(quads::gemm::grouped_m_tile) * gemm_plan.stream_m_tiles);
  MOE_CUDA_OK(
      cudaMemset(tiles.get(), 0x5A, sizeof(quads::gemm::grouped_m_tile) * gemm_plan.stream_m_tiles));
  qm::routing_view v{te.get<int>(),  tw.get<float>(), off.get<int>(),  rop.get<int>(),
                     por.get<int>(), eor.get<int>(),  wor.get<float>(),
                     quads::gemm::m_tile_table_for(gemm_plan, tiles.get<quads::gemm::grouped_m_tile>())};
  cudaStream_t s;
  MOE_CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  MOE_CUDA_OK(cudaDeviceSynchronize());  // the logits' pageable upload (legacy stream) landed
  if (graph) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    MOE_CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    MOE_CUDA_OK(qm::route(plan, dl.get<float>(), v, ws.get(), s));
    MOE_CUDA_OK(cudaStreamEndCapture(s, &g));
    MOE_CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    MOE_CUDA_OK(cudaGraphLaunch(ge, s));
    MOE_CUDA_OK(cudaGraphLaunch(ge, s));
    MOE_CUDA_OK(cudaStreamSynchronize(s));
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
  } else {
    MOE_CUDA_OK(qm::route(plan, dl.get<float>(), v, ws.get(), s));
    MOE_CUDA_OK(cudaStreamSynchronize(s));
  }
  cudaStreamDestroy(s);
  CAPTURE(T);
  CAPTURE(cfg.experts);
  CAPTURE(cfg.top_k);
  CAPTURE(plan.fused);
  CAPTURE(plan.single_cta);
  CHECK(moe_test::download<int>(te.get(), n) == want.topk_expert);
  CHECK(same_bits(moe_test::download<float>(tw.get(), n), want.topk_weight));
  CHECK(moe_test::download<int>(off.get(), cfg.experts + 1) == want.offsets);
  CHECK(moe_test::download<int>(rop.get(), n) == want.row_of_pair);
  CHECK(moe_test::download<int>(por.get(), n) == want.pair_of_row);
  CHECK(moe_test::download<int>(eor.get(), n) == want.expert_of_row);
  CHECK(same_bits(moe_test::download<float>(wor.get(), n), want.weight_of_row));
  std::vector<quads::gemm::grouped_m_tile> want_tiles(
      static_cast<std::size_t>(gemm_plan.stream_m_tiles));
  quads::gemm::fill_m_tile_table(want.offsets.data(), cfg.experts, n, gemm_plan.stream_tile_rows,
                                 gemm_plan.stream_m_tiles, want_tiles.data());
  const auto got_tiles = moe_test::download<quads::gemm::grouped_m_tile>(
      tiles.get(), gemm_plan.stream_m_tiles);
  CHECK(std::memcmp(got_tiles.data(), want_tiles.data(),
                    want_tiles.size() * sizeof(want_tiles[0])) == 0);
}

} // namespace

TEST_SUITE("moe.routing.gpu") {

  TEST_CASE("GPU routing equals the host bit for bit on random logits (every path)") {
    auto g = quads_test::rng("moe.gpu.routing");
    std::normal_distribution<float> nd(0.0f, 2.0f);
    const int shapes[][2] = {{8, 2}, {16, 1}, {128, 8}, {256, 8}, {60, 4}, {1000, 32}};
    for (const auto& sh : shapes)
      for (int T : {1, 3, 8, 9, 16, 64, 65, 256, 257, 300, 1024, 4096}) {
        if (sh[0] == 1000 && T > 300) continue;
        for (auto score : {qm::scoring::softmax, qm::scoring::sigmoid}) {
          std::vector<float> l(static_cast<std::size_t>(T) * sh[0]);
          for (auto& v : l)
            v = nd(g);
          const bool renorm = (g() & 1) != 0;
          check_device_routing(l, T, {sh[0], sh[1], score, renorm, renorm ? 1.0f : 2.5f});
        }
      }
  }

  TEST_CASE("GPU routing: ties, all-equal, -0, NaN and -inf logits, empty experts") {
    const float nan_v = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    auto g = quads_test::rng("moe.gpu.routing.adv");
    // E = 64, 256, 1000: the 4, 8 and 32 keys per lane of the warp top-k; T = 1, 5: the decode
    // kernel's 256-thread CTA, T = 16: its 1024-thread CTA (E <= 256) or a cluster of two
    // 256-thread CTAs (E = 1000); T = 300: the top-k kernel + a sort
    for (const auto& [E, k] : {std::pair{64, 6}, std::pair{256, 8}, std::pair{1000, 32}})
      for (int T : {1, 5, 16, 300}) {
        std::vector<float> l(static_cast<std::size_t>(T) * E);
        for (int t = 0; t < T; ++t)
          for (int e = 0; e < E; ++e) {
            float v = static_cast<float>(static_cast<int>(g() % 5)) * 0.5f; // many exact ties
            const int kind = static_cast<int>(g() % 23);
            if (kind == 0) v = nan_v;
            if (kind == 1) v = -inf;
            if (kind == 2) v = -0.0f;
            if (kind == 3 && t % 5 == 0) v = inf;
            if (t % 7 == 3) v = 1.0f;                  // a row of equal logits
            if (t % 11 == 5) v = e % 2 ? -inf : nan_v; // only -inf and NaN: uniform softmax
            if (t % 13 == 4) v = nan_v;                // only NaN: NaN keys win, by index
            l[static_cast<std::size_t>(t) * E + e] = v;
          }
        for (auto score : {qm::scoring::softmax, qm::scoring::sigmoid})
          check_device_routing(l, T, {E, k, score, true, 1.0f});
      }
    // boundary of the single-CTA path: T * k = 2048 and 2049 pairs
    std::normal_distribution<float> nd;
    for (int T : {256, 2049}) {
      const int k = T == 256 ? 8 : 1;
      std::vector<float> l(static_cast<std::size_t>(T) * 32);
      for (auto& v : l)
        v = nd(g);
      check_device_routing(l, T, {32, k, qm::scoring::softmax, true, 1.0f});
    }
  }

  TEST_CASE("GPU routing is graph-capturable on every path (capture, replay twice)") {
    auto g = quads_test::rng("moe.gpu.routing.graph");
    std::normal_distribution<float> nd;
    for (int T : {4, 200, 4096}) {
      std::vector<float> l(static_cast<std::size_t>(T) * 128);
      for (auto& v : l)
        v = nd(g);
      check_device_routing(l, T, {128, 8, qm::scoring::softmax, true, 1.0f}, true);
    }
  }

  TEST_CASE("GPU routing refuses bad arguments without launching") {
    const auto plan = qm::plan_routing(4, {8, 2});
    qm::routing_view v{};
    CHECK(qm::route(plan, nullptr, v, nullptr, nullptr) == cudaErrorInvalidValue);
    CHECK(qm::route(qm::plan_routing(4, {8, 9}), nullptr, v, nullptr, nullptr) ==
          cudaErrorInvalidValue);
    dbuf tiles(64);
    v.m_tiles = {reinterpret_cast<quads::gemm::grouped_m_tile*>(tiles.get<char>() + 4), 4, 2};
    CHECK(qm::route(plan, nullptr, v, nullptr, nullptr) == cudaErrorInvalidValue);
    CHECK(std::string(quads::kernels::last_error_message()).find("m_tiles") != std::string::npos);
  }

} // TEST_SUITE
