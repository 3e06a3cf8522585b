// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Reference linear layer under each policy: forward and backward against direct
//! computation on small dense and grouped shapes, finite differences, the STE definitions, and
//! the fp32 variant against the float64 one.
#include <doctest/doctest.h>

#include "policy_helpers.hpp"

#include <quads/policy/policies.hpp>
#include <quads/policy/reference.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

using namespace policy_test;
namespace ref = quads::reference;

namespace {

struct problem {
  quads::linear_shape shape;
  std::vector<float> x, w, bias, dy;
};

problem make_problem(std::string_view name, quads::linear_shape s, bool with_bias) {
  auto g = quads_test::rng(name);
  problem p;
  const std::size_t M = static_cast<std::size_t>(s.total_rows());
  p.w = weights(g, s.experts, s.n, s.k);
  // Every clipped-STE case must mask at least one gradient whatever the seed (without the plant,
  // seed 2217622179390164543 masked none of one case's 448 weights).
  plant_mx_floor_saturation(p.w);
  p.x = quads_test::normal_values(g, M * s.k);
  for (float& v : p.x)
    v = ref::round_bf16(v);
  if (with_bias) p.bias = quads_test::normal_values(g, static_cast<std::size_t>(s.experts) * s.n);
  p.dy = quads_test::normal_values(g, M * s.n);
  for (float& v : p.dy)
    v = ref::round_bf16(v);
  p.shape = std::move(s);
  return p;
}

//! The operands computed directly with the other tensor path (`reference::qdq`), per the
//! policy table: weights as one `[E, n, k]` stack, activations per expert group with seed
//! `act_seed + e`.
template <class P>
std::vector<float> direct_weight_operand(const problem& p, const quads::fake_quant_args& a) {
  if constexpr (P::quantizes_weights) {
    using Q = typename P::weight_quantizer;
    return ref::qdq<typename Q::format, Q::options>(
        p.w, p.shape.n, p.shape.k, {p.shape.experts, a.weight_given, a.weight_seed});
  } else {
    return p.w;
  }
}
template <class P>
std::vector<float> direct_act_operand(const problem& p, const quads::fake_quant_args& a) {
  if constexpr (P::quantizes_activations) {
    using Q = typename P::activation_quantizer;
    std::vector<float> out;
    for (int e = 0; e < p.shape.experts; ++e) {
      const std::size_t r0 = static_cast<std::size_t>(p.shape.row_offset(e)) * p.shape.k;
      const int rows = p.shape.rows[static_cast<std::size_t>(e)];
      std::span<const quads::tensor_scale> given = a.act_given;
      if (given.size() > 1) given = given.subspan(static_cast<std::size_t>(e), 1);
      const auto part = ref::qdq<typename Q::format, Q::options>(
          std::span<const float>(p.x).subspan(r0, static_cast<std::size_t>(rows) * p.shape.k), rows,
          p.shape.k, {1, given, a.act_seed + static_cast<std::uint64_t>(e)});
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  } else {
    return p.x;
  }
}

//! y = Xop Wop^T + b, computed directly in long double.
std::vector<long double> direct_forward(const problem& p, const std::vector<float>& xo,
                                        const std::vector<float>& wo) {
  const auto& s = p.shape;
  std::vector<long double> y(static_cast<std::size_t>(s.total_rows()) * s.n);
  for (int e = 0; e < s.experts; ++e)
    for (int i = 0; i < s.rows[static_cast<std::size_t>(e)]; ++i) {
      const std::size_t row = static_cast<std::size_t>(s.row_offset(e) + i);
      for (int j = 0; j < s.n; ++j) {
        long double acc = p.bias.empty() ? 0.0L : p.bias[static_cast<std::size_t>(e) * s.n + j];
        for (int c = 0; c < s.k; ++c)
          acc += static_cast<long double>(xo[row * s.k + c]) *
                 wo[(static_cast<std::size_t>(e) * s.n + j) * s.k + c];
        y[row * s.n + j] = acc;
      }
    }
  return y;
}

//! L = <dy, y(Xop, Wop)>; used for finite differences (exact in long double: y is linear).
long double loss(const problem& p, const std::vector<float>& xo, const std::vector<float>& wo) {
  const auto y = direct_forward(p, xo, wo);
  long double l = 0.0L;
  for (std::size_t i = 0; i < y.size(); ++i)
    l += y[i] * p.dy[i];
  return l;
}

template <class P>
void check_policy(const problem& p, const quads::fake_quant_args& args = {}) {
  const auto& s = p.shape;
  INFO("policy " << std::string(P::name) << ", experts " << s.experts << ", n " << s.n << ", k "
                 << s.k);
  const auto fwd = ref::linear_forward<P>(p.x, p.w, p.bias, s, args);
  const std::vector<float> wo = direct_weight_operand<P>(p, args);
  const std::vector<float> xo = direct_act_operand<P>(p, args);
  REQUIRE(diff(fwd.saved.weights.values, wo) == "");
  std::vector<float> xo_saved;
  for (const auto& a : fwd.saved.acts)
    xo_saved.insert(xo_saved.end(), a.values.begin(), a.values.end());
  REQUIRE(diff(xo_saved, xo) == "");

  // Forward against direct long-double computation.
  const auto y_direct = direct_forward(p, xo, wo);
  for (std::size_t i = 0; i < y_direct.size(); ++i)
    REQUIRE(fwd.y[i] == doctest::Approx(static_cast<double>(y_direct[i])).epsilon(1e-12));

  const auto grads = ref::linear_backward<P>(p.dy, p.x, p.w, s, fwd.saved);

  // dW before the STE = dy^T Xop, by finite differences in Wop (y is linear in Wop, so a
  // central difference of step h is exact up to long-double rounding).
  std::vector<long double> dw_wq(wo.size());
  {
    std::vector<float> wp = wo;
    for (std::size_t i = 0; i < wo.size(); ++i) {
      const float h = 0.25f;
      wp[i] = wo[i] + h;
      const long double up = wp[i];
      const long double lp = loss(p, xo, wp);
      wp[i] = wo[i] - h;
      const long double down = wp[i];
      const long double lm = loss(p, xo, wp);
      wp[i] = wo[i];
      dw_wq[i] = (lp - lm) / (up - down); // the step actually taken in fp32
    }
  }
  std::vector<double> wmask(wo.size(), 1.0);
  if constexpr (P::quantizes_weights) {
    std::vector<double> ones(wo.size(), 1.0);
    ref::apply_ste<typename P::weight_quantizer, typename P::weight_gradient, double>(
        p.w, std::span<double>(ones), fwd.saved.weights);
    wmask = ones;
  }
  int masked_w = 0;
  for (std::size_t i = 0; i < wo.size(); ++i) {
    if (wmask[i] == 0.0) {
      ++masked_w;
      REQUIRE(grads.dw[i] == 0.0);
    } else {
      REQUIRE(grads.dw[i] ==
              doctest::Approx(wmask[i] * static_cast<double>(dw_wq[i])).epsilon(1e-9));
    }
  }
  if (std::is_same_v<typename P::weight_gradient, quads::ste::identity>) REQUIRE(masked_w == 0);
  if (std::is_same_v<typename P::weight_gradient, quads::ste::clipped>) {
    MESSAGE(std::string(P::name) << ": clipped STE masked " << masked_w << " of " << wo.size()
                                 << " weight gradients");
    REQUIRE(masked_w > 0);
  }

  // dx: d L / d Xop by finite differences, then the activation STE (weights-only: identity).
  std::vector<double> xmask(xo.size(), 1.0);
  if constexpr (P::quantizes_activations) {
    for (int e = 0; e < s.experts; ++e) {
      const std::size_t r0 = static_cast<std::size_t>(s.row_offset(e)) * s.k;
      const std::size_t len = static_cast<std::size_t>(s.rows[static_cast<std::size_t>(e)]) * s.k;
      ref::apply_ste<typename P::activation_quantizer, typename P::activation_gradient, double>(
          std::span<const float>(p.x).subspan(r0, len), std::span<double>(xmask).subspan(r0, len),
          fwd.saved.acts[static_cast<std::size_t>(e)]);
    }
  }
  {
    std::vector<float> xp = xo;
    for (std::size_t i = 0; i < xo.size(); ++i) {
      const float h = 0.25f;
      xp[i] = xo[i] + h;
      const long double up = xp[i];
      const long double lp = loss(p, xp, wo);
      xp[i] = xo[i] - h;
      const long double down = xp[i];
      const long double lm = loss(p, xp, wo);
      xp[i] = xo[i];
      const double fd = static_cast<double>((lp - lm) / (up - down));
      if (xmask[i] == 0.0)
        REQUIRE(grads.dx[i] == 0.0);
      else
        REQUIRE(grads.dx[i] == doctest::Approx(xmask[i] * fd).epsilon(1e-9));
    }
  }

  // dbias: column sums of dy per expert.
  for (int e = 0; e < s.experts; ++e)
    for (int j = 0; j < s.n; ++j) {
      double sum = 0.0;
      for (int i = 0; i < s.rows[static_cast<std::size_t>(e)]; ++i)
        sum += p.dy[static_cast<std::size_t>(s.row_offset(e) + i) * s.n + j];
      REQUIRE(grads.dbias[static_cast<std::size_t>(e) * s.n + j] ==
              doctest::Approx(sum).epsilon(1e-12));
    }

  // The fp32 variant: same operands, fp32 accumulation; close to float64 relative to the sum of
  // |terms| (K or M terms, u = 2^-24).
  const auto fwd32 = ref::linear_forward<P, float>(p.x, p.w, p.bias, s, args);
  CHECK(diff(fwd32.saved.weights.values, fwd.saved.weights.values) == "");
  const auto g32 = ref::linear_backward<P, float>(p.dy, p.x, p.w, s, fwd32.saved);
  auto close = [](const std::vector<float>& a, const std::vector<double>& b, double bound) {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (std::fabs(a[i] - b[i]) > bound * (1.0 + std::fabs(b[i]))) return false;
    return true;
  };
  const double bound = 1e-4;
  CHECK(close(fwd32.y, fwd.y, bound));
  CHECK(close(g32.dx, grads.dx, bound));
  CHECK(close(g32.dw, grads.dw, bound));
  CHECK(close(g32.dbias, grads.dbias, bound));
}

template <class P>
void check_both_shapes(std::string_view name, const quads::fake_quant_args& args = {}) {
  check_policy<P>(
      make_problem(std::string(name) + ".dense", quads::linear_shape::dense(5, 7, 64), true), args);
  check_policy<P>(make_problem(std::string(name) + ".grouped",
                               quads::linear_shape::grouped(6, 64, {4, 0, 3}), true),
                  args);
}

} // namespace

TEST_SUITE("policy.reference_linear") {
  TEST_CASE("bf16 baseline: y = x W^T + b, dx = dy W, dW = dy^T x") {
    check_both_shapes<quads::no_fake_quant>("lin.bf16");
  }
  TEST_CASE("weight_only nvfp4 (identity STE): forward on QDQ(W), dW = dy^T x") {
    check_both_shapes<quads::weight_only<quads::nvfp4>>("lin.wo");
  }
  TEST_CASE("weight_only nvfp4 with clipped STE masks exactly the saturated weights") {
    check_both_shapes<quads::weight_only<quads::nvfp4, o_default, quads::ste::clipped>>(
        "lin.wo.clip");
  }
  TEST_CASE("weight_only mxfp4 floor rule with clipped STE and stochastic rounding") {
    check_both_shapes<quads::weight_only<quads::mxfp4, o_mx_floor_sr, quads::ste::clipped>>(
        "lin.mx", {.weight_seed = quads_test::derived_seed("lin.mx")});
  }
  TEST_CASE("w4a4 nvfp4 (per-row activations): both operands fake-quantized") {
    check_both_shapes<quads::w4a4<quads::nvfp4>>("lin.w4a4");
  }
  TEST_CASE("w4a4 nvfp4 with clipped STE on weights and activations, stochastic activations") {
    constexpr quads::quant_options act{.round = quads::rounding::stochastic,
                                       .global = quads::global_scale::per_row};
    check_both_shapes<quads::w4a4<quads::nvfp4, o_default, act, quads::ste::clipped>>(
        "lin.w4a4.clip", {.act_seed = quads_test::derived_seed("lin.w4a4.clip")});
  }
  TEST_CASE("w4a4 mxfp4 with clipped STE") {
    check_both_shapes<quads::w4a4<quads::mxfp4, o_mx_floor, o_mx_floor, quads::ste::clipped>>(
        "lin.w4a4.mx");
  }
  TEST_CASE("given tensor scales: one for all experts, or one per expert") {
    auto p = make_problem("lin.given", quads::linear_shape::grouped(6, 32, {2, 3, 1}), false);
    const std::vector<quads::tensor_scale> one = {quads::make_tensor_scale<quads::nvfp4>(0.3f)};
    check_policy<quads::weight_only<quads::nvfp4, o_given, quads::ste::clipped>>(
        p, {.weight_given = one});
    const std::vector<quads::tensor_scale> per = {quads::make_tensor_scale<quads::nvfp4>(0.1f),
                                                  quads::make_tensor_scale<quads::nvfp4>(0.2f),
                                                  quads::make_tensor_scale<quads::nvfp4>(2.0f)};
    check_policy<quads::w4a4<quads::nvfp4, o_given, o_given>>(
        p, {.weight_given = per, .act_given = per});
  }
  TEST_CASE("bad shapes throw std::invalid_argument with a message") {
    const std::vector<float> x(3 * 48), w(4 * 48);
    CHECK_THROWS_AS((ref::linear_forward<quads::weight_only<quads::mxfp4>>(
                        x, w, {}, quads::linear_shape::dense(3, 4, 48))),
                    std::invalid_argument); // k not a multiple of 32
    CHECK_THROWS_AS(
        (ref::linear_forward<quads::no_fake_quant>(x, w, {}, quads::linear_shape::dense(4, 4, 48))),
        std::invalid_argument); // x too short
    CHECK_THROWS_AS((ref::linear_forward<quads::no_fake_quant>(
                        x, w, std::vector<float>(3), quads::linear_shape::dense(3, 4, 48))),
                    std::invalid_argument); // bias size
    quads::linear_shape bad = quads::linear_shape::grouped(4, 48, {1, 2});
    bad.experts = 3;
    CHECK_THROWS_AS((ref::linear_forward<quads::no_fake_quant>(x, w, {}, bad)),
                    std::invalid_argument);
  }
}
