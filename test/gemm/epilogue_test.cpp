// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host tests of the epilogue nodes and chains (applied by the host reference exactly as
//!        the GPU epilogue pass applies them), of a user-written node, and of the reference GEMM.
#include <doctest/doctest.h>

#include "gemm_fixtures.hpp"

#include <quads/compensation/reference.hpp>
#include <quads/epilogue/epilogue.hpp>
#include <quads/gemm/reference.hpp>
#include <quads/gemm/weight_layout.hpp>
#include <quads/reference/tensor.hpp>

#include <test_support/bits.hpp>
#include <test_support/seed.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace qe = quads::epilogue;
namespace qg = quads::gemm;
namespace qgr = quads::gemm::reference;
namespace qt = quads_gemm_test;

namespace {

using qt::clamp_node;

//! A user-written fragment node: adds the column's index within the fragment (tests fragments).
struct add_lane_node {
  struct arguments {};
  struct params {};
  static constexpr params to_params(const arguments&) noexcept { return {}; }
  template <int W>
  static constexpr qe::fragment<W> apply(const qe::fragment<W>& f, const params&) noexcept {
    auto g = f;
    for (int i = 0; i < f.count; ++i) g.v[i] += static_cast<float>(i);
    return g;
  }
};

//! A fragment node that changes nothing: chained after an element node, it makes the chain hand
//! whole 16-column fragments to that node's fragment form.
struct pass_fragment_node {
  struct arguments {};
  struct params {};
  static constexpr params to_params(const arguments&) noexcept { return {}; }
  template <int W>
  static constexpr qe::fragment<W> apply(const qe::fragment<W>& f, const params&) noexcept {
    return f;
  }
};

static_assert(qe::epilogue_node<clamp_node> && qe::epilogue_node<add_lane_node> &&
              qe::epilogue_node<pass_fragment_node>);
static_assert(qe::epilogue_node<qe::scale_alpha> && qe::epilogue_node<qe::bias<quads::bf16_t>> &&
              qe::epilogue_node<qe::swiglu<>> && qe::epilogue_node<qe::rac_residual> &&
              qe::epilogue_node<qe::store<quads::fp16_t>>);
static_assert(std::is_trivially_copyable_v<
              qe::chain<qe::scale_alpha, qe::bias<float>, clamp_node, qe::store<float>>::params>);
static_assert(qe::chain<qe::swiglu<>, qe::store<float>>::input_width == 2);
using q_given = quads::block_quantizer<quads::nvfp4,
                                       quads::quant_options{.global = quads::global_scale::given}>;
static_assert(qe::chain<qe::swiglu<>, qe::quantize_output<q_given>>::input_width == 32);
static_assert(qe::chain<qe::quantize_output<quads::block_quantizer<quads::mxfp4>>>::input_width == 32);
// fragment widths the GEMM epilogues use: 1 for element-wise chains, else lcm(input width, 16)
static_assert(qe::fragment_width<qe::chain<qe::scale_alpha, qe::bias<float>, clamp_node, qe::store<float>>> == 1);
static_assert(qe::fragment_width<qe::chain<add_lane_node, qe::store<float>>> == 16);
static_assert(qe::fragment_width<qe::chain<qe::swiglu<>, qe::store<float>>> == 16);
static_assert(qe::fragment_width<qe::chain<qe::swiglu<>, qe::quantize_output<q_given>>> == 32);
static_assert(qe::fragment_width<qe::chain<qe::scale_alpha, qe::chain<qe::bias<float>, qe::store<float>>>> == 1);
// a chain is a node: nesting keeps the width facts
static_assert(qe::chain<qe::scale_alpha, qe::chain<qe::swiglu<>, qe::quantize_output<q_given>>>::input_width == 32);

// lane groups (GEMM epilogues give a fragment to `lane_group_size` lanes): only chains whose
// block nodes all have a group form, with every width change before them
struct group_block_node {
  struct arguments {};
  struct params {};
  static constexpr int min_width = 16;
  static constexpr params to_params(const arguments&) noexcept { return {}; }
  template <int W>
  static constexpr qe::fragment<W> apply(const qe::fragment<W>& f, const params&) noexcept {
    return f;
  }
  template <int W, int G>
  static qe::fragment<W> apply_group(const qe::fragment<W>& f, const params&, qe::lane_group<G>);
};
static_assert(qe::group_node<group_block_node> && !qe::group_node<qe::quantize_output<q_given>>);
static_assert(qe::lane_group_size<qe::chain<qe::scale_alpha, qe::swiglu<>, group_block_node>> == 16);
static_assert(qe::lane_group_size<qe::chain<group_block_node, qe::store<float>>> == 16);
static_assert(qe::lane_group_size<qe::chain<qe::swiglu<>, qe::quantize_output<q_given>>> == 1);
static_assert(qe::lane_group_size<qe::chain<qe::scale_alpha, qe::store<float>>> == 1);
// a width change after the block node would leave a lane two columns of it: no groups
static_assert(qe::lane_group_size<qe::chain<group_block_node, qe::swiglu<>>> == 1);
// a nested chain with a group form but a width change inside is not a group node of the outer one
static_assert(qe::lane_group_size<qe::chain<qe::scale_alpha, qe::chain<qe::swiglu<>, group_block_node>>> == 1);
static_assert(qe::lane_group_size<qe::chain<qe::scale_alpha, qe::chain<qe::swiglu<>, qe::quantize_output<q_given>>>> == 1);

qgr::accumulators random_acc(std::mt19937_64& g, int M, int N, bool residual) {
  std::normal_distribution<double> d(0.0, 100.0);
  qgr::accumulators a;
  a.rows = M;
  a.cols = N;
  a.k_terms = 64;
  a.acc.resize(static_cast<std::size_t>(M) * N);
  for (double& v : a.acc) v = static_cast<double>(static_cast<float>(d(g)));
  if (residual) {
    a.acc_r.resize(a.acc.size());
    for (double& v : a.acc_r) v = static_cast<double>(static_cast<float>(d(g) * 0.1));
  }
  a.abs_sum.assign(a.acc.size(), 1.0);
  return a;
}

} // namespace

TEST_SUITE("gemm.epilogue") {

TEST_CASE("scale_alpha applies per-tensor, per-row, per-column and per-expert scales") {
  auto g = quads_test::rng("gemm.epilogue.alpha");
  const int M = 5, N = 56;  // 16-column fragments: three whole ones and a tail of 8
  const auto acc = random_acc(g, M, N, false);
  std::vector<quads::tensor_scale> rows(M), cols(N), experts(3), one{{2.0f, 0.5f}};
  std::uniform_real_distribution<float> u(0.01f, 4.0f);
  for (auto& s : rows) s = quads::tensor_scale_from_decode(u(g));
  for (auto& s : cols) s = quads::tensor_scale_from_decode(u(g));
  for (auto& s : experts) s = quads::tensor_scale_from_decode(u(g));
  const int expert_of_row[M] = {2, 0, 1, 1, 2};
  struct mode {
    const quads::tensor_scale* a;
    qe::scale_source am;
    const quads::tensor_scale* w;
    qe::scale_source wm;
  };
  const mode modes[] = {{one.data(), qe::scale_source::tensor, one.data(), qe::scale_source::tensor},
                        {rows.data(), qe::scale_source::row, one.data(), qe::scale_source::tensor},
                        {one.data(), qe::scale_source::tensor, cols.data(), qe::scale_source::col},
                        {rows.data(), qe::scale_source::row, experts.data(), qe::scale_source::expert},
                        {nullptr, qe::scale_source::none, nullptr, qe::scale_source::none}};
  for (const mode& md : modes)
    for (const bool wide : {false, true}) {  // one column per fragment, or 16 (fragment form)
    std::vector<float> out(static_cast<std::size_t>(M) * N);
    using narrow_epi = qe::chain<qe::scale_alpha, qe::store<float>>;
    using wide_epi = qe::chain<qe::scale_alpha, pass_fragment_node, qe::store<float>>;
    static_assert(qe::fragment_width<narrow_epi> == 1 && qe::fragment_width<wide_epi> == 16);
    const qe::alpha_source alpha{.alpha = 0.75f, .a = md.a, .a_mode = md.am, .w = md.w,
                                 .w_mode = md.wm, .expert_of_row = expert_of_row};
    if (wide)
      qgr::apply_epilogue<wide_epi>(acc, wide_epi::arguments{alpha, {}, {out.data(), N}});
    else
      qgr::apply_epilogue<narrow_epi>(acc, narrow_epi::arguments{alpha, {out.data(), N}});
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        float a = 0.75f;
        if (md.am == qe::scale_source::tensor) a *= md.a[0].decode;
        if (md.am == qe::scale_source::row) a *= md.a[m].decode;
        if (md.wm == qe::scale_source::tensor) a *= md.w[0].decode;
        if (md.wm == qe::scale_source::col) a *= md.w[n].decode;
        if (md.wm == qe::scale_source::expert) a *= md.w[expert_of_row[m]].decode;
        const float want = static_cast<float>(acc.acc[acc.index(m, n)]) * a;
        INFO("wide " << wide << " row " << m << " col " << n);
        REQUIRE(quads_test::same_bits(out[acc.index(m, n)], want));
      }
  }
}

TEST_CASE("bias, a user clamp and a 16-bit store compose in order, one rounding each") {
  auto g = quads_test::rng("gemm.epilogue.bias");
  const int M = 3, N = 80;
  const auto acc = random_acc(g, M, N, false);
  std::vector<quads::bf16_t> bias(N);
  std::normal_distribution<float> d(0.0f, 50.0f);
  for (auto& b : bias) b = quads::element_traits<quads::bf16_t>::from_float(d(g));
  std::vector<quads::fp16_t> out(static_cast<std::size_t>(M) * 96, quads::fp16_t{0x7e00});
  using epi = qe::chain<qe::bias<quads::bf16_t>, clamp_node, qe::store<quads::fp16_t>>;
  qgr::apply_epilogue<epi>(acc, epi::arguments{{bias.data()}, {-80.0f, 90.0f}, {out.data(), 96}});
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      float v = static_cast<float>(acc.acc[acc.index(m, n)]) +
                quads::element_traits<quads::bf16_t>::to_float(bias[static_cast<std::size_t>(n)]);
      v = v < -80.0f ? -80.0f : (v > 90.0f ? 90.0f : v);
      REQUIRE(out[static_cast<std::size_t>(m) * 96 + n].bits == quads::detail::float_to_fp16_bits(v));
    }
    for (int n = N; n < 96; ++n) CHECK(out[static_cast<std::size_t>(m) * 96 + n].bits == 0x7e00);  // ld padding untouched
  }
}

TEST_CASE("a user fragment node sees fragments of 16 columns with a shorter tail") {
  const int M = 2, N = 48 + 8;  // not a multiple of 16: the last fragment has 8 columns
  qgr::accumulators acc;
  acc.rows = M;
  acc.cols = N;
  acc.acc.assign(static_cast<std::size_t>(M) * N, 0.0);
  acc.abs_sum.assign(acc.acc.size(), 0.0);
  std::vector<float> out(static_cast<std::size_t>(M) * N, -1.0f);
  using epi = qe::chain<add_lane_node, qe::store<float>>;
  qgr::apply_epilogue<epi>(acc, epi::arguments{{}, {out.data(), N}});
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) CHECK(out[static_cast<std::size_t>(m) * N + n] == static_cast<float>(n % 16));
}

TEST_CASE("swiglu pairs interleaved columns and halves the width") {
  auto g = quads_test::rng("gemm.epilogue.swiglu");
  const int M = 4, N = 96;
  const auto acc = random_acc(g, M, N, false);
  std::vector<float> out(static_cast<std::size_t>(M) * N / 2);
  using epi = qe::chain<qe::scale_alpha, qe::swiglu<>, qe::store<float>>;
  qgr::apply_epilogue<epi>(acc, epi::arguments{{.alpha = 0.01f}, {}, {out.data(), N / 2}});
  for (int m = 0; m < M; ++m)
    for (int j = 0; j < N / 2; ++j) {
      const double gate = static_cast<float>(acc.acc[acc.index(m, 2 * j)]) * 0.01f;
      const double up = static_cast<float>(acc.acc[acc.index(m, 2 * j + 1)]) * 0.01f;
      const double want = gate / (1.0 + std::exp(-gate)) * up;
      REQUIRE(std::fabs(out[static_cast<std::size_t>(m) * (N / 2) + j] - want) <=
              4e-7 * (std::fabs(want) + std::fabs(up)) + 1e-30);
    }
  // an odd column count is refused by the chain's check
  qgr::accumulators odd = random_acc(g, 1, 17, false);
  CHECK_THROWS_AS(qgr::apply_epilogue<epi>(odd, epi::arguments{{}, {}, {out.data(), 8}}),
                  std::invalid_argument);
}

TEST_CASE("quantize_output writes the bytes of the reference quantizer (given scale, RNE and SR)") {
  auto g = quads_test::rng("gemm.epilogue.quantize");
  const int M = 6, N = 48;
  const auto acc = random_acc(g, M, N, false);
  const quads::tensor_scale ts = quads::make_tensor_scale<quads::nvfp4>(300.0f);
  std::vector<float> vals(acc.acc.begin(), acc.acc.end());
  {
    std::vector<std::uint8_t> data(static_cast<std::size_t>(M) * N / 2), sc(static_cast<std::size_t>(M) * N / 16);
    using epi = qe::chain<qe::quantize_output<q_given>>;
    qgr::apply_epilogue<epi>(acc, epi::arguments{{data.data(), sc.data(), &ts, M, N, 0}});
    const quads::reference::quantize_args args{.experts = 1, .given = std::span(&ts, 1)};
    const auto ref = quads::reference::quantize<quads::nvfp4, q_given::options>(vals, M, N, args);
    CHECK(quads_test::mismatch_report(data, ref.data) == "");
    CHECK(quads_test::mismatch_report(sc, ref.scales) == "");
  }
  {
    constexpr quads::quant_options sr{.round = quads::rounding::stochastic,
                                      .global = quads::global_scale::given};
    using q_sr = quads::block_quantizer<quads::nvfp4, sr>;
    const std::uint64_t seed = quads_test::derived_seed("gemm.epilogue.quantize.sr");
    std::vector<std::uint8_t> data(static_cast<std::size_t>(M) * N / 2), sc(static_cast<std::size_t>(M) * N / 16);
    using epi = qe::chain<qe::quantize_output<q_sr>>;
    qgr::apply_epilogue<epi>(acc, epi::arguments{{data.data(), sc.data(), &ts, M, N, seed}});
    const quads::reference::quantize_args args{.experts = 1, .given = std::span(&ts, 1), .seed = seed};
    const auto ref = quads::reference::quantize<quads::nvfp4, sr>(vals, M, N, args);
    CHECK(quads_test::mismatch_report(data, ref.data) == "");
    CHECK(quads_test::mismatch_report(sc, ref.scales) == "");
  }
}

TEST_CASE("swiglu then quantize_output quantizes the activated half-width output") {
  auto g = quads_test::rng("gemm.epilogue.swiglu_quantize");
  const int M = 3, N = 96;
  const auto acc = random_acc(g, M, N, false);
  const quads::tensor_scale ts = quads::make_tensor_scale<quads::nvfp4>(5000.0f);
  std::vector<std::uint8_t> data(static_cast<std::size_t>(M) * N / 4), sc(static_cast<std::size_t>(M) * N / 32);
  std::vector<float> act(static_cast<std::size_t>(M) * N / 2);
  using epi = qe::chain<qe::swiglu<>, qe::store<float>, qe::quantize_output<q_given>>;
  qgr::apply_epilogue<epi>(acc, epi::arguments{{}, {act.data(), N / 2}, {data.data(), sc.data(), &ts, M, N / 2, 0}});
  const quads::reference::quantize_args args{.experts = 1, .given = std::span(&ts, 1)};
  const auto ref = quads::reference::quantize<quads::nvfp4, q_given::options>(act, M, N / 2, args);
  CHECK(quads_test::mismatch_report(data, ref.data) == "");
  CHECK(quads_test::mismatch_report(sc, ref.scales) == "");
  // the quantize node's shape must be the one at its position (N / 2 columns), not N
  CHECK_THROWS_AS(qgr::apply_epilogue<epi>(acc, epi::arguments{{}, {act.data(), N / 2},
                                                               {data.data(), sc.data(), &ts, M, N, 0}}),
                  std::invalid_argument);
}

TEST_CASE("rac_residual adds alpha_r times the residual accumulator after scale_alpha") {
  auto g = quads_test::rng("gemm.epilogue.rac");
  const int M = 4, N = 32;
  const auto acc = random_acc(g, M, N, true);
  const std::vector<quads::tensor_scale> ax{{1.0f, 0.25f}}, ar{{1.0f, 0.03125f}}, w{{1.0f, 3.0f}};
  std::vector<float> out(static_cast<std::size_t>(M) * N);
  using epi = qe::chain<qe::scale_alpha, qe::rac_residual, qe::store<float>>;
  const qe::alpha_source alpha_x{.a = ax.data(), .a_mode = qe::scale_source::tensor, .w = w.data(),
                                 .w_mode = qe::scale_source::tensor};
  const qe::alpha_source alpha_r{.a = ar.data(), .a_mode = qe::scale_source::tensor, .w = w.data(),
                                 .w_mode = qe::scale_source::tensor};
  qgr::apply_epilogue<epi>(acc, epi::arguments{alpha_x, alpha_r, {out.data(), N}});
  const auto y = qgr::scaled(acc, alpha_x, &alpha_r);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const float want = static_cast<float>(acc.acc[i]) * (0.25f * 3.0f) +
                       static_cast<float>(acc.acc_r[i]) * (0.03125f * 3.0f);
    REQUIRE(quads_test::same_bits(out[i], want));
    CHECK(std::fabs(out[i] - y[i]) <= 1e-6 * (std::fabs(y[i]) + 1.0));
  }
}

TEST_CASE("chain and node checks refuse null pointers and bad leading dimensions") {
  using epi = qe::chain<qe::scale_alpha, qe::bias<float>, qe::store<float>>;
  float o[16];
  const quads::tensor_scale s{};
  CHECK(epi::check(epi::arguments{{}, {o}, {o, 16}}, 1, 16) == nullptr);
  CHECK(epi::check(epi::arguments{{}, {nullptr}, {o, 16}}, 1, 16) != nullptr);
  CHECK(epi::check(epi::arguments{{}, {o}, {o, 8}}, 1, 16) != nullptr);
  CHECK(epi::check(epi::arguments{{.a = nullptr, .a_mode = qe::scale_source::tensor}, {o}, {o, 16}}, 1, 16) != nullptr);
  CHECK(epi::check(epi::arguments{{.a = &s, .a_mode = qe::scale_source::row}, {o}, {o, 16}}, 1, 16) == nullptr);
  CHECK(epi::check(epi::arguments{{.w = &s, .w_mode = qe::scale_source::expert}, {o}, {o, 16}}, 1, 16) != nullptr);
}

} // TEST_SUITE

TEST_SUITE("gemm.reference") {

TEST_CASE("w4a4 equals the product of the dequantized tensors divided by the tensor scales") {
  auto g = quads_test::rng("gemm.reference.w4a4");
  const int M = 3, N = 20, K = 48;
  const auto w = qt::quantize<quads::nvfp4>(qt::random_matrix(g, N, K), N, K);
  const auto a = qt::quantize<quads::nvfp4>(qt::random_matrix(g, M, K), M, K);
  const auto acc = qgr::w4a4(a, w);
  const auto wd = quads::reference::dequantize<quads::nvfp4>(w);
  const auto ad = quads::reference::dequantize<quads::nvfp4>(a);
  const qe::alpha_source alpha{.a = a.tensor_scales.data(), .a_mode = qe::scale_source::tensor,
                               .w = w.tensor_scales.data(), .w_mode = qe::scale_source::tensor};
  const auto y = qgr::scaled(acc, alpha);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0, sa = 0;
      for (int k = 0; k < K; ++k) {
        // dequantize() rounds (e2m1 * s) * S_dec to fp32 per element; bound that rounding
        s += static_cast<double>(ad[static_cast<std::size_t>(m) * K + k]) * wd[static_cast<std::size_t>(n) * K + k];
        sa += std::fabs(static_cast<double>(ad[static_cast<std::size_t>(m) * K + k]) * wd[static_cast<std::size_t>(n) * K + k]);
      }
      REQUIRE(std::fabs(y[acc.index(m, n)] - s) <= 3 * std::ldexp(1.0, -24) * sa + 1e-300);
    }
}

TEST_CASE("w4a4_rac equals the compensation module's composition (b) reference") {
  auto g = quads_test::rng("gemm.reference.rac");
  const int M = 5, N = 24, K = 96;
  const auto w = qt::quantize<quads::nvfp4>(qt::random_matrix(g, N, K), N, K);
  for (const auto mode : {quads::compensation::residual_scale::shared,
                          quads::compensation::residual_scale::own}) {
    const auto rac = qt::make_rac(qt::random_matrix(g, M, K), M, K, 3, 0, mode);
    const auto acc = qgr::w4a4_rac(rac.act, w, rac.sel);
    CHECK(acc.has_residual() == (mode == quads::compensation::residual_scale::own));
    CHECK(acc.k_terms == K + rac.sel.selected);
    const qe::alpha_source ax{.a = rac.act.x_scales.data(), .a_mode = qe::scale_source::tensor,
                              .w = w.tensor_scales.data(), .w_mode = qe::scale_source::tensor};
    const qe::alpha_source ar{.a = rac.act.r_scales.data(), .a_mode = qe::scale_source::tensor,
                              .w = w.tensor_scales.data(), .w_mode = qe::scale_source::tensor};
    const auto y = qgr::scaled(acc, ax, &ar);
    const auto ref = quads::compensation::reference::gemm_residual(rac.act, w, rac.sel);
    CHECK(quads::compensation::reference::relative_error(y, ref) < 1e-13);
  }
}

TEST_CASE("w4a16 takes the activations as they are") {
  const int M = 1, N = 16, K = 16;
  std::vector<float> wv(N * K, 1.0f), x(K, 0.5f);
  const auto w = quads::reference::quantize<quads::nvfp4>(wv, N, K);
  const auto acc = qgr::w4a16(x, M, w);
  // each weight dequantizes (without tensor scale) to 6 * s with s = UE4M3 of amax * S_enc / 6
  const double wdq = 6.0 * quads::decode_ue4m3(w.scales[0]);
  CHECK(acc.acc[0] == doctest::Approx(K * 0.5 * wdq));
  CHECK_THROWS_AS(qgr::w4a16(std::vector<float>(3), M, w), std::invalid_argument);
}

TEST_CASE("interleave_gate_up moves rows, scales and per-row tensor scales together") {
  auto g = quads_test::rng("gemm.reference.interleave");
  const int I = 24, K = 32;
  constexpr quads::quant_options per_row{.global = quads::global_scale::per_row};
  const auto x = qt::random_matrix(g, 2 * I, K);
  const auto w = quads::reference::quantize<quads::nvfp4, per_row>(x, 2 * I, K);
  const auto wi = qg::interleave_gate_up(w);
  const auto d = quads::reference::dequantize<quads::nvfp4, per_row>(w);
  const auto di = quads::reference::dequantize<quads::nvfp4, per_row>(wi);
  for (int j = 0; j < I; ++j)
    for (int k = 0; k < K; ++k) {
      REQUIRE(quads_test::same_bits(di[static_cast<std::size_t>(2 * j) * K + k], d[static_cast<std::size_t>(j) * K + k]));
      REQUIRE(quads_test::same_bits(di[static_cast<std::size_t>(2 * j + 1) * K + k], d[static_cast<std::size_t>(I + j) * K + k]));
    }
  // interleaved rows + swiglu<interleaved> == halves + silu(gate) * up on the reference output
  std::vector<float> xa = qt::random_matrix(g, 2, K);
  const auto a = quads::reference::quantize<quads::nvfp4>(xa, 2, K);
  const auto acc_h = qgr::w4a4(a, w), acc_i = qgr::w4a4(a, wi);
  for (int m = 0; m < 2; ++m)
    for (int j = 0; j < I; ++j) {
      CHECK(acc_i.acc[acc_i.index(m, 2 * j)] == acc_h.acc[acc_h.index(m, j)]);
      CHECK(acc_i.acc[acc_i.index(m, 2 * j + 1)] == acc_h.acc[acc_h.index(m, I + j)]);
    }
  CHECK_THROWS_AS(qg::interleave_gate_up(quads::reference::quantize<quads::nvfp4>(std::vector<float>(3 * 16, 1.0f), 3, 16)),
                  std::invalid_argument);
}

TEST_CASE("the tolerance bound grows with K and with the splits") {
  qgr::accumulators a;
  a.rows = a.cols = 1;
  a.acc = {1.0};
  a.abs_sum = {100.0};
  a.k_terms = 16;
  const double t1 = qgr::tolerance(a, 0, 0, 1);
  a.k_terms = 4096;
  CHECK(qgr::tolerance(a, 0, 0, 1) > t1);
  CHECK(qgr::tolerance(a, 0, 0, 4) > qgr::tolerance(a, 0, 0, 1));
}

} // TEST_SUITE
