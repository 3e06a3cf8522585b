// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The weight-sync contract on the host: dequantizing the packed weights the rollout loads
//! gives bit for bit the trainer's fake-quantized weights, for nvfp4 and mxfp4, every host option,
//! both scale layouts, dense and expert stacks, fp32 and bf16 masters.
#include <doctest/doctest.h>

#include "policy_helpers.hpp"

#include <quads/policy/weight_sync.hpp>

#include <string>
#include <vector>

using namespace policy_test;
namespace ref = quads::reference;

namespace {

struct case_shape {
  int experts, n, k;
};
constexpr case_shape shapes[] = {
    {1, 48, 64}, {3, 20, 96}, {2, 130, 32}}; // 130 rows: swizzle padding

template <class P, class Layout>
void check_contract(std::string_view name, std::uint64_t seed, bool per_expert_given) {
  for (const case_shape cs : shapes) {
    INFO(name << " layout "
              << (std::is_same_v<Layout, quads::linear_scales> ? "linear" : "swizzled")
              << " shape [" << cs.experts << ", " << cs.n << ", " << cs.k << "]");
    auto g = quads_test::rng(std::string(name) + std::to_string(cs.n));
    for (const bool bf16 : {false, true}) {
      const std::vector<float> w = weights(g, cs.experts, cs.n, cs.k, bf16);
      std::vector<quads::tensor_scale> given;
      for (int e = 0; e < (per_expert_given ? cs.experts : 1); ++e)
        given.push_back(quads::make_tensor_scale<quads::nvfp4>(0.1f * static_cast<float>(e + 1)));
      const quads::fake_quant_args args{.weight_given = given, .weight_seed = seed};

      const auto fq = ref::fake_quant_weights<P>(w, cs.experts, cs.n, cs.k, args);
      const auto packed = ref::sync_weights<P, Layout>(w, cs.experts, cs.n, cs.k, args);
      const std::vector<float> rollout = ref::rollout_weights<P>(packed);
      REQUIRE(diff(rollout, fq.values) == "");
      // Both sides use the same tensor scales.
      REQUIRE(packed.tensor_scales.size() == fq.tensor_scales.size());
      for (std::size_t i = 0; i < fq.tensor_scales.size(); ++i) {
        REQUIRE(quads_test::same_bits(packed.tensor_scales[i].decode, fq.tensor_scales[i].decode));
        REQUIRE(quads_test::same_bits(packed.tensor_scales[i].encode, fq.tensor_scales[i].encode));
      }
      if (bf16) { // the bf16-master overload packs the same bytes
        std::vector<std::uint16_t> bits(w.size());
        for (std::size_t i = 0; i < w.size(); ++i)
          bits[i] = ref::bf16_bits(w[i]);
        const auto packed16 = ref::sync_weights<P, Layout>(std::span<const std::uint16_t>(bits),
                                                           cs.experts, cs.n, cs.k, args);
        REQUIRE(quads_test::mismatch_report(packed16.data, packed.data) == "");
        REQUIRE(quads_test::mismatch_report(packed16.scales, packed.scales) == "");
      }
      // The check can fail: a different stochastic seed changes the trainer's weights.
      if constexpr (P::weight_quantizer::options.round == quads::rounding::stochastic) {
        quads::fake_quant_args other = args;
        other.weight_seed = seed + 1;
        CHECK(diff(ref::fake_quant_weights<P>(w, cs.experts, cs.n, cs.k, other).values, rollout) !=
              "");
      }
    }
  }
}

template <class P>
void check_both_layouts(std::string_view name, std::uint64_t seed = 0,
                        bool per_expert_given = false) {
  check_contract<P, quads::linear_scales>(name, seed, per_expert_given);
  check_contract<P, quads::swizzled_128x4>(name, seed, per_expert_given);
}

} // namespace

TEST_SUITE("policy.weight_sync") {
  TEST_CASE("nvfp4 default (TE recipe): rollout weights equal the trainer's QDQ bit for bit") {
    check_both_layouts<quads::weight_only<quads::nvfp4>>("sync.nvfp4");
  }
  TEST_CASE("nvfp4 stochastic rounding with the same seed") {
    check_both_layouts<quads::weight_only<quads::nvfp4, o_stochastic>>(
        "sync.sr", quads_test::derived_seed("sync.sr"));
  }
  TEST_CASE("nvfp4 four_over_six, with and without stochastic rounding") {
    check_both_layouts<quads::weight_only<quads::nvfp4, o_four_six>>("sync.46");
    check_both_layouts<quads::weight_only<quads::nvfp4, o_four_six_sr>>(
        "sync.46sr", quads_test::derived_seed("sync.46sr"));
  }
  TEST_CASE("nvfp4 given tensor scales (one, and one per expert) and per-row scales") {
    check_both_layouts<quads::weight_only<quads::nvfp4, o_given>>("sync.given1");
    check_both_layouts<quads::weight_only<quads::nvfp4, o_given>>("sync.givenE", 0, true);
    check_both_layouts<quads::weight_only<quads::nvfp4, o_per_row>>("sync.rows");
  }
  TEST_CASE("mxfp4 round-up, floor, and stochastic rounding") {
    check_both_layouts<quads::weight_only<quads::mxfp4>>("sync.mx");
    check_both_layouts<quads::weight_only<quads::mxfp4, o_mx_floor>>("sync.mxfloor");
    check_both_layouts<quads::weight_only<quads::mxfp4, o_mx_floor_sr>>(
        "sync.mxsr", quads_test::derived_seed("sync.mxsr"));
  }
  TEST_CASE("the w4a4 policy syncs its weights the same way (its weight quantizer)") {
    check_both_layouts<quads::w4a4<quads::nvfp4, o_four_six>>("sync.w4a4");
  }
}
