// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GPU tests of the wgmma prefill GEMM (quads/gemm/prefill.cuh): the activation pre-pass
//!        bit for bit, emulated W4A4 / W4A16 against the float64 host reference within the
//!        fp32-summation tolerance, the bf16 store, and the launcher's refusals.
//!        Exits 77 (SKIP) without an sm_90 GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "gemm_fixtures.hpp"
#include "gpu_helpers.cuh"

#include <quads/gemm/prefill.cuh>

#include <quads/epilogue/epilogue.hpp>
#include <quads/gemm/reference.hpp>

#include <test_support/gpu_main.hpp>
#include <test_support/seed.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace qe = quads::epilogue;
namespace qg = quads::gemm;
namespace qgr = quads::gemm::reference;
namespace qt = quads_gemm_test;

namespace {

using epi_f32 = qe::chain<qe::scale_alpha, qe::store<float>>;
using epi_bf16 = qe::chain<qe::scale_alpha, qe::store<__nv_bfloat16>>;

struct shape {
  int M, N, K;
};
std::string label(const char* what, shape s) {
  return std::string(what) + " M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) +
         " K=" + std::to_string(s.K);
}

template <class Format>
struct dev_tensor {
  qt::dbuf<std::uint8_t> data, scales;
  qt::dbuf<quads::tensor_scale> ts;
  explicit dev_tensor(const quads::reference::quantized_tensor<Format>& q)
      : data(q.data), scales(q.scales), ts(q.tensor_scales) {}
};

std::vector<double> abs_alpha(const qgr::accumulators& acc, const qe::alpha_source& a) {
  std::vector<double> out(acc.acc.size());
  for (int m = 0; m < acc.rows; ++m)
    for (int n = 0; n < acc.cols; ++n)
      out[acc.index(m, n)] = std::fabs(qgr::alpha_at(a, m, n));
  return out;
}

//! Runs prefill_gemm<epi_f32> and checks against the reference; returns y.
template <class WF, class Act>
std::vector<float> run_checked(shape s, const qg::fp4_weights<WF>& w, const Act& a,
                               const quads::tensor_scale* d_ts_a, const quads::tensor_scale* d_ts_w,
                               const qgr::accumulators& acc, const qe::alpha_source& host_alpha,
                               const std::string& what, int depth = 1) {
  const auto plan = qg::plan_prefill(s.M, s.N, s.K, depth);
  qt::dbuf<std::uint8_t> ws(plan.workspace_bytes);
  qt::dbuf<float> y(static_cast<std::size_t>(s.M) * s.N);
  const epi_f32::arguments args{
      {.a = d_ts_a,
       .a_mode = d_ts_a ? qe::scale_source::tensor : qe::scale_source::none,
       .w = d_ts_w,
       .w_mode = qe::scale_source::tensor},
      {y.ptr, s.N}};
  QUADS_GEMM_CHECK((qg::prefill_gemm<epi_f32>(plan, w, a, args, ws.ptr, nullptr)));
  qt::sync_ok();
  auto out = y.download(static_cast<std::size_t>(s.M) * s.N);
  qt::check_scaled(out, qgr::scaled(acc, host_alpha), acc, abs_alpha(acc, host_alpha), 1, what);
  return out;
}

std::vector<shape> w4a4_shapes() {
  // N: odd multiples of 16 (tails of the 128-row weight tile); K: odd multiples of 64 (the
  // k-tile), 1088 = 17 tiles wraps the 6-stage ring; M: tails of the 256-token tile.
  return {{256, 144, 192}, {256, 528, 1088}, {4096, 144, 320}, {4096, 272, 1088},
          {1, 144, 192},   {3, 400, 64},     {300, 16, 576},   {1000, 1168, 320}};
}

} // namespace

TEST_SUITE("gemm.prefill") {

  TEST_CASE("the pre-pass writes each activation lane at prefill_position, bit for bit") {
    auto g = quads_test::rng("gemm.prefill.prepass");
    const int M = 5, K = 320;
    const auto aq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, M, K), M, K);
    dev_tensor<quads::nvfp4> da(aq);
    const auto plan = qg::plan_prefill(M, 16, K);
    qt::dbuf<std::uint8_t> ws(plan.workspace_bytes);
    qg::prefill_activations prep{};
    QUADS_GEMM_CHECK(
        qg::prefill_prepare(plan, qg::fp4_activations<quads::nvfp4>{da.data.ptr, da.scales.ptr},
                            ws.ptr, &prep, nullptr));
    qt::sync_ok();
    CHECK(prep.fold_log2 == 7);
    std::vector<std::uint16_t> got(static_cast<std::size_t>(M) * K);
    REQUIRE(cudaMemcpy(got.data(), ws.ptr, got.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
    using L = qg::fp4_loader<quads::nvfp4, qg::bf16_lane>;
    int bad = 0;
    for (int m = 0; m < M; ++m)
      for (int k = 0; k < K; ++k) {
        const std::uint8_t byte = aq.data[(static_cast<std::size_t>(m) * K + k) / 2];
        const std::uint8_t code = (k % 2 == 0) ? (byte & 0xf) : (byte >> 4);
        const float want =
            L::dequant_one(code, aq.scales[static_cast<std::size_t>(m) * (K / 16) + k / 16]);
        const std::uint16_t bits = got[static_cast<std::size_t>(m) * K + qg::prefill_position(k)];
        // bits, so -0 (code 8) must come out as -0
        if (bits != quads::detail::float_to_bf16_bits(want) && bad++ < 5)
          FAIL_CHECK("m " << m << " k " << k << " got " << quads::detail::bf16_bits_to_float(bits)
                          << " want " << want);
      }
    CHECK(bad == 0);
    // prefill_position is a permutation of each group of 64.
    std::vector<int> seen(64, 0);
    for (int k = 0; k < 64; ++k)
      ++seen[qg::prefill_position(k)];
    for (int k = 0; k < 64; ++k)
      CHECK(seen[k] == 1);
    CHECK(qg::prefill_position(64 + 5) == 64 + qg::prefill_position(5));
  }

  TEST_CASE("tiny W4A4 (one CTA, 1-3 k-tiles): every output element, with a map of the misses") {
    auto g = quads_test::rng("gemm.prefill.tiny");
    for (const shape s : {shape{16, 16, 64}, shape{8, 32, 128}, shape{8, 32, 192}})
      for (const int depth : {1, 2}) {
        const auto wq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
        const auto aq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.M, s.K), s.M, s.K);
        const auto acc = qgr::w4a4(aq, wq);
        dev_tensor<quads::nvfp4> dw(wq), da(aq);
        const auto plan = qg::plan_prefill(s.M, s.N, s.K, depth);
        qt::dbuf<std::uint8_t> ws(plan.workspace_bytes);
        qt::dbuf<float> y(static_cast<std::size_t>(s.M) * s.N);
        const epi_f32::arguments args{{}, {y.ptr, s.N}}; // alpha = 1: the raw accumulator
        QUADS_GEMM_CHECK((qg::prefill_gemm<epi_f32>(
            plan, qg::fp4_weights<quads::nvfp4>{dw.data.ptr, dw.scales.ptr},
            qg::fp4_activations<quads::nvfp4>{da.data.ptr, da.scales.ptr}, args, ws.ptr, nullptr)));
        qt::sync_ok();
        const auto out = y.download(static_cast<std::size_t>(s.M) * s.N);
        int bad = 0;
        std::string map;
        for (int m = 0; m < s.M; ++m) {
          for (int n = 0; n < s.N; ++n) {
            const std::size_t o = acc.index(m, n);
            const double tol = qgr::tolerance(acc, m, n, 1) + 1e-30;
            const bool ok = std::fabs(out[o] - acc.acc[o]) <= tol;
            bad += ok ? 0 : 1;
            map += ok ? '.' : (out[o] == 0.0f ? '0' : 'x');
          }
          map += '\n';
        }
        if (bad > 0) {
          MESSAGE(label("tiny", s)
                  << " mma_depth " << depth << ": " << bad << " misses (rows m, columns n):\n"
                  << map << "y[0][0..3] = " << out[0] << " " << out[1] << " " << out[2] << " "
                  << out[3] << "; want " << acc.acc[0] << " " << acc.acc[1] << " " << acc.acc[2]
                  << " " << acc.acc[3]);
        }
        CHECK(bad == 0);
      }
  }

  TEST_CASE("emulated W4A4 NVFP4 matches the float64 reference within fp32 summation error") {
    auto g = quads_test::rng("gemm.prefill.w4a4");
    for (const shape s : w4a4_shapes()) {
      const auto wq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
      const auto aq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.M, s.K), s.M, s.K);
      const auto acc = qgr::w4a4(aq, wq);
      const qe::alpha_source host_alpha{.a = aq.tensor_scales.data(),
                                        .a_mode = qe::scale_source::tensor,
                                        .w = wq.tensor_scales.data(),
                                        .w_mode = qe::scale_source::tensor};
      dev_tensor<quads::nvfp4> dw(wq), da(aq);
      for (const int depth : {1, 2})
        run_checked(s, qg::fp4_weights<quads::nvfp4>{dw.data.ptr, dw.scales.ptr},
                    qg::fp4_activations<quads::nvfp4>{da.data.ptr, da.scales.ptr}, da.ts.ptr,
                    dw.ts.ptr, acc, host_alpha,
                    label(depth == 1 ? "w4a4 nvfp4" : "w4a4 nvfp4 mma_depth 2", s), depth);
    }
  }

  TEST_CASE("per-token and per-column alpha run the generic element epilogue correctly") {
    // scale_source::row / col make alpha vary per element, so the kernel takes the per-element
    // chain path instead of the uniform-alpha fast path of scale_alpha + store.
    auto g = quads_test::rng("gemm.prefill.alpha_rowcol");
    std::uniform_real_distribution<float> u(0.25f, 4.0f);
    const shape s{300, 272, 192};
    const auto wq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
    const auto aq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.M, s.K), s.M, s.K);
    const auto acc = qgr::w4a4(aq, wq);
    std::vector<quads::tensor_scale> rows(s.M), cols(s.N);
    for (auto& r : rows)
      r = quads::tensor_scale_from_decode(u(g));
    for (auto& c : cols)
      c = quads::tensor_scale_from_decode(u(g));
    for (const bool per_row : {true, false}) {
      const qe::alpha_source host_alpha{
          .alpha = 0.75f,
          .a = per_row ? rows.data() : aq.tensor_scales.data(),
          .a_mode = per_row ? qe::scale_source::row : qe::scale_source::tensor,
          .w = per_row ? wq.tensor_scales.data() : cols.data(),
          .w_mode = per_row ? qe::scale_source::tensor : qe::scale_source::col};
      dev_tensor<quads::nvfp4> dw(wq), da(aq);
      qt::dbuf<quads::tensor_scale> drows(rows), dcols(cols);
      const auto plan = qg::plan_prefill(s.M, s.N, s.K);
      qt::dbuf<std::uint8_t> ws(plan.workspace_bytes);
      qt::dbuf<float> y(static_cast<std::size_t>(s.M) * s.N);
      const epi_f32::arguments args{{.alpha = 0.75f,
                                     .a = per_row ? drows.ptr : da.ts.ptr,
                                     .a_mode = host_alpha.a_mode,
                                     .w = per_row ? dw.ts.ptr : dcols.ptr,
                                     .w_mode = host_alpha.w_mode},
                                    {y.ptr, s.N}};
      QUADS_GEMM_CHECK((qg::prefill_gemm<epi_f32>(
          plan, qg::fp4_weights<quads::nvfp4>{dw.data.ptr, dw.scales.ptr},
          qg::fp4_activations<quads::nvfp4>{da.data.ptr, da.scales.ptr}, args, ws.ptr, nullptr)));
      qt::sync_ok();
      qt::check_scaled(y.download(static_cast<std::size_t>(s.M) * s.N),
                       qgr::scaled(acc, host_alpha), acc, abs_alpha(acc, host_alpha), 1,
                       per_row ? "per-token alpha" : "per-column alpha");
    }
  }

  TEST_CASE("W4A16 (bf16 activations) and MXFP4 activations match the reference") {
    auto g = quads_test::rng("gemm.prefill.w4a16");
    for (const shape s : {shape{256, 144, 192}, shape{777, 400, 1088}}) {
      const auto wq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
      const auto d = qt::to_dense16<qg::bf16_lane>(qt::random_matrix(g, s.M, s.K));
      const auto acc = qgr::w4a16(std::span<const float>(d.values), s.M, wq);
      const qe::alpha_source host_alpha{.w = wq.tensor_scales.data(),
                                        .w_mode = qe::scale_source::tensor};
      dev_tensor<quads::nvfp4> dw(wq);
      qt::dbuf<std::uint16_t> da(d.bits);
      run_checked(
          s, qg::fp4_weights<quads::nvfp4>{dw.data.ptr, dw.scales.ptr},
          qg::dense_activations<qg::bf16_lane>{reinterpret_cast<const __nv_bfloat16*>(da.ptr)},
          nullptr, dw.ts.ptr, acc, host_alpha, label("w4a16 bf16", s));

      const auto aq = qt::quantize<quads::mxfp4>(qt::random_matrix(g, s.M, s.K), s.M, s.K);
      const auto acc_mx = qgr::w4a4(aq, wq);
      dev_tensor<quads::mxfp4> dam(aq);
      run_checked(s, qg::fp4_weights<quads::nvfp4>{dw.data.ptr, dw.scales.ptr},
                  qg::fp4_activations<quads::mxfp4>{dam.data.ptr, dam.scales.ptr}, nullptr,
                  dw.ts.ptr, acc_mx, host_alpha, label("w4 nvfp4 x a4 mxfp4", s));
    }
  }

  TEST_CASE("the bf16 store is the round-to-nearest-even of the fp32 result, bit for bit") {
    auto g = quads_test::rng("gemm.prefill.bf16");
    const shape s{513, 272, 576};
    const auto wq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
    const auto aq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.M, s.K), s.M, s.K);
    const auto acc = qgr::w4a4(aq, wq);
    const qe::alpha_source host_alpha{.a = aq.tensor_scales.data(),
                                      .a_mode = qe::scale_source::tensor,
                                      .w = wq.tensor_scales.data(),
                                      .w_mode = qe::scale_source::tensor};
    dev_tensor<quads::nvfp4> dw(wq), da(aq);
    const qg::fp4_weights<quads::nvfp4> w{dw.data.ptr, dw.scales.ptr};
    const qg::fp4_activations<quads::nvfp4> a{da.data.ptr, da.scales.ptr};
    const auto yf =
        run_checked(s, w, a, da.ts.ptr, dw.ts.ptr, acc, host_alpha, label("w4a4 f32", s));
    const auto plan = qg::plan_prefill(s.M, s.N, s.K);
    qt::dbuf<std::uint8_t> ws(plan.workspace_bytes);
    qt::dbuf<std::uint16_t> y(static_cast<std::size_t>(s.M) * s.N);
    const epi_bf16::arguments args{{.a = da.ts.ptr,
                                    .a_mode = qe::scale_source::tensor,
                                    .w = dw.ts.ptr,
                                    .w_mode = qe::scale_source::tensor},
                                   {reinterpret_cast<__nv_bfloat16*>(y.ptr), s.N}};
    QUADS_GEMM_CHECK((qg::prefill_gemm<epi_bf16>(plan, w, a, args, ws.ptr, nullptr)));
    qt::sync_ok();
    const auto yb = y.download(static_cast<std::size_t>(s.M) * s.N);
    int bad = 0;
    for (std::size_t i = 0; i < yb.size(); ++i)
      if (yb[i] != quads::detail::float_to_bf16_bits(yf[i]) && bad++ < 5)
        FAIL_CHECK("element " << i << ": bf16 " << yb[i] << " vs RNE(" << yf[i] << ")");
    CHECK(bad == 0);
  }

  TEST_CASE("a chain with a fragment node (SwiGLU) gets the same accumulators in fragments") {
    auto g = quads_test::rng("gemm.prefill.swiglu");
    const shape s{300, 272, 192};
    const auto wq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
    const auto aq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.M, s.K), s.M, s.K);
    dev_tensor<quads::nvfp4> dw(wq), da(aq);
    const qg::fp4_weights<quads::nvfp4> w{dw.data.ptr, dw.scales.ptr};
    const qg::fp4_activations<quads::nvfp4> a{da.data.ptr, da.scales.ptr};
    const auto plan = qg::plan_prefill(s.M, s.N, s.K);
    qt::dbuf<std::uint8_t> ws(plan.workspace_bytes);
    qt::dbuf<float> y(static_cast<std::size_t>(s.M) * s.N),
        z(static_cast<std::size_t>(s.M) * s.N / 2);
    QUADS_GEMM_CHECK((qg::prefill_gemm<epi_f32>(plan, w, a, epi_f32::arguments{{}, {y.ptr, s.N}},
                                                ws.ptr, nullptr)));
    using epi_swiglu = qe::chain<qe::swiglu<>, qe::store<float>>;
    QUADS_GEMM_CHECK((qg::prefill_gemm<epi_swiglu>(
        plan, w, a, epi_swiglu::arguments{{}, {z.ptr, s.N / 2}}, ws.ptr, nullptr)));
    qt::sync_ok();
    const auto yh = y.download(static_cast<std::size_t>(s.M) * s.N);
    const auto zh = z.download(static_cast<std::size_t>(s.M) * s.N / 2);
    int bad = 0;
    for (int m = 0; m < s.M; ++m)
      for (int j = 0; j < s.N / 2; ++j) {
        const std::size_t o = static_cast<std::size_t>(m) * s.N;
        const float want = qe::swiglu<>::silu(yh[o + 2 * j]) * yh[o + 2 * j + 1];
        const float have = zh[static_cast<std::size_t>(m) * (s.N / 2) + j];
        // exp differs by an ulp between host and device
        if (!(std::fabs(have - want) <= 1e-6f * std::fabs(want) + 1e-30f) && bad++ < 5)
          FAIL_CHECK("m " << m << " j " << j << ": " << have << " vs " << want);
      }
    CHECK(bad == 0);
  }

  TEST_CASE("the launcher refuses what it does not support, with a message, enqueuing nothing") {
    qt::dbuf<std::uint8_t> buf(1 << 20);
    qt::dbuf<float> y(1 << 16);
    const qg::fp4_weights<quads::nvfp4> w{buf.ptr, buf.ptr};
    const qg::fp4_activations<quads::nvfp4> a{buf.ptr, buf.ptr};
    const epi_f32::arguments args{{}, {y.ptr, 16}};
    auto refused = [&](qg::prefill_plan plan, const char* needle,
                       qg::fp4_weights<quads::nvfp4> ww) {
      const cudaError_t e = qg::prefill_gemm<epi_f32>(plan, ww, a, args, buf.ptr, nullptr);
      CHECK(e == cudaErrorInvalidValue);
      const std::string msg = quads::kernels::last_error_message();
      CHECK_MESSAGE(msg.find(needle) != std::string::npos, msg);
    };
    refused(qg::plan_prefill(16, 16, 80), "multiple of 64", w); // K tail: not supported
    refused(qg::plan_prefill(16, 16, 48), "multiple of 64", w);
    refused(qg::plan_prefill(0, 16, 64), "positive", w);
    refused(qg::plan_prefill(16, 16, 64, 3), "mma_depth", w);
    auto bad_plan = qg::plan_prefill(16, 16, 64);
    bad_plan.workspace_bytes = 0;
    refused(bad_plan, "plan", w);
    refused(qg::plan_prefill(16, 16, 64), "weight data",
            qg::fp4_weights<quads::nvfp4>{nullptr, buf.ptr});
    refused(qg::plan_prefill(16, 16, 64), "weight data",
            qg::fp4_weights<quads::nvfp4>{buf.ptr + 8, buf.ptr});
    const epi_f32::arguments bad_args{{}, {nullptr, 16}};
    CHECK(qg::prefill_gemm<epi_f32>(qg::plan_prefill(16, 16, 64), w, a, bad_args, buf.ptr,
                                    nullptr) == cudaErrorInvalidValue);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaGetLastError() == cudaSuccess);
  }

} // TEST_SUITE

int main(int argc, char** argv) {
  return quads_test::gpu_main(argc, argv, "prefill", {9, 9, "an sm_90 GPU (wgmma)"});
}
