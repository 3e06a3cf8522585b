// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief RAC host reference: operand bytes, residuals, weight augmentation, the two compositions.

#include <doctest/doctest.h>

#include <quads/compensation/compensation.hpp>
#include <quads/reference/tensor.hpp>

#include <test_support/generators.hpp>
#include <test_support/seed.hpp>

#include "synthetic_activations.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace qc = quads::compensation;
namespace qr = quads::compensation::reference;
using F = quads::nvfp4;

namespace {

struct fixture {
  int K, rows, N;
  std::vector<float> x, w;
  qc::channel_statistics stats;
  fixture(std::mt19937_64& g, int k = 256, int m = 48, int n = 40) : K(k), rows(m), N(n) {
    quads_test::activation_model mdl;
    mdl.channels = K;
    mdl.outlier_fraction = 0.03;
    mdl.spike_probability = 0.01;
    mdl.draw(g);
    x = mdl.sample(rows, g);
    w = quads_test::random_weight(N, K, g);
    qc::calibrator<quads::block_quantizer<F>> cal(K);
    cal.observe(mdl.sample(128, g), 128);
    stats = cal.statistics();
  }
};

double ratio_of(std::mt19937_64& g) {
  const double r[] = {0.0, 0.0625, 0.125, 0.25, 0.5, 0.75, 1.0};
  return r[std::uniform_int_distribution<int>(0, 6)(g)];
}

} // namespace

TEST_SUITE("compensation.reference") {

  TEST_CASE("Q(x) equals the plain quantization of the permuted x, and Q(r) that of its residual") {
    auto g = quads_test::rng("rac.bytes");
    for (int trial = 0; trial < 12; ++trial) {
      fixture f(g);
      const auto perm = static_cast<qc::permutation>(trial % 3);
      const auto rs = trial % 2 ? qc::residual_scale::own : qc::residual_scale::shared;
      const double ratio = ratio_of(g);
      const auto sel = qc::select_channels(qc::by_quant_error{}, f.stats, ratio, perm);
      CAPTURE(ratio);
      CAPTURE(qc::to_string(perm));
      CAPTURE(qc::to_string(rs));
      const auto a = qr::quantize_activation<F>(f.x, f.rows, sel, {.residual = rs});
      const auto xp = qr::permute_columns(f.x, f.rows, sel);
      const auto plain = quads::reference::quantize<F>(xp, f.rows, f.K);
      const int nkb = f.K / 16, Kp = sel.augmented_channels();
      REQUIRE(a.x_scales.size() == 1u);
      CHECK(a.x_scales[0].encode == plain.tensor_scales[0].encode);
      // Independent residual: x - qdq(x), then block-quantize the selected blocks with ts_r.
      const auto xq = quads::reference::qdq<F>(xp, f.rows, f.K);
      float ramax = 0;
      for (int r = 0; r < f.rows; ++r)
        for (int b : sel.blocks)
          for (int i = 0; i < 16; ++i) {
            const std::size_t at = static_cast<std::size_t>(r) * f.K + b * 16 + i;
            ramax = std::fmax(ramax, std::fabs(xp[at] - xq[at]));
          }
      const auto ts_r =
          rs == qc::residual_scale::own ? quads::make_tensor_scale<F>(ramax) : a.x_scales[0];
      CHECK(a.r_scales[0].encode == ts_r.encode);
      bool same = true;
      for (int r = 0; r < f.rows && same; ++r) {
        for (int kb = 0; kb < nkb; ++kb) {
          const auto pb = a.block(r, kb);
          for (int i = 0; i < 8; ++i)
            same = same &&
                   pb.codes[i] == plain.data[(static_cast<std::size_t>(r) * f.K + kb * 16) / 2 + i];
          same = same && pb.scale == plain.scales[static_cast<std::size_t>(r) * nkb + kb];
        }
        for (int j = 0; j < sel.selected_blocks(); ++j) {
          float res[16];
          for (int i = 0; i < 16; ++i) {
            const std::size_t at = static_cast<std::size_t>(r) * f.K +
                                   sel.blocks[static_cast<std::size_t>(j)] * 16 + i;
            res[i] = xp[at] - xq[at];
          }
          const auto want = quads::block_quantizer<F>::quantize(res, ts_r);
          const auto pb = a.block(r, nkb + j);
          for (int i = 0; i < 8; ++i)
            same = same && pb.codes[i] == want.codes[i];
          same = same && pb.scale == want.scale;
        }
      }
      CHECK(same);
      CHECK(a.data.size() == static_cast<std::size_t>(f.rows) * Kp / 2);
    }
  }

  TEST_CASE("compensation never increases an element's error") {
    auto g = quads_test::rng("rac.elementwise");
    fixture f(g, 512, 64);
    for (auto rs : {qc::residual_scale::shared, qc::residual_scale::own}) {
      const auto sel = qc::select_channels(qc::by_quant_error{}, f.stats, 1.0);
      const auto a = qr::quantize_activation<F>(f.x, f.rows, sel, {.residual = rs});
      const auto d = qr::dequantize_activation(a);
      const int K = f.K, Kp = sel.augmented_channels();
      int improved = 0;
      for (int r = 0; r < f.rows; ++r)
        for (int j = 0; j < sel.selected_blocks(); ++j)
          for (int i = 0; i < 16; ++i) {
            const int k = sel.blocks[static_cast<std::size_t>(j)] * 16 + i;
            const double x = f.x[static_cast<std::size_t>(r) * K + k];
            const double qx = d[static_cast<std::size_t>(r) * Kp + k];
            const double qrr = d[static_cast<std::size_t>(r) * Kp + K + j * 16 + i];
            const double before = std::fabs(x - qx), after = std::fabs(x - qx - qrr);
            REQUIRE(after <= before * (1 + 1e-6) + 1e-30);
            improved += after < before;
          }
      CHECK(improved > f.rows * K / 2);
    }
  }

  TEST_CASE("the augmented weight duplicates the selected blocks byte for byte") {
    auto g = quads_test::rng("rac.augment");
    fixture f(g);
    for (auto perm : {qc::permutation::none, qc::permutation::sorted}) {
      const auto sel = qc::select_channels(qc::by_max_abs{}, f.stats, 0.25, perm);
      const auto qw =
          qr::quantize_weight<F, quads::quant_options{}, quads::swizzled_128x4>(f.w, f.N, sel);
      const auto wa = qr::augment_weight(qw, sel);
      CHECK(wa.cols == f.K + sel.selected);
      const int nkb = f.K / 16;
      const auto lw = qw.scale_layout();
      const auto la = wa.scale_layout();
      for (int n = 0; n < f.N; ++n) {
        for (int kb = 0; kb < nkb + sel.selected_blocks(); ++kb) {
          const int src = kb < nkb ? kb : sel.blocks[static_cast<std::size_t>(kb - nkb)];
          for (int i = 0; i < 8; ++i)
            REQUIRE(wa.data[static_cast<std::size_t>(n) * wa.cols / 2 + kb * 8 + i] ==
                    qw.data[static_cast<std::size_t>(n) * f.K / 2 + src * 8 + i]);
          REQUIRE(wa.scales[la.offset(0, n, kb)] == qw.scales[lw.offset(0, n, src)]);
        }
      }
      // Swizzled padding stays zero.
      std::size_t nonzero_pad = 0;
      for (std::size_t off = 0; off < wa.scales.size(); ++off)
        if (!la.layout.coords(off).valid && wa.scales[off] != 0) ++nonzero_pad;
      CHECK(nonzero_pad == 0u);
    }
  }

  TEST_CASE("compositions (a) and (b) agree up to fp32 summation order and match float64") {
    auto g = quads_test::rng("rac.compositions");
    for (int trial = 0; trial < 6; ++trial) {
      fixture f(g, 512, 32, 24);
      const auto perm = static_cast<qc::permutation>(trial % 3);
      const double ratio = ratio_of(g);
      const auto sel = qc::select_channels(qc::by_quant_error{}, f.stats, ratio, perm);
      CAPTURE(ratio);
      const auto a = qr::quantize_activation<F, quads::quant_options{}, quads::swizzled_128x4>(
          f.x, f.rows, sel);
      const auto qw = qr::quantize_weight<F>(f.w, f.N, sel);
      const auto wa = qr::augment_weight(qw, sel);
      const auto ya64 = qr::gemm_augmented<double>(a, wa);
      const auto yb64 = qr::gemm_residual<double>(a, qw, sel);
      const auto ya32 = qr::gemm_augmented<float>(a, wa);
      const auto yb32 = qr::gemm_residual<float>(a, qw, sel);
      // Independent float64 reference: dequantized operands with tensor scales, dense GEMM.
      const auto ad = qr::dequantize_activation(a);
      const auto wd = quads::reference::dequantize<F>(wa);
      const int Kp = sel.augmented_channels();
      const auto yref = qr::gemm_dense(ad, wd, f.rows, f.N, Kp);
      std::vector<float> ad_abs(ad), wd_abs(wd);
      for (auto& v : ad_abs)
        v = std::fabs(v);
      for (auto& v : wd_abs)
        v = std::fabs(v);
      const auto mag = qr::gemm_dense(ad_abs, wd_abs, f.rows, f.N, Kp);
      const double u32 = std::ldexp(1.0, -24);
      const double gamma = (Kp + 2) * u32 / (1 - (Kp + 2) * u32); // K' adds and the alpha product
      for (std::size_t i = 0; i < yref.size(); ++i) {
        REQUIRE(std::fabs(ya64[i] - yb64[i]) <= 1e-12 * mag[i] + 1e-300);
        REQUIRE(std::fabs(ya64[i] - yref[i]) <= 1e-6 * mag[i] + 1e-300); // yref rounds its operands
        REQUIRE(std::fabs(ya32[i] - ya64[i]) <= gamma * mag[i] * 1.01);
        REQUIRE(std::fabs(yb32[i] - yb64[i]) <= gamma * mag[i] * 1.01);
        REQUIRE(std::fabs(ya32[i] - yb32[i]) <= 2 * gamma * mag[i] * 1.01);
      }
    }
  }

  TEST_CASE("ratio 0 is plain W4A4, and an own residual scale needs composition (b)") {
    auto g = quads_test::rng("rac.ratio0");
    fixture f(g);
    const auto sel0 = qc::select_channels(qc::by_quant_error{}, f.stats, 0.0);
    const auto a0 = qr::quantize_activation<F>(f.x, f.rows, sel0);
    const auto qw = qr::quantize_weight<F>(f.w, f.N, sel0);
    const auto y0 = qr::gemm_residual<double>(a0, qw, sel0);
    const auto yplain = qr::gemm_dense(quads::reference::qdq<F>(f.x, f.rows, f.K),
                                       quads::reference::dequantize<F>(qw), f.rows, f.N, f.K);
    CHECK(qr::relative_error(y0, yplain) < 1e-6);
    const auto sel = qc::select_channels(qc::by_quant_error{}, f.stats, 0.5);
    const auto own =
        qr::quantize_activation<F>(f.x, f.rows, sel, {.residual = qc::residual_scale::own});
    CHECK_THROWS_AS((void)qr::gemm_augmented(own, qr::augment_weight(qw, sel)),
                    std::invalid_argument);
    CHECK_NOTHROW((void)qr::gemm_residual(own, qw, sel));
  }

  TEST_CASE("per-row, given and stochastic options follow the plain quantizer's rules") {
    auto g = quads_test::rng("rac.options");
    fixture f(g, 128, 20, 8);
    const auto sel = qc::select_channels(qc::by_quant_error{}, f.stats, 0.5);
    constexpr quads::quant_options per_row{.global = quads::global_scale::per_row};
    const auto a = qr::quantize_activation<F, per_row>(f.x, f.rows, sel,
                                                       {.residual = qc::residual_scale::own});
    const auto plain = quads::reference::quantize<F, per_row>(f.x, f.rows, f.K);
    REQUIRE(a.x_scales.size() == static_cast<std::size_t>(f.rows));
    REQUIRE(a.r_scales.size() == static_cast<std::size_t>(f.rows));
    for (int r = 0; r < f.rows; ++r)
      CHECK(a.x_scales[static_cast<std::size_t>(r)].encode ==
            plain.tensor_scales[static_cast<std::size_t>(r)].encode);
    CHECK(a.r_scales[0].encode > a.x_scales[0].encode); // own residual scale is finer

    constexpr quads::quant_options given{.global = quads::global_scale::given};
    const quads::tensor_scale ts = quads::make_tensor_scale<F>(100.0f);
    const auto b =
        qr::quantize_activation<F, given>(f.x, f.rows, sel, {.given = std::span(&ts, 1)});
    CHECK(b.x_scales[0].encode == ts.encode);
    CHECK_THROWS_AS((void)(qr::quantize_activation<F, given>(f.x, f.rows, sel)),
                    std::invalid_argument);

    constexpr quads::quant_options sr{.round = quads::rounding::stochastic};
    const std::uint64_t seed = quads_test::derived_seed("rac.sr");
    const auto s1 = qr::quantize_activation<F, sr>(f.x, f.rows, sel, {.seed = seed});
    const auto s2 = qr::quantize_activation<F, sr>(f.x, f.rows, sel, {.seed = seed});
    const auto s3 = qr::quantize_activation<F, sr>(f.x, f.rows, sel, {.seed = seed + 1});
    CHECK(s1.data == s2.data);
    CHECK(s1.data != s3.data);
    const auto ps = quads::reference::quantize<F, sr>(f.x, f.rows, f.K, {.seed = seed});
    bool same = true;
    for (int r = 0; r < f.rows; ++r)
      for (int k = 0; k < f.K / 2; ++k)
        same = same && s1.data[static_cast<std::size_t>(r) * (sel.augmented_channels() / 2) + k] ==
                           ps.data[static_cast<std::size_t>(r) * f.K / 2 + k];
    CHECK(same);
  }

  TEST_CASE("bad shapes and selections are rejected") {
    auto g = quads_test::rng("rac.bad");
    fixture f(g, 64, 4, 4);
    const auto sel = qc::select_channels(qc::by_quant_error{}, f.stats, 0.5);
    CHECK_THROWS_AS((void)qr::quantize_activation<F>(std::span(f.x).first(100), 4, sel),
                    std::invalid_argument);
    auto bad = sel;
    bad.channels = 48;
    CHECK_THROWS_AS((void)qr::quantize_activation<F>(f.x, 4, bad), std::invalid_argument);
    const auto sel32 =
        qc::select_channels(qc::by_quant_error{}, f.stats, 0.5, qc::permutation::none, 32);
    CHECK_THROWS_AS((void)qr::quantize_activation<F>(f.x, 4, sel32), std::invalid_argument);
    CHECK_NOTHROW((void)qr::quantize_activation<quads::mxfp4>(f.x, 4, sel32));
  }

  TEST_CASE("the shared residual scale pushes small blocks' residual scales into E4M3 subnormals") {
    auto g = quads_test::rng("rac.subnormal");
    quads_test::activation_model m;
    m.channels = 1024;
    m.draw(g);
    const auto x = m.sample(256, g);
    qc::calibrator<quads::block_quantizer<F>> cal(1024);
    cal.observe(x, 256);
    const auto sel = qc::select_channels(qc::by_quant_error{}, cal.statistics(), 1.0);
    std::printf("\nE4M3 residual block scales (K=1024, 256 tokens, 100 %% selected):\n");
    std::size_t sub[2] = {0, 0}, zero[2] = {0, 0}, xsub = 0;
    for (int s = 0; s < 2; ++s) {
      const auto rs = s ? qc::residual_scale::own : qc::residual_scale::shared;
      const auto a = qr::quantize_activation<F>(x, 256, sel, {.residual = rs});
      for (int r = 0; r < 256; ++r)
        for (int kb = 0; kb < 64; ++kb) {
          const auto byte = a.block(r, 64 + kb).scale;
          if (byte == 0)
            ++zero[s];
          else if ((byte & 0x78) == 0)
            ++sub[s];
          if (s == 0 && (a.block(r, kb).scale & 0x78) == 0) ++xsub;
        }
      std::printf("  %s: %zu of %d residual scales subnormal, %zu zero (x: %zu subnormal), "
                  "residual scale ratio own/shared %.2f\n",
                  qc::to_string(rs), sub[s], 256 * 64, zero[s], xsub,
                  static_cast<double>(a.r_scales[0].encode / a.x_scales[0].encode));
    }
    CHECK(sub[1] + zero[1] <= sub[0] + zero[0]);
  }

} // TEST_SUITE

TEST_SUITE("compensation.reference") {

  TEST_CASE("with massive activations the own residual scale avoids subnormal residual scales") {
    // Stress case for the residual-scale choice: a few channels x500-x2000 ("massive activations")
    // make the tensor amax ~1000x the typical block amax. Printed for docs/rac.md.
    auto g = quads_test::rng("rac.massive");
    const int K = 1024, rows = 256, N = 128;
    quads_test::activation_model m;
    m.channels = K;
    m.outlier_fraction = 0.004;
    m.outlier_min = 500;
    m.outlier_max = 2000;
    m.draw(g);
    const auto xc = m.sample(rows, g), x = m.sample(rows, g);
    const auto w = quads_test::random_weight(N, K, g);
    qc::calibrator<quads::block_quantizer<F>> cal(K);
    cal.observe(xc, rows);
    std::printf("\nMassive activations (4 channels x500-x2000), K=%d, N=%d, %d tokens:\n", K, N,
                rows);
    std::size_t subnormal[2] = {0, 0};
    for (double ratio : {0.25, 1.0}) {
      const auto sel = qc::select_channels(qc::by_quant_error{}, cal.statistics(), ratio);
      const auto qw = qr::quantize_weight<F>(w, N, sel);
      const auto ref = qr::gemm_dense(x, quads::reference::dequantize<F>(qw), rows, N, K);
      for (int s = 0; s < 2; ++s) {
        const auto rs = s ? qc::residual_scale::own : qc::residual_scale::shared;
        const auto a = qr::quantize_activation<F>(x, rows, sel, {.residual = rs});
        std::size_t sub = 0, zero = 0;
        for (int r = 0; r < rows; ++r)
          for (int j = 0; j < sel.selected_blocks(); ++j) {
            const auto byte = a.block(r, K / 16 + j).scale;
            if (byte == 0)
              ++zero;
            else if ((byte & 0x78) == 0)
              ++sub;
          }
        if (ratio == 1.0) subnormal[s] = sub + zero;
        const double err = qr::relative_error(qr::gemm_residual<double>(a, qw, sel), ref);
        std::printf("  ratio %3.0f %%, %-6s: error %.3f %%, residual scales subnormal %zu, zero "
                    "%zu of %d\n",
                    100 * ratio, qc::to_string(rs), 100 * err, sub, zero,
                    rows * sel.selected_blocks());
      }
    }
    CHECK(subnormal[1] <= subnormal[0]);
  }

} // TEST_SUITE
