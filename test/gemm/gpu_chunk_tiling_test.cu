// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GPU tests of chunk-tiled NVFP4 weights (quads/gemm/chunk_tiling.{hpp,cuh}): the device
//!        tiler is byte-identical to the host's, and the decode GEMM on tiled weights (plain
//!        NVFP4 with bf16 lanes, pair-coded with fp16 lanes; W4A4 and W4A4 + RAC (b)) gives
//!        bit for bit the output of the same call on the untiled weights (the tiling only moves
//!        bytes; the kernel's arithmetic and summation order are the same), which the accuracy
//!        suite checks against the float64 reference; the same for the grouped GEMM on tiled
//!        expert stacks (4-, 8- and 16-row m-tiles). Shapes the tiling does not cover are refused.
#include "gemm_fixtures.hpp"
#include "gpu_helpers.cuh"

#include <quads/gemm/chunk_tiling.cuh>
#include <quads/gemm/decode.cuh>
#include <quads/gemm/grouped.cuh>

#include <quads/epilogue/epilogue.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace qe = quads::epilogue;
namespace qg = quads::gemm;
namespace qt = quads_gemm_test;

namespace {

using epi_alpha = qe::chain<qe::scale_alpha, qe::store<float>>;

struct shape {
  int M, N, K;
};
const shape shapes[] = {{1, 272, 384},  {3, 400, 1152}, {7, 528, 1024},
                        {16, 1024, 640}, {64, 128, 2048}, {17, 96, 256}};

//! The quantized weight as uploaded for base format `B` (pair-coded on the host if asked), and
//! its tiled copy made on the host.
template <class B>
struct weights {
  std::vector<std::uint8_t> codes, scales, tiled_codes, tiled_scales;
  weights(const quads::reference::quantized_tensor<quads::nvfp4>& q, int N, int K)
      : codes(q.data), scales(q.scales), tiled_codes(q.data.size()), tiled_scales(q.scales.size()) {
    if constexpr (qg::is_pair_coded<B>) qg::encode_pair_coded(codes, codes);
    qg::tile_chunks(codes, scales, tiled_codes, tiled_scales, N, K);
  }
};

//! Every element of `tiled` has the bits of `untiled`, and the output is not all zero.
void check_same_bits(const std::vector<float>& untiled, const std::vector<float>& tiled) {
  bool nonzero = false;
  for (std::size_t i = 0; i < untiled.size(); ++i) {
    std::uint32_t b0, b1;
    std::memcpy(&b0, &untiled[i], 4);
    std::memcpy(&b1, &tiled[i], 4);
    if (b0 != b1) FAIL("element " << i << ": untiled " << untiled[i] << " tiled " << tiled[i]);
    nonzero = nonzero || untiled[i] != 0.0f;
  }
  CHECK(nonzero);
}

template <class Lane, class B, class Act>
void compare(const shape& s, const weights<B>& w, const Act& a, const quads::tensor_scale* ts,
             const std::string& what) {
  qt::dbuf<std::uint8_t> dc(w.codes), dsc(w.scales), tc(w.tiled_codes), tsc(w.tiled_scales);
  for (const int splits : {0, 3}) {
    const auto plan = qg::plan_decode(s.M, s.N, s.K, false, {splits, qg::reduction::deterministic},
                                      qt::device_sms());
    qt::dbuf<std::uint8_t> ws(plan.workspace_bytes);
    qt::dbuf<float> y0(static_cast<std::size_t>(s.M) * s.N), y1(static_cast<std::size_t>(s.M) * s.N);
    auto args = [&](float* y) {
      return epi_alpha::arguments{{.a = ts, .a_mode = qe::scale_source::tensor, .w = ts + 1,
                                   .w_mode = qe::scale_source::tensor},
                                  {y, s.N}};
    };
    QUADS_GEMM_CHECK((qg::decode_gemm<Lane, epi_alpha>(plan, qg::fp4_weights<B>{dc.ptr, dsc.ptr}, a,
                                                       args(y0.ptr), ws.ptr, nullptr)));
    QUADS_GEMM_CHECK((qg::decode_gemm<Lane, epi_alpha>(
        plan, qg::fp4_weights<qg::chunk_tiled<B>>{tc.ptr, tsc.ptr}, a, args(y1.ptr), ws.ptr, nullptr)));
    qt::sync_ok();
    const auto h0 = y0.download(y0.n), h1 = y1.download(y1.n);
    INFO(what << " M=" << s.M << " N=" << s.N << " K=" << s.K << " splits=" << plan.splits);
    check_same_bits(h0, h1);
  }
}

template <class Lane, class B>
void tiled_cases(const char* name) {
  auto g = quads_test::rng(std::string("gemm.gpu.chunk_tiling.") + name);
  for (const shape s : shapes) {
    const auto wq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
    const weights<B> w(wq, s.N, s.K);
    // W4A4
    const auto aq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.M, s.K), s.M, s.K);
    qt::dbuf<std::uint8_t> ad(aq.data), as(aq.scales);
    const std::vector<quads::tensor_scale> ts_h{aq.tensor_scales[0], wq.tensor_scales[0]};
    qt::dbuf<quads::tensor_scale> ts(ts_h);
    compare<Lane, B>(s, w, qg::fp4_activations<quads::nvfp4>{ad.ptr, as.ptr}, ts.ptr,
                     std::string("w4a4 ") + name);
    // W4A4 + RAC (b), shared residual scale, ~50 % of the blocks
    const auto rac = qt::make_rac(qt::random_matrix(g, s.M, s.K), s.M, s.K, 2, 1,
                                  quads::compensation::residual_scale::shared);
    qt::dbuf<std::uint8_t> rd(rac.act.data), rs(rac.act.scales);
    qt::dbuf<int> slot(rac.sel.slot_table());
    compare<Lane, B>(s, w,
                     qg::rac_activations<quads::nvfp4>{rd.ptr, rs.ptr, slot.ptr, rac.sel.selected,
                                                       quads::compensation::residual_scale::shared},
                     ts.ptr, std::string("rac shared ") + name);
  }
}

//! Grouped GEMM on a tiled expert stack against the same call on the untiled stack, bit for bit,
//! for routings whose streaming m-tiles have 4, 8 and 16 rows (each with an expert spanning more
//! than one m-tile); W4A4 and W4A4 + RAC (b) with one shared slot table.
template <class Lane, class B>
void grouped_tiled_cases(const char* name) {
  auto g = quads_test::rng(std::string("gemm.gpu.chunk_tiling.grouped.") + name);
  constexpr int E = 6, N = 272, K = 384;
  const auto wq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, E * N, K), E * N, K);
  std::vector<std::uint8_t> codes(wq.data), tcodes(codes.size()), tscales(wq.scales.size());
  if constexpr (qg::is_pair_coded<B>) qg::encode_pair_coded(codes, codes);
  qg::tile_chunks(codes, wq.scales, tcodes, tscales, N, K, E);
  qt::dbuf<std::uint8_t> dc(codes), dsc(wq.scales), tc(tcodes), tsc(tscales);
  struct routing_case {
    std::vector<int> rows;
    int slack, tile;
  };
  const routing_case cases[] = {
      {{0, 1, 0, 6, 1, 0}, 0, 4}, {{3, 0, 9, 0, 0, 2}, 4, 8}, {{20, 0, 5, 9, 0, 1}, 0, 16}};
  for (const auto& rc : cases) {
    std::vector<int> off{0};
    for (int r : rc.rows)
      off.push_back(off.back() + r);
    const int max_rows = off.back() + rc.slack;
    qt::dbuf<int> doff(off);
    auto run = [&](const auto& a, const quads::tensor_scale* ts, const std::string& what) {
      for (const int splits : {0, 3}) {
        const auto plan = qg::plan_grouped(
            max_rows, N, K, E, false, {splits, qg::reduction::deterministic}, qt::device_sms());
        REQUIRE(plan.stream_tile_rows == rc.tile);
        qt::dbuf<std::uint8_t> ws(plan.workspace_bytes);
        qt::dbuf<float> y0(static_cast<std::size_t>(max_rows) * N, 0),
            y1(static_cast<std::size_t>(max_rows) * N, 0);
        auto args = [&](float* y) {
          return epi_alpha::arguments{{.a = ts,
                                       .a_mode = qe::scale_source::tensor,
                                       .w = ts + 1,
                                       .w_mode = qe::scale_source::tensor},
                                      {y, N}};
        };
        QUADS_GEMM_CHECK(
            (qg::grouped_gemm<Lane, epi_alpha>(plan, qg::fp4_expert_weights<B>{dc.ptr, dsc.ptr, E},
                                               a, doff.ptr, args(y0.ptr), ws.ptr, nullptr)));
        QUADS_GEMM_CHECK((qg::grouped_gemm<Lane, epi_alpha>(
            plan, qg::fp4_expert_weights<qg::chunk_tiled<B>>{tc.ptr, tsc.ptr, E}, a, doff.ptr,
            args(y1.ptr), ws.ptr, nullptr)));
        qt::sync_ok();
        const auto h0 = y0.download(y0.n), h1 = y1.download(y1.n);
        INFO(what << " tile rows " << rc.tile << " rows " << off.back() << " splits "
                  << plan.splits);
        check_same_bits(h0, h1);
      }
    };
    const auto aq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, max_rows, K), max_rows, K);
    qt::dbuf<std::uint8_t> ad(aq.data), as(aq.scales);
    const std::vector<quads::tensor_scale> ts_h{aq.tensor_scales[0], wq.tensor_scales[0]};
    qt::dbuf<quads::tensor_scale> ts(ts_h);
    run(qg::fp4_activations<quads::nvfp4>{ad.ptr, as.ptr}, ts.ptr, std::string("w4a4 ") + name);
    const auto rac = qt::make_rac(qt::random_matrix(g, max_rows, K), max_rows, K, 2, 1,
                                  quads::compensation::residual_scale::shared);
    qt::dbuf<std::uint8_t> rd(rac.act.data), rs(rac.act.scales);
    qt::dbuf<int> slot(rac.sel.slot_table());
    run(qg::rac_activations<quads::nvfp4>{rd.ptr, rs.ptr, slot.ptr, rac.sel.selected,
                                          quads::compensation::residual_scale::shared},
        ts.ptr, std::string("rac shared ") + name);
  }
}

} // namespace

TEST_SUITE("gemm.gpu.chunk_tiling") {

TEST_CASE("sm90: the device tiler is byte-identical to the host's (one matrix and an expert stack)") {
  auto g = quads_test::rng("gemm.gpu.chunk_tiling.device");
  std::uniform_int_distribution<int> d(0, 255);
  for (const auto [E, N, K] : {std::array{1, 4096, 1024}, std::array{3, 48, 384}}) {
    std::vector<std::uint8_t> c(static_cast<std::size_t>(E) * N * K / 2),
        s(static_cast<std::size_t>(E) * N * K / 16);
    for (auto& b : c) b = static_cast<std::uint8_t>(d(g));
    for (auto& b : s) b = static_cast<std::uint8_t>(d(g));
    std::vector<std::uint8_t> wc(c.size()), wsc(s.size());
    qg::tile_chunks(c, s, wc, wsc, N, K, E);
    qt::dbuf<std::uint8_t> dc(c), ds(s), oc(c.size()), os(s.size());
    QUADS_GEMM_CHECK(qg::tile_chunks_async(dc.ptr, ds.ptr, oc.ptr, os.ptr, N, K, E, nullptr));
    qt::sync_ok();
    CHECK(oc.download(c.size()) == wc);
    CHECK(os.download(s.size()) == wsc);
  }
  qt::dbuf<std::uint8_t> b(4096);
  CHECK(qg::tile_chunks_async(b.ptr, b.ptr, b.ptr, b.ptr, 40, 128, 1, nullptr) == cudaErrorInvalidValue);
  CHECK(qg::tile_chunks_async(b.ptr, b.ptr, b.ptr, b.ptr, 16, 96, 1, nullptr) == cudaErrorInvalidValue);
  CHECK(qg::tile_chunks_async(b.ptr + 4, b.ptr, b.ptr, b.ptr, 16, 128, 1, nullptr) == cudaErrorInvalidValue);
}

TEST_CASE("sm90: decode on chunk-tiled NVFP4 weights (bf16 lanes) equals decode on the untiled weights bit for bit") {
  tiled_cases<qg::bf16_lane, quads::nvfp4>("bf16");
}

TEST_CASE("sm90: decode on chunk-tiled pair-coded weights (fp16 lanes) equals decode on the untiled weights bit for bit") {
  tiled_cases<qg::fp16_lane, qg::pair_coded<quads::nvfp4>>("pair");
}

TEST_CASE("sm90: grouped GEMM on chunk-tiled expert stacks equals the untiled call bit for bit") {
  grouped_tiled_cases<qg::bf16_lane, quads::nvfp4>("bf16");
  grouped_tiled_cases<qg::fp16_lane, qg::pair_coded<quads::nvfp4>>("pair");
}

TEST_CASE("sm90: decode_gemm and grouped_gemm refuse chunk-tiled weights they cannot read") {
  qt::dbuf<std::uint8_t> b(1 << 20);
  qt::dbuf<quads::tensor_scale> ts(2);
  qt::dbuf<float> y(1 << 12);
  const epi_alpha::arguments args{{.a = ts.ptr, .a_mode = qe::scale_source::tensor, .w = ts.ptr,
                                   .w_mode = qe::scale_source::tensor},
                                  {y.ptr, 40}};
  const qg::fp4_weights<qg::chunk_tiled<quads::nvfp4>> w{b.ptr, b.ptr};
  const qg::fp4_activations<quads::nvfp4> a{b.ptr, b.ptr};
  qt::dbuf<std::uint8_t> ws(1 << 20);
  // N % 16 != 0
  auto plan = qg::plan_decode(1, 40, 256, false);
  CHECK((qg::decode_gemm<qg::bf16_lane, epi_alpha>(plan, w, a, args, ws.ptr, nullptr)) ==
        cudaErrorInvalidValue);
  CHECK(std::string(quads::kernels::last_error_message()).find("multiple of 16") != std::string::npos);
  // K % 128 != 0
  const epi_alpha::arguments args48{{.a = ts.ptr, .a_mode = qe::scale_source::tensor, .w = ts.ptr,
                                     .w_mode = qe::scale_source::tensor},
                                    {y.ptr, 48}};
  plan = qg::plan_decode(1, 48, 208, false);
  CHECK((qg::decode_gemm<qg::bf16_lane, epi_alpha>(plan, w, a, args48, ws.ptr, nullptr)) ==
        cudaErrorInvalidValue);
  // more splits than a cluster holds: the fallback kernel, which reads row-major weights
  plan = qg::plan_decode(1, 48, 16384, false, {16, qg::reduction::deterministic});
  REQUIRE(plan.splits > qg::stream_layout::max_splits);
  CHECK((qg::decode_gemm<qg::bf16_lane, epi_alpha>(plan, w, a, args48, ws.ptr, nullptr)) ==
        cudaErrorInvalidValue);
  CHECK(std::string(quads::kernels::last_error_message()).find("streaming kernel") != std::string::npos);
  // grouped: the persistent kernel reads row-major weights; N % 16 != 0 as for decode_gemm
  qt::dbuf<int> off(std::vector<int>{0, 1, 2});
  auto gplan = qg::plan_grouped(2, 48, 256, 2, false);
  gplan.kernel = qg::grouped_kernel::persistent;
  const qg::fp4_expert_weights<qg::chunk_tiled<quads::nvfp4>> we{b.ptr, b.ptr, 2};
  CHECK((qg::grouped_gemm<qg::bf16_lane, epi_alpha>(gplan, we, a, off.ptr, args48, ws.ptr,
                                                    nullptr)) == cudaErrorInvalidValue);
  CHECK(std::string(quads::kernels::last_error_message()).find("streaming kernel") !=
        std::string::npos);
  gplan = qg::plan_grouped(2, 40, 256, 2, false);
  CHECK((qg::grouped_gemm<qg::bf16_lane, epi_alpha>(gplan, we, a, off.ptr, args, ws.ptr,
                                                    nullptr)) == cudaErrorInvalidValue);
  CHECK(std::string(quads::kernels::last_error_message()).find("multiple of 16") !=
        std::string::npos);
}
}
