// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GPU tests of the loaders on the device (every code x every scale, bit-exact), of every
//!        epilogue node composed with the decode GEMM (against the host chain applied to the
//!        GPU's own accumulator, so node arithmetic is compared bit for bit), determinism, and the
//!        launcher's argument checks.
#include "gemm_fixtures.hpp"
#include "gpu_helpers.cuh"

#include <quads/gemm/decode.cuh>

#include <quads/epilogue/epilogue.hpp>
#include <quads/gemm/reference.hpp>
#include <quads/reference/tensor.hpp>

#include <doctest/doctest.h>

#include <test_support/bits.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace qe = quads::epilogue;
namespace qg = quads::gemm;
namespace qgr = quads::gemm::reference;
namespace qt = quads_gemm_test;

namespace {

using qt::clamp_node;

using q_given = quads::block_quantizer<quads::nvfp4,
                                       quads::quant_options{.global = quads::global_scale::given}>;
using epi_raw = qe::chain<qe::scale_alpha, qe::store<float>>;
using epi_bias = qe::chain<qe::scale_alpha, qe::bias<__nv_bfloat16>, clamp_node, qe::store<__nv_bfloat16>>;
using epi_quant = qe::chain<qe::scale_alpha, qe::quantize_output<q_given>, qe::store<__half>>;
using epi_swiglu = qe::chain<qe::scale_alpha, qe::swiglu<>, qe::store<float>, qe::quantize_output<q_given>>;

template <class Loader>
__global__ void dequant_all(float* out, int first_byte, int bytes) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= bytes * 16) return;
  out[i] = Loader::dequant_one(static_cast<std::uint8_t>(i % 16),
                               static_cast<std::uint8_t>(first_byte + i / 16));
}

template <class Loader>
void loader_on_device(int first, int last) {
  const int bytes = last - first + 1;
  qt::dbuf<float> d(static_cast<std::size_t>(bytes) * 16);
  dequant_all<Loader><<<(bytes * 16 + 127) / 128, 128>>>(d.ptr, first, bytes);
  qt::sync_ok();
  const auto got = d.download(static_cast<std::size_t>(bytes) * 16);
  for (int b = 0; b < bytes; ++b)
    for (int c = 0; c < 16; ++c) {
      const float want = Loader::dequant_one(static_cast<std::uint8_t>(c), static_cast<std::uint8_t>(first + b));
      INFO("code " << c << " byte " << first + b);
      REQUIRE(quads_test::same_bits(got[static_cast<std::size_t>(b) * 16 + c], want));
    }
}

//! A W4A4 NVFP4 problem on the device.
struct problem {
  int M, N, K;
  quads::reference::quantized_tensor<quads::nvfp4> wq, aq;
  qt::dbuf<std::uint8_t> wd, ws, ad, as;
  qt::dbuf<quads::tensor_scale> wts, ats;
  problem(int m, int n, int k, std::mt19937_64& g)
      : M(m), N(n), K(k), wq(qt::quantize<quads::nvfp4>(qt::random_matrix(g, n, k), n, k)),
        aq(qt::quantize<quads::nvfp4>(qt::random_matrix(g, m, k), m, k)), wd(wq.data),
        ws(wq.scales), ad(aq.data), as(aq.scales), wts(wq.tensor_scales), ats(aq.tensor_scales) {}
  qg::fp4_weights<quads::nvfp4> w() const { return {wd.ptr, ws.ptr}; }
  qg::fp4_activations<quads::nvfp4> a() const { return {ad.ptr, as.ptr}; }
  qe::alpha_source alpha_dev() const {
    return {.a = ats.ptr, .a_mode = qe::scale_source::tensor, .w = wts.ptr, .w_mode = qe::scale_source::tensor};
  }
  qe::alpha_source alpha_host() const {
    return {.a = aq.tensor_scales.data(), .a_mode = qe::scale_source::tensor,
            .w = wq.tensor_scales.data(), .w_mode = qe::scale_source::tensor};
  }
  //! The GPU's own unscaled accumulator (alpha = 1), deterministic, `splits` as given.
  qgr::accumulators gpu_acc(const qg::decode_plan& plan) const {
    qt::dbuf<std::uint8_t> wsp(plan.workspace_bytes);
    qt::dbuf<float> y(static_cast<std::size_t>(M) * N);
    QUADS_GEMM_CHECK((qg::decode_gemm<qg::bf16_lane, epi_raw>(plan, w(), a(), epi_raw::arguments{{}, {y.ptr, N}}, wsp.ptr, nullptr)));
    qt::sync_ok();
    const auto h = y.download(static_cast<std::size_t>(M) * N);
    qgr::accumulators acc;
    acc.rows = M;
    acc.cols = N;
    acc.k_terms = K;
    acc.acc.assign(h.begin(), h.end());
    acc.abs_sum.assign(h.size(), 0.0);
    return acc;
  }
};

} // namespace

TEST_SUITE("gemm.gpu.epilogue") {

TEST_CASE("sm90: the lane dequantization is exact on the device for every code and scale") {
  loader_on_device<qg::fp4_loader<quads::nvfp4, qg::bf16_lane>>(0, 0x7e);
  loader_on_device<qg::fp4_loader<quads::nvfp4, qg::fp16_lane>>(0, 0x7e);
  using mx = qg::fp4_loader<quads::mxfp4, qg::bf16_lane>;
  loader_on_device<mx>(mx::mx_min_byte, mx::mx_max_byte);
}

TEST_CASE("sm90: the deterministic reduction gives identical bits run to run") {
  auto g = quads_test::rng("gemm.gpu.determinism");
  problem p(16, 144, 2064, g);
  const auto plan = qg::plan_decode(p.M, p.N, p.K, false, {5, qg::reduction::deterministic});
  const auto a = p.gpu_acc(plan), b = p.gpu_acc(plan);
  CHECK(a.acc == b.acc);
}

TEST_CASE("sm90: bias, a user clamp and a bf16 store match the host chain bit for bit") {
  auto g = quads_test::rng("gemm.gpu.bias");
  for (int M : {1, 3, 16, 64}) {
    problem p(M, 144, 528, g);
    const auto plan = qg::plan_decode(p.M, p.N, p.K, false, {2});
    const auto acc = p.gpu_acc(plan);
    std::vector<quads::bf16_t> bias(static_cast<std::size_t>(p.N));
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (auto& b : bias) b = quads::element_traits<quads::bf16_t>::from_float(d(g));
    std::vector<__nv_bfloat16> bias_dev_h(bias.size());
    std::memcpy(static_cast<void*>(bias_dev_h.data()), bias.data(), bias.size() * 2);
    qt::dbuf<__nv_bfloat16> db(bias_dev_h);
    qt::dbuf<__nv_bfloat16> y(static_cast<std::size_t>(M) * p.N);
    qt::dbuf<std::uint8_t> wsp(plan.workspace_bytes);
    QUADS_GEMM_CHECK((qg::decode_gemm<qg::bf16_lane, epi_bias>(
        plan, p.w(), p.a(), epi_bias::arguments{p.alpha_dev(), {db.ptr}, {-2.0f, 2.0f}, {y.ptr, p.N}},
        wsp.ptr, nullptr)));
    qt::sync_ok();
    const auto got = y.download(static_cast<std::size_t>(M) * p.N);
    using host_epi = qe::chain<qe::scale_alpha, qe::bias<quads::bf16_t>, clamp_node, qe::store<quads::bf16_t>>;
    std::vector<quads::bf16_t> want(got.size());
    qgr::apply_epilogue<host_epi>(acc, host_epi::arguments{p.alpha_host(), {bias.data()}, {-2.0f, 2.0f}, {want.data(), p.N}});
    for (std::size_t i = 0; i < got.size(); ++i)
      REQUIRE(__nv_bfloat16_raw(got[i]).x == want[i].bits);
  }
}

TEST_CASE("sm90: quantize_output writes the reference quantizer's bytes of the GPU output") {
  auto g = quads_test::rng("gemm.gpu.quantize");
  for (int M : {1, 3, 16, 64}) {
    problem p(M, 144, 528, g);
    const auto plan = qg::plan_decode(p.M, p.N, p.K, false, {3});
    const quads::tensor_scale ts = quads::make_tensor_scale<quads::nvfp4>(1000.0f);
    qt::dbuf<quads::tensor_scale> dts(std::vector<quads::tensor_scale>{ts});
    qt::dbuf<std::uint8_t> qd(static_cast<std::size_t>(M) * p.N / 2), qs(static_cast<std::size_t>(M) * p.N / 16);
    qt::dbuf<__half> y(static_cast<std::size_t>(M) * p.N);
    qt::dbuf<std::uint8_t> wsp(plan.workspace_bytes);
    QUADS_GEMM_CHECK((qg::decode_gemm<qg::bf16_lane, epi_quant>(
        plan, p.w(), p.a(), epi_quant::arguments{p.alpha_dev(), {qd.ptr, qs.ptr, dts.ptr, M, p.N, 0}, {y.ptr, p.N}},
        wsp.ptr, nullptr)));
    qt::sync_ok();
    // the host chain on the GPU's accumulator gives the same bytes and the same fp16 values
    const auto acc = p.gpu_acc(plan);
    std::vector<std::uint8_t> hd(qd.n), hs(qs.n);
    std::vector<quads::fp16_t> hy(static_cast<std::size_t>(M) * p.N);
    using host_epi = qe::chain<qe::scale_alpha, qe::quantize_output<q_given>, qe::store<quads::fp16_t>>;
    qgr::apply_epilogue<host_epi>(acc, host_epi::arguments{p.alpha_host(), {hd.data(), hs.data(), &ts, M, p.N, 0}, {hy.data(), p.N}});
    CHECK(quads_test::mismatch_report(qd.download(qd.n), hd) == "");
    CHECK(quads_test::mismatch_report(qs.download(qs.n), hs) == "");
    const auto gy = y.download(hy.size());
    for (std::size_t i = 0; i < gy.size(); ++i) REQUIRE(__half_raw(gy[i]).x == hy[i].bits);
  }
}

TEST_CASE("sm90: swiglu then quantize_output: values within an ulp of the host, bytes exact") {
  auto g = quads_test::rng("gemm.gpu.swiglu");
  for (int M : {1, 16, 64}) {
    problem p(M, 96 * 3, 528, g);  // N / 2 = 144: whole NVFP4 blocks
    const int No = p.N / 2;
    const auto plan = qg::plan_decode(p.M, p.N, p.K, false, {2});
    const quads::tensor_scale ts = quads::make_tensor_scale<quads::nvfp4>(200.0f);
    qt::dbuf<quads::tensor_scale> dts(std::vector<quads::tensor_scale>{ts});
    qt::dbuf<float> act(static_cast<std::size_t>(M) * No);
    qt::dbuf<std::uint8_t> qd(static_cast<std::size_t>(M) * No / 2), qs(static_cast<std::size_t>(M) * No / 16);
    qt::dbuf<std::uint8_t> wsp(plan.workspace_bytes);
    QUADS_GEMM_CHECK((qg::decode_gemm<qg::bf16_lane, epi_swiglu>(
        plan, p.w(), p.a(), epi_swiglu::arguments{p.alpha_dev(), {}, {act.ptr, No}, {qd.ptr, qs.ptr, dts.ptr, M, No, 0}},
        wsp.ptr, nullptr)));
    qt::sync_ok();
    const auto gact = act.download(static_cast<std::size_t>(M) * No);
    // values: the host chain on the GPU accumulator (exp may differ by an ulp or two)
    const auto acc = p.gpu_acc(plan);
    std::vector<float> hact(gact.size());
    using host_epi = qe::chain<qe::scale_alpha, qe::swiglu<>, qe::store<float>>;
    qgr::apply_epilogue<host_epi>(acc, host_epi::arguments{p.alpha_host(), {}, {hact.data(), No}});
    for (std::size_t i = 0; i < gact.size(); ++i)
      REQUIRE(std::fabs(gact[i] - hact[i]) <= 4e-7f * std::fabs(hact[i]) + 1e-30f);
    // bytes: the reference quantizer of the GPU's own activated values
    const quads::reference::quantize_args qa{.experts = 1, .given = std::span(&ts, 1)};
    const auto ref = quads::reference::quantize<quads::nvfp4, q_given::options>(gact, M, No, qa);
    CHECK(quads_test::mismatch_report(qd.download(qd.n), ref.data) == "");
    CHECK(quads_test::mismatch_report(qs.download(qs.n), ref.scales) == "");
  }
}

TEST_CASE("sm90: the launcher refuses bad arguments with a message and enqueues nothing") {
  auto g = quads_test::rng("gemm.gpu.errors");
  problem p(3, 48, 80, g);
  const auto plan = qg::plan_decode(p.M, p.N, p.K, false);
  qt::dbuf<std::uint8_t> wsp(plan.workspace_bytes + 16);
  qt::dbuf<float> y(static_cast<std::size_t>(p.M) * p.N);
  const epi_raw::arguments ok_args{p.alpha_dev(), {y.ptr, p.N}};
  auto expect_refusal = [&](cudaError_t e, const char* fragment) {
    CHECK(e == cudaErrorInvalidValue);
    CHECK(std::string(quads::kernels::last_error_message()).find(fragment) != std::string::npos);
  };
  expect_refusal(qg::decode_gemm<qg::bf16_lane, epi_raw>(plan, qg::fp4_weights<quads::nvfp4>{nullptr, p.ws.ptr}, p.a(), ok_args, wsp.ptr, nullptr),
                 "weight data");
  expect_refusal(qg::decode_gemm<qg::bf16_lane, epi_raw>(plan, qg::fp4_weights<quads::nvfp4>{p.wd.ptr + 4, p.ws.ptr}, p.a(), ok_args, wsp.ptr, nullptr),
                 "aligned");
  expect_refusal(qg::decode_gemm<qg::bf16_lane, epi_raw>(plan, p.w(), p.a(), ok_args, nullptr, nullptr),
                 "workspace");
  auto bad_plan = plan;
  bad_plan.K = 40;  // not a multiple of 16
  expect_refusal(qg::decode_gemm<qg::bf16_lane, epi_raw>(bad_plan, p.w(), p.a(), ok_args, wsp.ptr, nullptr),
                 "multiple");
  auto edited = plan;
  edited.chunks_per_split += 1;
  expect_refusal(qg::decode_gemm<qg::bf16_lane, epi_raw>(edited, p.w(), p.a(), ok_args, wsp.ptr, nullptr),
                 "plan");
  expect_refusal(qg::decode_gemm<qg::bf16_lane, epi_raw>(plan, p.w(), p.a(), epi_raw::arguments{p.alpha_dev(), {y.ptr, p.N - 1}}, wsp.ptr, nullptr),
                 "ld");
  // a residual epilogue without RAC activations
  using epi_rac = qe::chain<qe::scale_alpha, qe::rac_residual, qe::store<float>>;
  expect_refusal(qg::decode_gemm<qg::bf16_lane, epi_rac>(plan, p.w(), p.a(), epi_rac::arguments{{}, {}, {y.ptr, p.N}}, wsp.ptr, nullptr),
                 "residual");
  // and the valid call still works afterwards
  QUADS_GEMM_CHECK((qg::decode_gemm<qg::bf16_lane, epi_raw>(plan, p.w(), p.a(), ok_args, wsp.ptr, nullptr)));
  qt::sync_ok();
  CHECK(std::string(quads::kernels::last_error_message()).empty());
}

} // TEST_SUITE
