// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The grouped GEMMs inside the MoE layer (quads/moe/layer.cuh) at the Qwen3-30B-A3B shape
//!        (E = 128, top-8, H = 2048, I = 768, T = 4), naive W4A4 and W4A16, on the persistent and
//!        the streaming kernel: the layer's h_pre and Y must agree between the kernels, and each
//!        must equal standalone grouped GEMMs on the layer's own operands (gathered A1, h,
//!        routing). Localises the layer failures of the H200 runs at 23:51 / 00:25 UTC (wrong
//!        non-RAC results on the persistent kernel) to the GEMM or to the layer context.
#include "gemm_fixtures.hpp"
#include "gpu_helpers.cuh"

#include <quads/moe/layer.cuh>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace qe = quads::epilogue;
namespace qg = quads::gemm;
namespace qm = quads::moe;
namespace qt = quads_gemm_test;

namespace {

using epi_alpha = qe::chain<qe::scale_alpha, qe::store<float>>;

std::vector<std::uint8_t> random_codes(std::mt19937_64& g, std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t w = g();
    std::memcpy(&v[i], &w, std::min<std::size_t>(8, n - i));
  }
  return v;
}
std::vector<std::uint8_t> random_scales(std::mt19937_64& g, std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(0x30 + g() % 0x18);
  return v;
}

//! Values that differ beyond a loose relative bound (the two kernels and the host SwiGLU round
//! differently; a wrong item differs by orders of magnitude).
struct diff_count {
  long bad = 0;
  double worst = 0;
  long first = -1;
};
diff_count compare(const std::vector<float>& a, const std::vector<float>& b, double rel = 2e-3) {
  diff_count d;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    const double tol = rel * (std::fabs(x) + std::fabs(y)) + 1e-5;
    const double err = std::fabs(x - y);
    if (!(err <= tol)) {
      if (d.first < 0) d.first = static_cast<long>(i);
      ++d.bad;
    }
    if (std::isfinite(err) && tol > 0) d.worst = std::max(d.worst, err / tol);
  }
  return d;
}

struct layer_out {
  std::vector<float> h_pre, y;
};

template <qm::layer_policy P>
void context_case(const std::string& name) {
  constexpr int E = 128, k = 8, H = 2048, I = 768, T = 4, n = T * k;
  auto g = quads_test::rng("gemm.gpu.moe-context." + name);
  const qm::layer_shape shape{E, k, H, I};
  const qm::routing_config rc{E, k, qm::scoring::softmax, true, 1.0f};
  // weights: random codes / scale bytes, per-expert tensor scales
  const auto gu = random_codes(g, static_cast<std::size_t>(E) * 2 * I * H / 2);
  const auto gus = random_scales(g, static_cast<std::size_t>(E) * 2 * I * H / 16);
  const auto dn = random_codes(g, static_cast<std::size_t>(E) * H * I / 2);
  const auto dns = random_scales(g, static_cast<std::size_t>(E) * H * I / 16);
  std::vector<quads::tensor_scale> gut, dnt;
  std::uniform_int_distribution<int> ex(-9, -5);
  for (int e = 0; e < E; ++e) {
    gut.push_back(quads::tensor_scale_from_decode(std::ldexp(1.0f, ex(g))));
    dnt.push_back(quads::tensor_scale_from_decode(std::ldexp(1.0f, ex(g))));
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::uint16_t> xb(static_cast<std::size_t>(T) * H);
  float amax = 0;
  for (auto& v : xb) {
    v = quads::detail::float_to_bf16_bits(nd(g));
    amax = std::max(amax, std::fabs(quads::detail::bf16_bits_to_float(v)));
  }
  std::vector<float> logits(static_cast<std::size_t>(T) * E);
  for (auto& l : logits) l = 2.0f * nd(g);
  const std::vector<quads::tensor_scale> xs{quads::make_tensor_scale<quads::nvfp4>(amax)};
  const std::vector<quads::tensor_scale> hs{quads::make_tensor_scale<quads::nvfp4>(8.0f)};

  qt::dbuf<std::uint8_t> d_gu(gu), d_gus(gus), d_dn(dn), d_dns(dns);
  qt::dbuf<quads::tensor_scale> d_gut(gut), d_dnt(dnt), d_xs(xs), d_hs(hs);
  std::vector<__nv_bfloat16> xh(xb.size());
  std::memcpy(static_cast<void*>(xh.data()), xb.data(), xb.size() * 2);
  qt::dbuf<__nv_bfloat16> d_x(xh);
  qt::dbuf<float> d_logits(logits);
  qm::layer_weights_view w{};
  w.gate_up = d_gu.ptr;
  w.gate_up_scales = d_gus.ptr;
  w.gate_up_ts = d_gut.ptr;
  w.down = d_dn.ptr;
  w.down_scales = d_dns.ptr;
  w.down_ts = d_dnt.ptr;
  qm::layer_numerics_view num{};
  num.x_scale = d_xs.ptr;
  num.h_scales = d_hs.ptr;
  num.h_mode = qe::scale_source::tensor;

  cudaStream_t st;
  REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess);
  // the uploads ran on the legacy stream (pageable copies may return before their DMA lands),
  // which a non-blocking stream does not wait for
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  layer_out out[2];
  const qg::grouped_kernel kernels[2] = {qg::grouped_kernel::streaming,
                                         qg::grouped_kernel::persistent};
  for (int ki = 0; ki < 2; ++ki) {
    qm::layer_tuning tune{};
    tune.kernel = kernels[ki];
    const auto plan = qm::plan_layer<P>(T, shape, rc, 0, 0, 132, tune);
    REQUIRE(plan.valid);
    qt::dbuf<std::uint8_t> ws(plan.workspace_bytes);
    qt::dbuf<__nv_bfloat16> o(static_cast<std::size_t>(T) * H);
    qt::dbuf<float> hpre(static_cast<std::size_t>(n) * I);
    qm::layer_io io{d_x.ptr, d_logits.ptr, o.ptr, nullptr, hpre.ptr};
    QUADS_GEMM_CHECK(qm::forward(plan, w, num, io, ws.ptr, st));
    REQUIRE(cudaStreamSynchronize(st) == cudaSuccess);
    qt::sync_ok();
    out[ki].h_pre = hpre.download(static_cast<std::size_t>(n) * I);
    out[ki].y.resize(static_cast<std::size_t>(n) * H);
    REQUIRE(cudaMemcpy(out[ki].y.data(), ws.ptr + plan.off_y, out[ki].y.size() * 4,
                       cudaMemcpyDeviceToHost) == cudaSuccess);

    // Standalone grouped GEMMs on this run's own operands (still in its workspace), both kernels.
    const auto rv = qm::routing_in(plan, ws.ptr);
    std::vector<float> wrow(static_cast<std::size_t>(n));
    REQUIRE(cudaMemcpy(wrow.data(), rv.weight_of_row, n * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    constexpr auto a_mode = qm::fp4_activations(P) ? qe::scale_source::tensor : qe::scale_source::none;
    const qe::alpha_source gu_alpha{.a = qm::fp4_activations(P) ? d_xs.ptr : nullptr,
                                    .a_mode = a_mode, .w = d_gut.ptr,
                                    .w_mode = qe::scale_source::expert,
                                    .expert_of_row = rv.expert_of_row};
    const qe::alpha_source dn_alpha{.a = qm::fp4_activations(P) ? d_hs.ptr : nullptr,
                                    .a_mode = a_mode, .w = d_dnt.ptr,
                                    .w_mode = qe::scale_source::expert,
                                    .expert_of_row = rv.expert_of_row};
    for (const auto sk : kernels) {
      auto pg = plan.gu, pd = plan.dn;
      pg.kernel = sk;
      pd.kernel = sk;
      qt::dbuf<std::uint8_t> sws(std::max(pg.workspace_bytes, pd.workspace_bytes));
      qt::dbuf<float> yg(static_cast<std::size_t>(n) * 2 * I), yd(static_cast<std::size_t>(n) * H);
      const qg::fp4_expert_weights<quads::nvfp4> wgu{d_gu.ptr, d_gus.ptr, E}, wdn{d_dn.ptr, d_dns.ptr, E};
      if constexpr (qm::fp4_activations(P)) {
        QUADS_GEMM_CHECK((qg::grouped_gemm<qg::bf16_lane, epi_alpha>(
            pg, wgu, qg::fp4_activations<quads::nvfp4>{ws.ptr + plan.off_a1, ws.ptr + plan.off_a1s},
            rv.offsets, epi_alpha::arguments{gu_alpha, {yg.ptr, 2 * I}}, sws.ptr, st)));
        QUADS_GEMM_CHECK((qg::grouped_gemm<qg::bf16_lane, epi_alpha>(
            pd, wdn, qg::fp4_activations<quads::nvfp4>{ws.ptr + plan.off_h, ws.ptr + plan.off_hs},
            rv.offsets, epi_alpha::arguments{dn_alpha, {yd.ptr, H}}, sws.ptr, st)));
      } else {
        QUADS_GEMM_CHECK((qg::grouped_gemm<qg::bf16_lane, epi_alpha>(
            pg, wgu,
            qg::dense_activations<qg::bf16_lane>{
                reinterpret_cast<const __nv_bfloat16*>(ws.ptr + plan.off_a1)},
            rv.offsets, epi_alpha::arguments{gu_alpha, {yg.ptr, 2 * I}}, sws.ptr, st)));
        QUADS_GEMM_CHECK((qg::grouped_gemm<qg::bf16_lane, epi_alpha>(
            pd, wdn,
            qg::dense_activations<qg::bf16_lane>{
                reinterpret_cast<const __nv_bfloat16*>(ws.ptr + plan.off_h)},
            rv.offsets, epi_alpha::arguments{dn_alpha, {yd.ptr, H}}, sws.ptr, st)));
      }
      REQUIRE(cudaStreamSynchronize(st) == cudaSuccess);
      const auto g_acc = yg.download(static_cast<std::size_t>(n) * 2 * I);
      const auto d_acc = yd.download(static_cast<std::size_t>(n) * H);
      std::vector<float> h_from(static_cast<std::size_t>(n) * I), y_from(d_acc.size());
      for (int r = 0; r < n; ++r) {
        for (int j = 0; j < I; ++j) {
          const double gv = g_acc[static_cast<std::size_t>(r) * 2 * I + 2 * j];
          const double uv = g_acc[static_cast<std::size_t>(r) * 2 * I + 2 * j + 1];
          h_from[static_cast<std::size_t>(r) * I + j] = static_cast<float>(gv / (1.0 + std::exp(-gv)) * uv);
        }
        for (int c = 0; c < H; ++c)
          y_from[static_cast<std::size_t>(r) * H + c] =
              d_acc[static_cast<std::size_t>(r) * H + c] * wrow[static_cast<std::size_t>(r)];
      }
      const auto dh = compare(out[ki].h_pre, h_from);
      const auto dy = compare(out[ki].y, y_from);
      MESSAGE(name << ": layer on " << std::string(qg::grouped_kernel_name(kernels[ki]))
                   << " vs standalone grouped GEMMs (" << std::string(qg::grouped_kernel_name(sk))
                   << ") on the layer's operands: h_pre " << dh.bad << " of " << h_from.size()
                   << " differ (first " << dh.first << "), Y " << dy.bad << " of " << y_from.size()
                   << " differ (first " << dy.first << ")");
      CHECK(dh.bad == 0);
      CHECK(dy.bad == 0);
    }
  }
  cudaStreamDestroy(st);
  const auto dh = compare(out[0].h_pre, out[1].h_pre);
  const auto dy = compare(out[0].y, out[1].y);
  MESSAGE(name << ": layer streaming vs persistent: h_pre " << dh.bad << " of " << out[0].h_pre.size()
               << " differ (first " << dh.first << ", worst / bound " << dh.worst << "), Y "
               << dy.bad << " of " << out[0].y.size() << " differ (first " << dy.first << ")");
  CHECK(dh.bad == 0);
  CHECK(dy.bad == 0);
}

} // namespace

TEST_SUITE("gemm.gpu.grouped") {

TEST_CASE("sm90: the MoE layer's grouped GEMMs (Qwen3 shape, naive W4A4) agree on both kernels and with standalone launches") {
  context_case<qm::layer_policy::naive_w4a4>("naive_w4a4");
}

TEST_CASE("sm90: the MoE layer's grouped GEMMs (Qwen3 shape, W4A16) agree on both kernels and with standalone launches") {
  context_case<qm::layer_policy::w4a16>("w4a16");
}

} // TEST_SUITE
