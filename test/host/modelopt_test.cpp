// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief ModelOpt / HF NVFP4 checkpoint export and import: byte-exact round trip, size checks.
#include <doctest/doctest.h>

#include "quant_helpers.hpp"

#include <quads/interop/modelopt.hpp>
#include <quads/reference/tensor.hpp>

#include <test_support/bits.hpp>
#include <test_support/generators.hpp>
#include <test_support/seed.hpp>

#include <cstdint>
#include <stdexcept>
#include <vector>

using namespace quads_test;
namespace ref = quads::reference;

TEST_SUITE("interop.modelopt") {
  TEST_CASE("export then import keeps every byte and dequantizes bit-identically") {
    auto g = rng("modelopt.round_trip");
    struct shape {
      int out, in;
    };
    for (const shape s : {shape{1, 16}, shape{7, 48}, shape{128, 256}, shape{33, 4096}}) {
      CAPTURE(s.out);
      CAPTURE(s.in);
      auto w = normal_values(g, static_cast<std::size_t>(s.out) * s.in, 0.02f);
      // an all-zero block and a NaN-free outlier exercise byte 0x00 and 0x7E
      for (int i = 0; i < 16; ++i) w[static_cast<std::size_t>(i)] = 0.0f;
      w.back() = 3.0f;
      const auto q = ref::quantize<quads::nvfp4>(w, s.out, s.in);
      const float act_scale = quads::make_tensor_scale<quads::nvfp4>(17.5f).decode;
      const quads::interop::modelopt_nvfp4_linear ck = quads::interop::export_modelopt(q, act_scale);
      CHECK(ck.out_features == s.out);
      CHECK(ck.in_features == s.in);
      CHECK(ck.weight.size() == static_cast<std::size_t>(s.out) * s.in / 2);
      CHECK(ck.weight_scale.size() == static_cast<std::size_t>(s.out) * s.in / 16);
      CHECK(same_bits(ck.weight_scale_2, q.tensor_scales[0].decode));
      CHECK(same_bits(ck.input_scale, act_scale));
      CHECK(mismatch_report(ck.weight, q.data) == "");
      CHECK(mismatch_report(ck.weight_scale, q.scales) == "");

      quads::tensor_scale input{};
      const auto back = quads::interop::import_modelopt(ck, &input);
      CHECK(back.rows == s.out);
      CHECK(back.cols == s.in);
      CHECK(back.experts == 1);
      CHECK(mismatch_report(back.data, q.data) == "");
      CHECK(mismatch_report(back.scales, q.scales) == "");
      CHECK(same_bits(back.tensor_scales.at(0).decode, q.tensor_scales[0].decode));
      CHECK(same_bits(input.decode, act_scale));
      const auto d0 = ref::dequantize<quads::nvfp4>(q);
      const auto d1 = ref::dequantize<quads::nvfp4, opt_given>(back);
      CHECK(mismatch_report(d0, d1) == "");
      // the dequantized weight is e2m1 * fp32(weight_scale) * weight_scale_2, as ModelOpt reads it
      for (std::size_t i = 0; i < d0.size(); i += 97) {
        const std::uint8_t byte = ck.weight[i / 2];
        const std::uint8_t code = (i % 2) ? byte >> 4 : byte & 0xf;
        const float expect = quads::decode_e2m1(code) * quads::decode_ue4m3(ck.weight_scale[i / 16]) *
                             ck.weight_scale_2;
        REQUIRE(same_bits(d0[i], expect));
      }
    }
  }

  TEST_CASE("ModelOpt's 0x38 scale for all-zero blocks also dequantizes to zero") {
    std::vector<float> w(2 * 32, 0.5f);
    for (int i = 0; i < 16; ++i) w[static_cast<std::size_t>(i)] = 0.0f;
    auto ck = quads::interop::export_modelopt(ref::quantize<quads::nvfp4>(w, 2, 32), 1.0f);
    REQUIRE(ck.weight_scale[0] == 0x00);
    ck.weight_scale[0] = 0x38;  // what ModelOpt writes for a zero block
    const auto d = ref::dequantize<quads::nvfp4, opt_given>(quads::interop::import_modelopt(ck));
    for (int i = 0; i < 16; ++i) CHECK(d[static_cast<std::size_t>(i)] == 0.0f);
  }

  TEST_CASE("export rejects expert stacks and per-row scales; import rejects bad sizes") {
    const std::vector<float> w(2 * 4 * 32, 1.0f);
    const auto stack = ref::quantize<quads::nvfp4>(w, 4, 32, {.experts = 2});
    CHECK_THROWS_AS((void)quads::interop::export_modelopt(stack, 1.0f), std::invalid_argument);
    const auto rowwise = ref::quantize<quads::nvfp4, opt_per_row>(w, 8, 32);
    CHECK_THROWS_AS((void)quads::interop::export_modelopt(rowwise, 1.0f), std::invalid_argument);

    const auto good = quads::interop::export_modelopt(ref::quantize<quads::nvfp4>(w, 8, 32), 1.0f);
    CHECK_NOTHROW((void)quads::interop::import_modelopt(good));
    auto bad = good;
    bad.in_features = 40;  // not a multiple of 16
    CHECK_THROWS_AS((void)quads::interop::import_modelopt(bad), std::invalid_argument);
    bad = good;
    bad.weight.pop_back();
    CHECK_THROWS_AS((void)quads::interop::import_modelopt(bad), std::invalid_argument);
    bad = good;
    bad.weight_scale.push_back(0);
    CHECK_THROWS_AS((void)quads::interop::import_modelopt(bad), std::invalid_argument);
    bad = good;
    bad.out_features = 9;
    CHECK_THROWS_AS((void)quads::interop::import_modelopt(bad), std::invalid_argument);
  }
}
