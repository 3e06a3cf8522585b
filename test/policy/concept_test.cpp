// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The `fake_quant_policy` and `straight_through_estimator` concepts: the library's
//! policies satisfy them, a user-written policy (with a user STE rule) plugs into the reference
//! linear layer, and broken types are rejected.
#include <doctest/doctest.h>

#include "policy_helpers.hpp"

#include <quads/policy/policies.hpp>
#include <quads/policy/reference.hpp>
#include <quads/policy/weight_sync.hpp>

#include <cstring>
#include <type_traits>

using namespace policy_test;
namespace ref = quads::reference;

namespace {

//! A user STE rule: half the gradient where the element saturated (a "soft" clipped STE).
struct half_at_saturation {
  static constexpr const char* name = "half_at_saturation";
  static constexpr bool needs_multiplier = true;
  static constexpr float factor(float x, float m) noexcept {
    return quads::ste::clipped::saturated(x, m) ? 0.5f : 1.0f;
  }
};

//! A user-written policy: MXFP4 weights with the OCP floor rule (which saturates), the user STE.
struct user_mx_floor_policy {
  static constexpr const char* name = "user_mx_floor";
  static constexpr bool quantizes_weights = true;
  static constexpr bool quantizes_activations = false;
  using weight_quantizer = quads::block_quantizer<quads::mxfp4, o_mx_floor>;
  using activation_quantizer = quads::no_quantizer;
  using weight_gradient = half_at_saturation;
  using activation_gradient = quads::ste::identity;
};

struct missing_name {
  static constexpr bool quantizes_weights = false;
  static constexpr bool quantizes_activations = false;
  using weight_quantizer = quads::no_quantizer;
  using activation_quantizer = quads::no_quantizer;
  using weight_gradient = quads::ste::identity;
  using activation_gradient = quads::ste::identity;
};
struct flag_without_quantizer { // says it quantizes weights but has no quantizer
  static constexpr const char* name = "x";
  static constexpr bool quantizes_weights = true;
  static constexpr bool quantizes_activations = false;
  using weight_quantizer = quads::no_quantizer;
  using activation_quantizer = quads::no_quantizer;
  using weight_gradient = quads::ste::identity;
  using activation_gradient = quads::ste::identity;
};
struct not_an_ste {
  static constexpr const char* name = "n";
  static float factor(double x) { return static_cast<float>(x); }
};
struct bad_gradient {
  static constexpr const char* name = "x";
  static constexpr bool quantizes_weights = false;
  static constexpr bool quantizes_activations = false;
  using weight_quantizer = quads::no_quantizer;
  using activation_quantizer = quads::no_quantizer;
  using weight_gradient = not_an_ste;
  using activation_gradient = quads::ste::identity;
};
struct quantizer_not_block_quantizer {
  static constexpr const char* name = "x";
  static constexpr bool quantizes_weights = true;
  static constexpr bool quantizes_activations = false;
  using weight_quantizer = quads::nvfp4; // a format, not a quantizer
  using activation_quantizer = quads::no_quantizer;
  using weight_gradient = quads::ste::identity;
  using activation_gradient = quads::ste::identity;
};

} // namespace

// The library's policies and the user's policy satisfy the concept (checked with the readable
// checker too, which would name the missing requirement).
static_assert(quads::check_fake_quant_policy<quads::no_fake_quant>());
static_assert(quads::check_fake_quant_policy<quads::weight_only<quads::nvfp4>>());
static_assert(quads::check_fake_quant_policy<
              quads::weight_only<quads::mxfp4, o_mx_floor, quads::ste::clipped>>());
static_assert(quads::check_fake_quant_policy<quads::w4a4<quads::nvfp4>>());
static_assert(quads::check_fake_quant_policy<user_mx_floor_policy>());
static_assert(quads::straight_through_estimator<half_at_saturation>);
// Broken types are rejected by the concept.
static_assert(!quads::fake_quant_policy<missing_name>);
static_assert(!quads::fake_quant_policy<flag_without_quantizer>);
static_assert(!quads::fake_quant_policy<bad_gradient>);
static_assert(!quads::fake_quant_policy<quantizer_not_block_quantizer>);
static_assert(!quads::fake_quant_policy<int>);
static_assert(!quads::straight_through_estimator<not_an_ste>);
// Static members a caller reads.
static_assert(!quads::no_fake_quant::quantizes_weights &&
              !quads::no_fake_quant::quantizes_activations);
static_assert(quads::weight_only<quads::nvfp4>::quantizes_weights &&
              !quads::weight_only<quads::nvfp4>::quantizes_activations);
static_assert(std::is_same_v<quads::weight_only<quads::nvfp4>::weight_quantizer,
                             quads::block_quantizer<quads::nvfp4, quads::quant_options{}>>);
static_assert(
    std::is_same_v<quads::weight_only<quads::nvfp4>::weight_gradient, quads::ste::identity>);
static_assert(std::is_same_v<quads::w4a4<quads::nvfp4>::activation_quantizer,
                             quads::block_quantizer<quads::nvfp4, quads::per_row_options>>);
static_assert(quads::w4a4<quads::nvfp4>::activation_quantizer::options.global ==
              quads::global_scale::per_row);
static_assert(std::is_same_v<quads::w4a4<quads::mxfp4, o_default, o_default,
                                         quads::ste::clipped>::activation_gradient,
                             quads::ste::clipped>);

TEST_SUITE("policy.concept") {
  TEST_CASE("a user-written policy with a user STE rule runs through the reference linear layer") {
    auto g = quads_test::rng("policy.concept.user");
    const int M = 6, N = 5, K = 64;
    std::vector<float> w = weights(g, 1, N, K);
    for (std::size_t i = 0; i < w.size(); i += 32)
      plant_mx_floor_saturation(std::span<float>(w).subspan(i, 32)); // every block clips
    const std::vector<float> x = quads_test::normal_values(g, static_cast<std::size_t>(M) * K);
    const std::vector<float> dy = quads_test::normal_values(g, static_cast<std::size_t>(M) * N);
    const auto s = quads::linear_shape::dense(M, N, K);

    const auto fwd = ref::linear_forward<user_mx_floor_policy>(x, w, {}, s);
    // The weight operand is the MXFP4-floor QDQ of W, computed by the other tensor path.
    const std::vector<float> wq = ref::qdq<quads::mxfp4, o_mx_floor>(w, N, K);
    CHECK(diff(fwd.saved.weights.values, wq) == "");

    const auto grads = ref::linear_backward<user_mx_floor_policy>(dy, x, w, s, fwd.saved);
    const std::vector<std::uint8_t> sat =
        ref::saturation_mask<user_mx_floor_policy::weight_quantizer>(w, fwd.saved.weights);
    int halved = 0;
    for (int j = 0; j < N; ++j)
      for (int c = 0; c < K; ++c) {
        double direct = 0.0;
        for (int i = 0; i < M; ++i)
          direct += static_cast<double>(dy[i * N + j]) * static_cast<double>(x[i * K + c]);
        const std::size_t idx = static_cast<std::size_t>(j) * K + c;
        if (sat[idx]) ++halved;
        CHECK(grads.dw[idx] == doctest::Approx(sat[idx] ? 0.5 * direct : direct).epsilon(1e-12));
      }
    CHECK(halved > 0); // the user rule was exercised
    CHECK(std::strcmp(user_mx_floor_policy::name, "user_mx_floor") == 0);
  }

  TEST_CASE("a user-written policy gets weight sync like the library's policies") {
    auto g = quads_test::rng("policy.concept.sync");
    const std::vector<float> w = weights(g, 2, 8, 64);
    const auto packed = ref::sync_weights<user_mx_floor_policy, quads::swizzled_128x4>(w, 2, 8, 64);
    const auto fq = ref::fake_quant_weights<user_mx_floor_policy>(w, 2, 8, 64);
    CHECK(diff(ref::rollout_weights<user_mx_floor_policy>(packed), fq.values) == "");
  }
}
