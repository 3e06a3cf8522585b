// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GPU tests of the decode GEMM's accuracy: emulated W4A4 (NVFP4, bf16 and fp16 lanes;
//!        MXFP4), W4A16 and W4A4 + RAC (b) against the float64 host reference from the same
//!        quantized operands, within the fp32-summation tolerance of `reference::tolerance`, for
//!        M in {1, 3, 6, 16, 64, 256, 4096} (6: RAC's residual tile), N and K odd multiples of 16,
//!        both reductions.
#include "gemm_fixtures.hpp"
#include "gpu_helpers.cuh"

#include <quads/gemm/decode.cuh>
#include <quads/gemm/pair_coding.cuh>

#include <quads/compensation/reference.hpp>
#include <quads/epilogue/epilogue.hpp>
#include <quads/gemm/reference.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace qe = quads::epilogue;
namespace qg = quads::gemm;
namespace qgr = quads::gemm::reference;
namespace qt = quads_gemm_test;

namespace {

using epi_alpha = qe::chain<qe::scale_alpha, qe::store<float>>;
using epi_rac = qe::chain<qe::scale_alpha, qe::rac_residual, qe::store<float>>;

struct shape {
  int M, N, K;
};

//! QUADS_GPU_QUICK=1 (e.g. under compute-sanitizer) keeps M in {1, 16, 64} and the two smaller
//! weight shapes.
bool quick() {
  const char* e = std::getenv("QUADS_GPU_QUICK");
  return e != nullptr && *e != '\0' && *e != '0';
}

std::vector<shape> sweep() {
  std::vector<shape> s;
  const std::vector<int> ms = quick() ? std::vector<int>{1, 16, 64}
                                      : std::vector<int>{1, 3, 6, 16, 64, 256, 4096};
  for (int M : ms)
    for (const auto nk : {shape{0, 48, 80}, shape{0, 144, 528}, shape{0, 528, 2064}}) {
      if ((M >= 256 || quick()) && nk.K > 528) continue;  // keeps the float64 reference cheap
      s.push_back({M, nk.N, nk.K});
    }
  return s;
}

//! The split counts of the sweep's cases: the plan's (0) and 3.
const std::vector<int> sweep_splits = {0, 3};

//! |alpha(m, n)| for the tolerance.
std::vector<double> alpha_abs(const qgr::accumulators& acc, const qe::alpha_source& a,
                              const qe::alpha_source* r = nullptr) {
  std::vector<double> out(acc.acc.size());
  for (int m = 0; m < acc.rows; ++m)
    for (int n = 0; n < acc.cols; ++n) {
      double v = std::fabs(qgr::alpha_at(a, m, n));
      if (r != nullptr) v = std::max(v, std::fabs(qgr::alpha_at(*r, m, n)));
      out[acc.index(m, n)] = v;
    }
  return out;
}

template <class Format>
struct dev_tensor {
  qt::dbuf<std::uint8_t> data, scales;
  qt::dbuf<quads::tensor_scale> ts;
  explicit dev_tensor(const quads::reference::quantized_tensor<Format>& q)
      : data(q.data), scales(q.scales), ts(q.tensor_scales) {}
};

//! Launches `decode_gemm<Lane, Epi>` for both reductions and checks y against `y_ref`.
template <class Lane, class Epi, class WF, class Act, class MakeArgs>
void launch_and_check(int M, int N, int K, bool residual, const qg::fp4_weights<WF>& w,
                      const Act& a, MakeArgs make_args, const std::vector<double>& y_ref,
                      const qgr::accumulators& acc, const std::vector<double>& aabs,
                      const std::string& what, const std::vector<int>& split_list = sweep_splits) {
  for (const auto mode : {qg::reduction::deterministic, qg::reduction::atomic})
    for (const int splits : split_list) {
      const auto plan = qg::plan_decode(M, N, K, residual, {splits, mode}, qt::device_sms());
      qt::dbuf<std::uint8_t> ws(plan.workspace_bytes);
      qt::dbuf<float> y(static_cast<std::size_t>(M) * N);
      QUADS_GEMM_CHECK((qg::decode_gemm<Lane, Epi>(plan, w, a, make_args(y.ptr), ws.ptr, nullptr)));
      qt::sync_ok();
      const std::string label = what + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                " K=" + std::to_string(K) + " splits=" + std::to_string(plan.splits) +
                                (mode == qg::reduction::atomic ? " atomic" : " deterministic");
      qt::check_scaled(y.download(static_cast<std::size_t>(M) * N), y_ref, acc, aabs, plan.splits, label);
    }
}

//! The weights as uploaded: pair-coded (on the host) for `pair_coded` formats, else as is.
template <class WF>
quads::reference::quantized_tensor<quads::nvfp4> upload_form(
    const quads::reference::quantized_tensor<quads::nvfp4>& wq) {
  auto out = wq;
  if constexpr (qg::is_pair_coded<WF>) qg::encode_pair_coded(out.data, out.data);
  return out;
}

template <class Lane, class WF = quads::nvfp4>
void w4a4_nvfp4(const char* name, const std::vector<shape>& shapes = sweep(),
                const std::vector<int>& split_list = sweep_splits) {
  auto g = quads_test::rng(std::string("gemm.gpu.w4a4.") + name);
  for (const shape s : shapes) {
    const auto wq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
    const auto aq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.M, s.K), s.M, s.K);
    const auto acc = qgr::w4a4(aq, wq);
    const qe::alpha_source host_alpha{.a = aq.tensor_scales.data(), .a_mode = qe::scale_source::tensor,
                                      .w = wq.tensor_scales.data(), .w_mode = qe::scale_source::tensor};
    const auto y_ref = qgr::scaled(acc, host_alpha);
    dev_tensor<quads::nvfp4> dw(upload_form<WF>(wq)), da(aq);
    auto args = [&](float* y) {
      return epi_alpha::arguments{{.a = da.ts.ptr, .a_mode = qe::scale_source::tensor,
                                   .w = dw.ts.ptr, .w_mode = qe::scale_source::tensor},
                                  {y, s.N}};
    };
    launch_and_check<Lane, epi_alpha>(s.M, s.N, s.K, false,
                                      qg::fp4_weights<WF>{dw.data.ptr, dw.scales.ptr},
                                      qg::fp4_activations<quads::nvfp4>{da.data.ptr, da.scales.ptr},
                                      args, y_ref, acc, alpha_abs(acc, host_alpha),
                                      std::string("w4a4 ") + name, split_list);
  }
}

} // namespace

namespace {

template <class Lane, class WF>
void rac_cases(const char* name, const std::vector<shape>& shapes = sweep(),
               const std::vector<int>& split_list = sweep_splits) {
  auto g = quads_test::rng(std::string("gemm.gpu.rac.") + name);
  for (const auto mode : {quads::compensation::residual_scale::shared,
                          quads::compensation::residual_scale::own}) {
    const bool own = mode == quads::compensation::residual_scale::own;
    for (const shape s : shapes) {
      const auto wq = qt::quantize<quads::nvfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
      const auto rac = qt::make_rac(qt::random_matrix(g, s.M, s.K), s.M, s.K, 2, 0, mode);  // ~50 %
      const auto acc = qgr::w4a4_rac(rac.act, wq, rac.sel);
      const qe::alpha_source hx{.a = rac.act.x_scales.data(), .a_mode = qe::scale_source::tensor,
                                .w = wq.tensor_scales.data(), .w_mode = qe::scale_source::tensor};
      const qe::alpha_source hr{.a = rac.act.r_scales.data(), .a_mode = qe::scale_source::tensor,
                                .w = wq.tensor_scales.data(), .w_mode = qe::scale_source::tensor};
      const auto y_ref = qgr::scaled(acc, hx, own ? &hr : nullptr);
      dev_tensor<quads::nvfp4> dw(upload_form<WF>(wq));
      qt::dbuf<std::uint8_t> dd(rac.act.data), dsc(rac.act.scales);
      qt::dbuf<quads::tensor_scale> dxs(rac.act.x_scales), drs(rac.act.r_scales);
      qt::dbuf<int> dslot(rac.sel.slot_table());
      const qg::rac_activations<quads::nvfp4> a{dd.ptr, dsc.ptr, dslot.ptr, rac.sel.selected, mode};
      const qg::fp4_weights<WF> w{dw.data.ptr, dw.scales.ptr};
      const qe::alpha_source dx{.a = dxs.ptr, .a_mode = qe::scale_source::tensor, .w = dw.ts.ptr,
                                .w_mode = qe::scale_source::tensor};
      const qe::alpha_source dr{.a = drs.ptr, .a_mode = qe::scale_source::tensor, .w = dw.ts.ptr,
                                .w_mode = qe::scale_source::tensor};
      const auto aabs = alpha_abs(acc, hx, own ? &hr : nullptr);
      if (own) {
        auto args = [&](float* y) { return epi_rac::arguments{dx, dr, {y, s.N}}; };
        launch_and_check<Lane, epi_rac>(s.M, s.N, s.K, true, w, a, args, y_ref, acc, aabs,
                                        std::string("rac own ") + name, split_list);
      } else {
        auto args = [&](float* y) { return epi_alpha::arguments{dx, {y, s.N}}; };
        launch_and_check<Lane, epi_alpha>(s.M, s.N, s.K, false, w, a, args, y_ref, acc, aabs,
                                          std::string("rac shared ") + name, split_list);
      }
    }
  }
}

} // namespace

TEST_SUITE("gemm.gpu.accuracy") {

TEST_CASE("sm90: emulated W4A4 NVFP4 (bf16 lanes) matches the float64 reference") {
  w4a4_nvfp4<qg::bf16_lane>("bf16");
}

TEST_CASE("sm90: emulated W4A4 NVFP4 (fp16 lanes) matches the float64 reference") {
  w4a4_nvfp4<qg::fp16_lane>("fp16");
}

TEST_CASE("sm90: W4A16 (bf16 activations, per-row weight scales) matches the float64 reference") {
  auto g = quads_test::rng("gemm.gpu.w4a16");
  constexpr quads::quant_options per_row{.global = quads::global_scale::per_row};
  for (const shape s : sweep()) {
    const auto wq = quads::reference::quantize<quads::nvfp4, per_row>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
    const auto x = qt::to_dense16<qg::bf16_lane>(qt::random_matrix(g, s.M, s.K));
    const auto acc = qgr::w4a16(x.values, s.M, wq);
    const qe::alpha_source host_alpha{.alpha = 0.5f, .w = wq.tensor_scales.data(),
                                      .w_mode = qe::scale_source::col};
    const auto y_ref = qgr::scaled(acc, host_alpha);
    dev_tensor<quads::nvfp4> dw(wq);
    std::vector<__nv_bfloat16> xb(x.bits.size());
    std::memcpy(static_cast<void*>(xb.data()), x.bits.data(), x.bits.size() * 2);
    qt::dbuf<__nv_bfloat16> dx(xb);
    auto args = [&](float* y) {
      return epi_alpha::arguments{{.alpha = 0.5f, .w = dw.ts.ptr, .w_mode = qe::scale_source::col},
                                  {y, s.N}};
    };
    launch_and_check<qg::bf16_lane, epi_alpha>(
        s.M, s.N, s.K, false, qg::fp4_weights<quads::nvfp4>{dw.data.ptr, dw.scales.ptr},
        qg::dense_activations<qg::bf16_lane>{dx.ptr}, args, y_ref, acc,
        alpha_abs(acc, host_alpha), "w4a16");
  }
}

TEST_CASE("sm90: emulated W4A4 MXFP4 (bf16 lanes) matches the float64 reference") {
  auto g = quads_test::rng("gemm.gpu.mxfp4");
  for (const shape s0 : sweep()) {
    const shape s{s0.M, s0.N, s0.K + 16};  // K must be a multiple of 32 (odd multiples of 32)
    const auto wq = qt::quantize<quads::mxfp4>(qt::random_matrix(g, s.N, s.K), s.N, s.K);
    const auto aq = qt::quantize<quads::mxfp4>(qt::random_matrix(g, s.M, s.K), s.M, s.K);
    const auto acc = qgr::w4a4(aq, wq);
    const qe::alpha_source host_alpha{};
    const auto y_ref = qgr::scaled(acc, host_alpha);
    dev_tensor<quads::mxfp4> dw(wq), da(aq);
    auto args = [&](float* y) { return epi_alpha::arguments{{}, {y, s.N}}; };
    launch_and_check<qg::bf16_lane, epi_alpha>(
        s.M, s.N, s.K, false, qg::fp4_weights<quads::mxfp4>{dw.data.ptr, dw.scales.ptr},
        qg::fp4_activations<quads::mxfp4>{da.data.ptr, da.scales.ptr}, args, y_ref, acc,
        alpha_abs(acc, host_alpha), "mxfp4");
  }
}

TEST_CASE("sm90: W4A4 + RAC composition (b), shared and own residual scales, matches the reference") {
  rac_cases<qg::bf16_lane, quads::nvfp4>("bf16");
}

// With one split over a long K the activations cannot stay resident (over 64 chunks, or over the
// 226 KB a CTA may have), so the kernel streams them in slabs: 8-chunk slabs with one n8 token
// tile (M <= 4 with RAC's residual columns), 4-chunk slabs with a residual buffer (RAC, M > 8)
// and its refills and chunk flags. The sweep's shapes never reach that path.
TEST_CASE("sm90: W4A4 + RAC (b) in slab mode (long K, one split) matches the reference") {
  using SL = qg::stream_layout;
  const std::vector<shape> slab = {
      {16, 144, 4096}, {12, 48, 4112}, {9, 144, 9232}, {3, 144, 9232}, {1, 48, 9232}};
  for (const shape s : slab) {  // the case is only worth its time on the slab path: the
    // launcher's own rule (the grid at most one wave, so the largest resident footprint allowed)
    const auto plan = qg::plan_decode(s.M, s.N, s.K, false, {1});
    const int nt = SL::token_tiles(s.M, true);
    const int res_bytes =
        SL::resident_bytes(nt, s.M > SL::rac_col_capacity(nt), plan.chunks_per_split);
    const long ctas = static_cast<long>(plan.splits) *
                      ((s.N + SL::rows_per_cta - 1) / SL::rows_per_cta) *
                      ((s.M + SL::tokens_per_cta - 1) / SL::tokens_per_cta);
    CHECK_MESSAGE(!qg::detail::stream_resident(plan.chunks_per_split, res_bytes, ctas),
                  "M=" << s.M << " K=" << s.K << " would stay resident");
  }
  rac_cases<qg::bf16_lane, quads::nvfp4>("slab-bf16", slab, {1});
  rac_cases<qg::fp16_lane, qg::pair_coded<quads::nvfp4>>("slab-pair-coded", slab, {1});
  // plain W4A4 with one token tile (M <= 8) and with two
  const std::vector<shape> plain = {{5, 144, 9232}, {1, 48, 9232}, {13, 48, 9232}};
  w4a4_nvfp4<qg::bf16_lane>("slab-bf16", plain, {1});
  w4a4_nvfp4<qg::fp16_lane, qg::pair_coded<quads::nvfp4>>("slab-pair-coded", plain, {1});
}

TEST_CASE("sm90: emulated W4A4 with pair-coded NVFP4 weights (fp16 lanes) matches the float64 reference") {
  w4a4_nvfp4<qg::fp16_lane, qg::pair_coded<quads::nvfp4>>("pair-coded");
}

TEST_CASE("sm90: W4A4 + RAC (b) with pair-coded NVFP4 weights (fp16 lanes) matches the reference") {
  rac_cases<qg::fp16_lane, qg::pair_coded<quads::nvfp4>>("pair-coded");
}

TEST_CASE("sm90: the device pair coder is byte-identical to the host's, in place and out of place") {
  auto g = quads_test::rng("gemm.gpu.pair_coding");
  std::uniform_int_distribution<int> d(0, 255);
  for (const std::size_t bytes : {std::size_t{4}, std::size_t{20}, std::size_t{4096 + 12},
                                  std::size_t{3} << 20}) {
    std::vector<std::uint8_t> plain(bytes);
    for (auto& b : plain) b = static_cast<std::uint8_t>(d(g));
    std::vector<std::uint8_t> want = plain;
    qg::encode_pair_coded(want, want);
    qt::dbuf<std::uint8_t> in(plain), out(std::vector<std::uint8_t>(bytes, 0));
    QUADS_GEMM_CHECK(qg::encode_pair_coded_async(in.ptr, out.ptr, bytes, nullptr));
    QUADS_GEMM_CHECK(qg::encode_pair_coded_async(in.ptr, in.ptr, bytes, nullptr));
    qt::sync_ok();
    INFO("bytes " << bytes);
    CHECK(out.download(bytes) == want);
    CHECK(in.download(bytes) == want);
  }
  CHECK(qg::encode_pair_coded_async(nullptr, nullptr, 6, nullptr) == cudaErrorInvalidValue);
}

} // TEST_SUITE
