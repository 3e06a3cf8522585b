// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief RAC on the GPU: `rac_quantize` byte-identical to the host reference, calibration
//!        statistics bit-identical to the host calibrator, the accuracy table from GPU operands,
//!        and argument errors. Exits 77 (SKIP) without a usable GPU.
#define DOCTEST_CONFIG_IMPLEMENT

#include <doctest/doctest.h>

#include <quads/compensation/compensation.hpp>
#include <quads/compensation/rac.cuh>

#include <test_support/seed.hpp>

#include "rac_experiment.hpp"
#include "synthetic_activations.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace qc = quads::compensation;
namespace qk = quads::compensation::kernels;

namespace {

#define CUDA_OK(expr)                                                                              \
  do {                                                                                             \
    const cudaError_t e_ = (expr);                                                                 \
    REQUIRE_MESSAGE(e_ == cudaSuccess, #expr, ": ", std::string(cudaGetErrorString(e_)), " / ",    \
                    std::string(quads::kernels::last_error_message()));                            \
  } while (0)

//! Owning device allocation.
template <class T>
struct dbuf {
  T* p = nullptr;
  std::size_t n = 0;
  dbuf() = default;
  explicit dbuf(std::size_t count) : n(count) {
    REQUIRE(cudaMalloc(&p, sizeof(T) * (count ? count : 1)) == cudaSuccess);
  }
  dbuf(const dbuf&) = delete;
  dbuf& operator=(const dbuf&) = delete;
  ~dbuf() {
    if (p) cudaFree(p);
  }
  void upload(const std::vector<T>& v) {
    REQUIRE(cudaMemcpy(p, v.data(), sizeof(T) * v.size(), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> v(n);
    REQUIRE(cudaMemcpy(v.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost) == cudaSuccess);
    return v;
  }
};

template <class T>
T narrow(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(v);
  else
    return v;
}
template <class T>
float widen(T v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else
    return v;
}

//! The selection's tables on the device.
struct device_tables {
  dbuf<int> order, slot, blocks;
  qk::device_selection view;
  explicit device_tables(const qc::channel_selection& sel) {
    const auto t = qk::make_selection_tables(sel);
    if (!t.order.empty()) {
      new (&order) dbuf<int>(t.order.size());
      order.upload(t.order);
    }
    new (&slot) dbuf<int>(t.slot.size());
    slot.upload(t.slot);
    if (!t.blocks.empty()) {
      new (&blocks) dbuf<int>(t.blocks.size());
      blocks.upload(t.blocks);
    }
    view = {sel.channels, sel.selected_blocks(), t.order.empty() ? nullptr : order.p, slot.p,
            t.blocks.empty() ? nullptr : blocks.p};
  }
};

//! Runs rac_quantize on the GPU and returns the result as a host `rac_activation`.
template <class Quantizer, class Layout, class T>
qc::reference::rac_activation<typename Quantizer::format, Layout>
gpu_rac(const std::vector<T>& xt, int rows, const qc::channel_selection& sel, qc::residual_scale rs,
        quads::tensor_scale given = {}, std::uint64_t seed = 0) {
  using F = typename Quantizer::format;
  constexpr int B = F::block_size;
  const int Kp = sel.augmented_channels();
  const Layout layout{rows, Kp / B};
  const bool per_row =
      F::has_tensor_scale && Quantizer::options.global == quads::global_scale::per_row;
  const std::size_t ns = per_row ? static_cast<std::size_t>(rows) : 1;
  dbuf<T> x(xt.size());
  x.upload(xt);
  dbuf<std::uint8_t> data(static_cast<std::size_t>(rows) * Kp / 2), scales(layout.size());
  // Poison the outputs so unwritten bytes show up.
  CUDA_OK(cudaMemset(data.p, 0xa5, data.n));
  CUDA_OK(cudaMemset(scales.p, 0xa5, scales.n));
  dbuf<quads::tensor_scale> xs(ns), rsb(ns), g(1);
  g.upload({given});
  dbuf<float> ws(qk::rac_workspace_floats(rows));
  device_tables tables(sel);
  qk::rac_args args{rs, g.p, ws.p, seed};
  CUDA_OK((qk::rac_quantize<Quantizer, Layout>(x.p, rows, tables.view,
                                               qk::rac_view{data.p, scales.p, xs.p, rsb.p}, args)));
  CUDA_OK(cudaDeviceSynchronize());
  qc::reference::rac_activation<F, Layout> a;
  a.rows = rows;
  a.channels = sel.channels;
  a.selected = sel.selected;
  a.global = F::has_tensor_scale ? Quantizer::options.global : quads::global_scale::per_tensor;
  a.residual = rs;
  a.data = data.download();
  a.scales = scales.download();
  a.x_scales = xs.download();
  a.r_scales = rsb.download();
  if (!F::has_tensor_scale) a.x_scales = a.r_scales = {quads::tensor_scale{}};
  return a;
}

template <class F, class Layout>
bool same_operand(const qc::reference::rac_activation<F, Layout>& a,
                  const qc::reference::rac_activation<F, Layout>& b) {
  bool ok = a.data == b.data && a.scales == b.scales;
  if (F::has_tensor_scale) {
    ok = ok && a.x_scales.size() == b.x_scales.size() && a.r_scales.size() == b.r_scales.size();
    for (std::size_t i = 0; ok && i < a.x_scales.size(); ++i)
      ok = std::memcmp(&a.x_scales[i], &b.x_scales[i], sizeof(quads::tensor_scale)) == 0 &&
           std::memcmp(&a.r_scales[i], &b.r_scales[i], sizeof(quads::tensor_scale)) == 0;
  }
  if (!ok) {
    std::size_t first = 0;
    while (first < a.data.size() && a.data[first] == b.data[first])
      ++first;
    std::printf("  first differing code byte %zu of %zu; scales %s\n", first, a.data.size(),
                a.scales == b.scales ? "equal" : "differ");
  }
  return ok;
}

template <class Quantizer, class Layout, class T>
void check_identity(std::mt19937_64& g, int trials) {
  using F = typename Quantizer::format;
  constexpr int B = F::block_size;
  constexpr quads::quant_options O = Quantizer::options;
  for (int t = 0; t < trials; ++t) {
    const int K = B * std::uniform_int_distribution<int>(1, 96)(g);
    const int rows = std::uniform_int_distribution<int>(1, 300)(g);
    quads_test::activation_model m;
    m.channels = K;
    m.spike_probability = 0.01;
    m.draw(g);
    const auto xf = m.sample(rows, g);
    std::vector<T> xt(xf.size());
    std::vector<float> xh(xf.size());
    for (std::size_t i = 0; i < xf.size(); ++i) {
      xt[i] = narrow<T>(xf[i]);
      xh[i] = widen(xt[i]);
    }
    if (t == 0) xh[0] = 0.0f, xt[0] = narrow<T>(0.0f); // a zero and a denormal-ish tiny value
    qc::calibrator<Quantizer> cal(K);
    const quads::tensor_scale given =
        quads::make_tensor_scale<F>(static_cast<float>(m.scale[0]) * 3);
    cal.observe(xh, rows, given);
    const auto perm = static_cast<qc::permutation>(std::uniform_int_distribution<int>(0, 2)(g));
    const double ratio = std::uniform_real_distribution<double>(0.0, 1.0)(g);
    const auto rs = std::uniform_int_distribution<int>(0, 1)(g) ? qc::residual_scale::own
                                                                : qc::residual_scale::shared;
    const auto sel = qc::select_channels(qc::by_quant_error{}, cal.statistics(), ratio, perm, B);
    const std::uint64_t seed =
        quads_test::derived_seed("gpu.identity") + static_cast<std::uint64_t>(t);
    CAPTURE(K);
    CAPTURE(rows);
    CAPTURE(ratio);
    CAPTURE(qc::to_string(perm));
    CAPTURE(qc::to_string(rs));
    const auto host = qc::reference::quantize_activation<F, O, Layout>(
        xh, rows, sel, {.residual = rs, .given = std::span(&given, 1), .seed = seed});
    const auto dev = gpu_rac<Quantizer, Layout>(xt, rows, sel, rs, given, seed);
    REQUIRE(same_operand(host, dev));
  }
}

} // namespace

TEST_SUITE("compensation.gpu") {

  TEST_CASE("rac_quantize is byte-identical to the host reference") {
    auto g = quads_test::rng("gpu.identity");
    using nv = quads::block_quantizer<quads::nvfp4>;
    check_identity<nv, quads::linear_scales, __nv_bfloat16>(g, 24);
    check_identity<nv, quads::swizzled_128x4, __nv_bfloat16>(g, 12);
    check_identity<nv, quads::linear_scales, __half>(g, 8);
    check_identity<nv, quads::linear_scales, float>(g, 8);
    using per_row =
        quads::block_quantizer<quads::nvfp4,
                               quads::quant_options{.global = quads::global_scale::per_row}>;
    check_identity<per_row, quads::linear_scales, __nv_bfloat16>(g, 10);
    using given =
        quads::block_quantizer<quads::nvfp4,
                               quads::quant_options{.global = quads::global_scale::given}>;
    check_identity<given, quads::swizzled_128x4, __nv_bfloat16>(g, 10);
    using sr = quads::block_quantizer<quads::nvfp4,
                                      quads::quant_options{.round = quads::rounding::stochastic}>;
    check_identity<sr, quads::linear_scales, __nv_bfloat16>(g, 8);
    using fos = quads::block_quantizer<
        quads::nvfp4, quads::quant_options{.block_rule = quads::block_scale_rule::four_over_six}>;
    check_identity<fos, quads::linear_scales, __nv_bfloat16>(g, 8);
    check_identity<quads::block_quantizer<quads::mxfp4>, quads::linear_scales, __nv_bfloat16>(g, 8);
    check_identity<quads::block_quantizer<quads::mxfp4>, quads::linear_scales, float>(
        g, 4); // no task ring
  }

  TEST_CASE("GPU calibration statistics equal the host calibrator's bit for bit") {
    auto g = quads_test::rng("gpu.stats");
    auto run = [&](auto quantizer_tag) {
      using Q = decltype(quantizer_tag);
      for (int t = 0; t < 4; ++t) {
        const int K = 16 * std::uniform_int_distribution<int>(1, 200)(g);
        quads_test::activation_model m;
        m.channels = K;
        m.draw(g);
        qc::calibrator<Q> host(K);
        dbuf<double> se(K), ma(K), tok(1);
        CUDA_OK(cudaMemset(se.p, 0, sizeof(double) * K));
        CUDA_OK(cudaMemset(ma.p, 0, sizeof(double) * K));
        CUDA_OK(cudaMemset(tok.p, 0, sizeof(double)));
        const qk::device_statistics ds{K, se.p, ma.p, tok.p};
        for (int batch = 0; batch < 3; ++batch) {
          const int rows = std::uniform_int_distribution<int>(1, 400)(g);
          const auto xf = m.sample(rows, g);
          std::vector<__nv_bfloat16> xt(xf.size());
          std::vector<float> xh(xf.size());
          for (std::size_t i = 0; i < xf.size(); ++i) {
            xt[i] = __float2bfloat16_rn(xf[i]);
            xh[i] = __bfloat162float(xt[i]);
          }
          host.observe(xh, rows);
          dbuf<__nv_bfloat16> x(xt.size());
          x.upload(xt);
          dbuf<float> ws(qk::statistics_workspace_floats(rows, K));
          CUDA_OK((qk::accumulate_statistics<Q>(x.p, rows, ds, ws.p)));
          if (batch == 1) {
            host.decay(0.75);
            CUDA_OK(qk::decay_statistics(ds, 0.75));
          }
          CUDA_OK(cudaDeviceSynchronize());
        }
        const auto hs = host.statistics();
        const auto gse = se.download(), gma = ma.download(), gt = tok.download();
        CAPTURE(K);
        CHECK(std::memcmp(gse.data(), hs.sq_error.data(), sizeof(double) * K) == 0);
        CHECK(std::memcmp(gma.data(), hs.max_abs.data(), sizeof(double) * K) == 0);
        CHECK(gt[0] == hs.tokens);
      }
    };
    run(quads::block_quantizer<quads::nvfp4>{});
    run(quads::block_quantizer<quads::nvfp4,
                               quads::quant_options{.global = quads::global_scale::per_row}>{});
  }

  TEST_CASE("the accuracy table from GPU statistics and GPU operands equals the host table") {
    auto g = quads_test::rng("rac.accuracy"); // the host test's stream: same data for one seed
    const quads_test::rac_experiment e(g);
    using Q = quads::block_quantizer<quads::nvfp4>;
    // GPU statistics (the evaluation data is bf16-exact only through the host path; use fp32
    // input).
    dbuf<float> xc(e.x_cal.size());
    xc.upload(e.x_cal);
    dbuf<double> se(e.K), ma(e.K), tok(1);
    CUDA_OK(cudaMemset(se.p, 0, sizeof(double) * e.K));
    CUDA_OK(cudaMemset(ma.p, 0, sizeof(double) * e.K));
    CUDA_OK(cudaMemset(tok.p, 0, sizeof(double)));
    dbuf<float> ws(qk::statistics_workspace_floats(e.rows_cal, e.K));
    CUDA_OK((qk::accumulate_statistics<Q>(xc.p, e.rows_cal,
                                          qk::device_statistics{e.K, se.p, ma.p, tok.p}, ws.p)));
    CUDA_OK(cudaDeviceSynchronize());
    qc::channel_statistics st(e.K);
    st.sq_error = se.download();
    st.max_abs = ma.download();
    st.tokens = tok.download()[0];
    qc::calibrator<Q> cal(e.K);
    cal.observe(e.x_cal, e.rows_cal);
    CHECK(st.sq_error == cal.statistics().sq_error);
    auto gpu = [](const std::vector<float>& x, const qc::channel_selection& sel,
                  qc::residual_scale rs) {
      return gpu_rac<Q, quads::linear_scales>(x, static_cast<int>(x.size()) / sel.channels, sel,
                                              rs);
    };
    auto host = [](const std::vector<float>& x, const qc::channel_selection& sel,
                   qc::residual_scale rs) {
      return qc::reference::quantize_activation<quads::nvfp4>(
          x, static_cast<int>(x.size()) / sel.channels, sel, {.residual = rs});
    };
    const auto grows = quads_test::rac_table(e, st, gpu, "GPU (H200) statistics and operands");
    const auto& def = quads_test::find_row(grows, "quant_error", "none", "shared");
    // Spot-check against the host path on the default row (the full host table is the host test's).
    for (std::size_t i = 0; i < quads_test::rac_ratios().size(); ++i) {
      const auto sel =
          qc::select_channels(qc::by_quant_error{}, cal.statistics(), quads_test::rac_ratios()[i]);
      CHECK(def.err[i] == quads_test::rac_error(e, sel, qc::residual_scale::shared, host));
    }
  }

  TEST_CASE("bad arguments are refused with a message and nothing enqueued") {
    using Q = quads::block_quantizer<quads::nvfp4>;
    dbuf<__nv_bfloat16> x(64 * 64);
    dbuf<std::uint8_t> data(64 * 128), scales(64 * 8);
    dbuf<int> slot(4);
    CUDA_OK(cudaMemset(slot.p, 0xff, 4 * sizeof(int))); // all -1: nothing selected
    dbuf<float> ws(qk::rac_workspace_floats(64));
    dbuf<quads::tensor_scale> ts(2);
    qk::device_selection sel{64, 0, nullptr, slot.p, nullptr};
    const qk::rac_view out{data.p, scales.p, ts.p, ts.p + 1};
    CHECK(qk::rac_quantize<Q>(x.p, 64, sel, out, {.workspace = nullptr}) == cudaErrorInvalidValue);
    CHECK(std::string(quads::kernels::last_error_message()).find("workspace") != std::string::npos);
    CHECK(qk::rac_quantize<Q>(x.p + 1, 64, sel, out, {.workspace = ws.p}) == cudaErrorInvalidValue);
    CHECK(std::string(quads::kernels::last_error_message()).find("aligned") != std::string::npos);
    qk::device_selection bad{60, 0, nullptr, slot.p, nullptr};
    CHECK(qk::rac_quantize<Q>(x.p, 64, bad, out, {.workspace = ws.p}) == cudaErrorInvalidValue);
    qk::device_selection no_blocks{64, 2, nullptr, slot.p, nullptr};
    CHECK(qk::rac_quantize<Q>(x.p, 64, no_blocks, out, {.workspace = ws.p}) ==
          cudaErrorInvalidValue);
    qk::device_selection too_wide{1 << 17, 0, slot.p, slot.p, nullptr};
    CHECK(qk::rac_quantize<Q>(x.p, 1, too_wide, out, {.workspace = ws.p}) == cudaErrorInvalidValue);
    CHECK(qk::rac_quantize<Q>(x.p, 64, sel, out, {.workspace = ws.p}) == cudaSuccess);
    CHECK(qk::decay_statistics(qk::device_statistics{}, 0.5) == cudaErrorInvalidValue);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
  }

} // TEST_SUITE

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("quads RAC GPU tests: no CUDA device, skipping\n");
    return 77;
  }
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, quads::compensation::kernels::detail::stats_decay_kernel<>) !=
      cudaSuccess) {
    std::printf("quads RAC GPU tests: this build has no kernel image for the device, skipping\n");
    return 77;
  }
  (void)quads_test::seed();
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
