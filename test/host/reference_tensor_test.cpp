// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief reference::quantize / dequantize / qdq on tensors and expert stacks: shapes, tensor
//! scales (per tensor, per expert, per row, given), layouts, padding.
#include <doctest/doctest.h>

#include "quant_helpers.hpp"

#include <quads/reference/tensor.hpp>

#include <test_support/bits.hpp>
#include <test_support/generators.hpp>
#include <test_support/seed.hpp>

#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

using namespace quads_test;
namespace ref = quads::reference;

namespace {

//! `experts` stacked [rows, cols] matrices whose magnitudes differ by powers of 16 per expert,
//! so per-expert scales differ; a few rows get outliers so per-row scales differ too.
std::vector<float> expert_stack(std::mt19937_64& g, int experts, int rows, int cols) {
  std::vector<float> x = normal_values(g, static_cast<std::size_t>(experts) * rows * cols, 1.0f);
  for (int e = 0; e < experts; ++e)
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        float& v = x[(static_cast<std::size_t>(e) * rows + r) * cols + c];
        v = std::ldexp(v, 4 * e - 4) * (r % 5 == 0 ? 20.0f : 1.0f);
      }
  return x;
}

template <class Format, quads::quant_options O = opt_default, class Layout>
void check_matches_block_quantizer(std::span<const float> x, int experts, int rows, int cols,
                                   const ref::quantized_tensor<Format, Layout>& q) {
  using Q = quads::block_quantizer<Format, O>;
  constexpr int B = Format::block_size;
  const auto layout = q.scale_layout();
  for (int e = 0; e < experts; ++e)
    for (int r = 0; r < rows; ++r)
      for (int kb = 0; kb < cols / B; ++kb) {
        const std::size_t first = (static_cast<std::size_t>(e) * rows + r) * cols + kb * B;
        cblock<B> blk{};
        for (int i = 0; i < B; ++i) blk.v[i] = x[first + i];
        const auto pb = Q::quantize(blk.v, q.scale_of(e, r));
        REQUIRE(q.scales[layout.offset(e, r, kb)] == pb.scale);
        for (int i = 0; i < B / 2; ++i) REQUIRE(q.data[first / 2 + i] == pb.codes[i]);
      }
}

template <class Fn>
std::string invalid_argument_message(Fn&& fn) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument thrown)";
}

} // namespace

TEST_SUITE("reference.tensor") {
  TEST_CASE("a K that is not a multiple of the block size throws, naming K and the block size") {
    const std::vector<float> x(4 * 40, 1.0f);
    const std::string m = invalid_argument_message([&] { (void)ref::quantize<quads::nvfp4>(x, 4, 40); });
    CAPTURE(m);
    CHECK(m.find("K") != std::string::npos);
    CHECK(m.find("40") != std::string::npos);
    CHECK(m.find("16") != std::string::npos);
    const std::vector<float> y(2 * 48, 1.0f);
    const std::string mx = invalid_argument_message([&] { (void)ref::quantize<quads::mxfp4>(y, 2, 48); });
    CAPTURE(mx);
    CHECK(mx.find("K") != std::string::npos);
    CHECK(mx.find("48") != std::string::npos);
    CHECK(mx.find("32") != std::string::npos);
  }

  TEST_CASE("a wrong element count, no experts, or a wrong number of given scales throws") {
    const std::vector<float> x(4 * 32, 1.0f);
    CHECK_THROWS_AS((void)ref::quantize<quads::nvfp4>(x, 4, 16), std::invalid_argument);
    CHECK_THROWS_AS((void)ref::quantize<quads::nvfp4>(x, 3, 32), std::invalid_argument);
    CHECK_THROWS_AS((void)ref::quantize<quads::nvfp4>(x, 1, 32, {.experts = 0}), std::invalid_argument);
    CHECK_THROWS_AS((void)ref::quantize<quads::nvfp4>(x, 2, 32, {.experts = 3}), std::invalid_argument);
    CHECK_THROWS_AS((void)ref::quantize<quads::nvfp4>(x, 4, -32), std::invalid_argument);
    const std::vector<quads::tensor_scale> three(3);
    CHECK_THROWS_AS((void)(ref::quantize<quads::nvfp4, opt_given>(x, 2, 32, {.experts = 2, .given = three})),
                    std::invalid_argument);
    CHECK_THROWS_AS((void)(ref::quantize<quads::nvfp4, opt_given>(x, 4, 32)), std::invalid_argument);
    CHECK_NOTHROW((void)ref::quantize<quads::nvfp4>(x, 4, 32));
    CHECK_NOTHROW((void)ref::quantize<quads::mxfp4>(x, 1, 64, {.experts = 2}));
  }

  TEST_CASE("an expert stack gets one tensor scale per expert from that expert's amax") {
    auto g = rng("ref.experts");
    constexpr int E = 4, R = 9, C = 64;
    const auto x = expert_stack(g, E, R, C);
    const auto q = ref::quantize<quads::nvfp4>(x, R, C, {.experts = E});
    REQUIRE(q.tensor_scales.size() == E);
    for (int e = 0; e < E; ++e) {
      const float amax = ref::amax(std::span<const float>(x).subspan(static_cast<std::size_t>(e) * R * C, R * C));
      const auto ts = quads::make_tensor_scale<quads::nvfp4>(amax);
      CHECK(same_bits(q.tensor_scales[static_cast<std::size_t>(e)].encode, ts.encode));
      CHECK(same_bits(q.tensor_scales[static_cast<std::size_t>(e)].decode, ts.decode));
      if (e > 0) CHECK(q.tensor_scales[static_cast<std::size_t>(e)].encode != q.tensor_scales[0].encode);
    }
    check_matches_block_quantizer<quads::nvfp4>(x, E, R, C, q);
    // MX: no tensor scale, identity per expert
    const auto qm = ref::quantize<quads::mxfp4>(x, R, C, {.experts = E});
    REQUIRE(qm.tensor_scales.size() == E);
    for (const auto ts : qm.tensor_scales) CHECK((ts.encode == 1.0f && ts.decode == 1.0f));
    check_matches_block_quantizer<quads::mxfp4>(x, E, R, C, qm);
  }

  TEST_CASE("quantizing an expert stack equals quantizing each expert on its own") {
    auto g = rng("ref.stack_vs_single");
    constexpr int E = 3, R = 130, C = 96;
    const auto x = expert_stack(g, E, R, C);
    auto run = [&]<class Format, class Layout>() {
      const auto stack = ref::quantize<Format, opt_default, Layout>(x, R, C, {.experts = E});
      const auto deq = ref::dequantize<Format>(stack);
      const auto fq = ref::qdq<Format>(x, R, C, {.experts = E});
      REQUIRE(mismatch_report(deq, fq) == "");
      const std::size_t slice = static_cast<std::size_t>(R) * C;
      const std::size_t scale_bytes = Layout{R, C / Format::block_size}.size();
      for (int e = 0; e < E; ++e) {
        CAPTURE(e);
        const auto xs = std::span<const float>(x).subspan(e * slice, slice);
        const auto one = ref::quantize<Format, opt_default, Layout>(xs, R, C);
        REQUIRE(mismatch_report(std::span<const std::uint8_t>(stack.data).subspan(e * slice / 2, slice / 2),
                                one.data) == "");
        REQUIRE(mismatch_report(std::span<const std::uint8_t>(stack.scales).subspan(e * scale_bytes, scale_bytes),
                                one.scales) == "");
        const auto d1 = ref::dequantize<Format>(one);
        REQUIRE(mismatch_report(std::span<const float>(deq).subspan(e * slice, slice), d1) == "");
      }
    };
    run.template operator()<quads::nvfp4, quads::linear_scales>();
    run.template operator()<quads::nvfp4, quads::swizzled_128x4>();
    run.template operator()<quads::mxfp4, quads::linear_scales>();
    run.template operator()<quads::mxfp4, quads::swizzled_128x4>();
  }

  TEST_CASE("swizzled and linear scales hold the same bytes at mapped offsets, padding zero") {
    auto g = rng("ref.layouts");
    struct shape {
      int e, r, c;
    };
    for (const shape s : {shape{1, 128, 128}, shape{2, 130, 224}, shape{1, 5, 96}, shape{3, 257, 32}}) {
      CAPTURE(s.e);
      CAPTURE(s.r);
      CAPTURE(s.c);
      auto x = expert_stack(g, s.e, s.r, s.c);
      x[7] = 0.0f;
      auto run = [&]<class Format>() {
        const auto lin = ref::quantize<Format, opt_default, quads::linear_scales>(x, s.r, s.c, {.experts = s.e});
        const auto swz = ref::quantize<Format, opt_default, quads::swizzled_128x4>(x, s.r, s.c, {.experts = s.e});
        REQUIRE(lin.data == swz.data);
        const auto ll = lin.scale_layout();
        const auto sl = swz.scale_layout();
        REQUIRE(swz.scales.size() == sl.size());
        REQUIRE(sl.size() == static_cast<std::size_t>(s.e) * ((s.r + 127) / 128) *
                                 ((s.c / Format::block_size + 3) / 4) * 512);
        std::vector<unsigned char> used(sl.size(), 0);
        for (int e = 0; e < s.e; ++e)
          for (int r = 0; r < s.r; ++r)
            for (int kb = 0; kb < s.c / Format::block_size; ++kb) {
              REQUIRE(swz.scales[sl.offset(e, r, kb)] == lin.scales[ll.offset(e, r, kb)]);
              used[sl.offset(e, r, kb)] = 1;
            }
        for (std::size_t off = 0; off < sl.size(); ++off) {
          const bool pad = !sl.layout.coords(off % sl.layout.size()).valid;
          REQUIRE(pad == !used[off]);
          if (pad) REQUIRE(swz.scales[off] == 0);
        }
        REQUIRE(mismatch_report(ref::dequantize<Format>(lin), ref::dequantize<Format>(swz)) == "");
      };
      run.template operator()<quads::nvfp4>();
      run.template operator()<quads::mxfp4>();
    }
  }

  TEST_CASE("per_row scales come from each row's amax and equal quantizing rows one by one") {
    auto g = rng("ref.per_row");
    constexpr int E = 2, R = 7, C = 48;
    const auto x = expert_stack(g, E, R, C);
    const auto q = ref::quantize<quads::nvfp4, opt_per_row>(x, R, C, {.experts = E});
    REQUIRE(q.global == quads::global_scale::per_row);
    REQUIRE(q.tensor_scales.size() == static_cast<std::size_t>(E) * R);
    const auto deq = ref::dequantize<quads::nvfp4, opt_per_row>(q);
    for (int row = 0; row < E * R; ++row) {
      CAPTURE(row);
      const auto xr = std::span<const float>(x).subspan(static_cast<std::size_t>(row) * C, C);
      const auto ts = quads::make_tensor_scale<quads::nvfp4>(ref::amax(xr));
      REQUIRE(same_bits(q.tensor_scales[static_cast<std::size_t>(row)].encode, ts.encode));
      const auto one = ref::quantize<quads::nvfp4>(xr, 1, C);
      REQUIRE(mismatch_report(std::span<const std::uint8_t>(q.data).subspan(static_cast<std::size_t>(row) * C / 2, C / 2),
                              one.data) == "");
      REQUIRE(mismatch_report(std::span<const std::uint8_t>(q.scales).subspan(static_cast<std::size_t>(row) * C / 16, C / 16),
                              one.scales) == "");
      REQUIRE(mismatch_report(std::span<const float>(deq).subspan(static_cast<std::size_t>(row) * C, C),
                              ref::dequantize<quads::nvfp4>(one)) == "");
    }
    // every row's own amax block reaches 448
    for (int row = 0; row < E * R; ++row) {
      bool has_448 = false;
      for (int kb = 0; kb < C / 16; ++kb) has_448 |= q.scales[static_cast<std::size_t>(row) * (C / 16) + kb] == 0x7E;
      CHECK(has_448);
    }
    // MX has no tensor scale: the per_row option is ignored
    const auto xm = expert_stack(g, 1, R, 64);
    const auto qm = ref::quantize<quads::mxfp4, opt_per_row>(xm, R, 64);
    CHECK(qm.global == quads::global_scale::per_tensor);
    CHECK(qm.data == ref::quantize<quads::mxfp4>(xm, R, 64).data);
  }

  TEST_CASE("given scales are used as passed: one for all experts, or one per expert") {
    auto g = rng("ref.given");
    constexpr int E = 3, R = 4, C = 64;
    const auto x = expert_stack(g, E, R, C);
    const std::vector<quads::tensor_scale> one = {quads::make_tensor_scale<quads::nvfp4>(5.0f)};
    const auto q1 = ref::quantize<quads::nvfp4, opt_given>(x, R, C, {.experts = E, .given = one});
    REQUIRE(q1.tensor_scales.size() == E);
    for (const auto ts : q1.tensor_scales) CHECK(same_bits(ts.encode, one[0].encode));
    check_matches_block_quantizer<quads::nvfp4, opt_given>(x, E, R, C, q1);
    const std::vector<quads::tensor_scale> per = {quads::make_tensor_scale<quads::nvfp4>(1.0f),
                                                  quads::tensor_scale_from_decode(0.01f),
                                                  quads::make_tensor_scale<quads::nvfp4>(1e6f)};
    const auto q3 = ref::quantize<quads::nvfp4, opt_given>(x, R, C, {.experts = E, .given = per});
    for (int e = 0; e < E; ++e) CHECK(same_bits(q3.tensor_scales[static_cast<std::size_t>(e)].decode, per[static_cast<std::size_t>(e)].decode));
    check_matches_block_quantizer<quads::nvfp4, opt_given>(x, E, R, C, q3);
    // a given scale computed from the true amax equals the per_tensor result
    const auto qt = ref::quantize<quads::nvfp4>(x, R, C, {.experts = E});
    const auto qg = ref::quantize<quads::nvfp4, opt_given>(x, R, C, {.experts = E, .given = qt.tensor_scales});
    CHECK(qt.data == qg.data);
    CHECK(qt.scales == qg.scales);
    CHECK(mismatch_report(ref::dequantize<quads::nvfp4>(qt), ref::dequantize<quads::nvfp4, opt_given>(qg)) == "");
  }

  TEST_CASE("qdq of adversarial rows equals dequantize of quantize") {
    std::vector<float> x;
    for (const auto& b : adversarial_blocks<32>()) x.insert(x.end(), b.begin(), b.end());
    const int rows = static_cast<int>(x.size() / 64);
    x.resize(static_cast<std::size_t>(rows) * 64);
    auto run = [&]<class Format, quads::quant_options O>() {
      const auto q = ref::quantize<Format, O>(x, rows, 64);
      REQUIRE(mismatch_report(ref::dequantize<Format, O>(q), ref::qdq<Format, O>(x, rows, 64)) == "");
      check_matches_block_quantizer<Format, O>(x, 1, rows, 64, q);
    };
    run.template operator()<quads::nvfp4, opt_default>();
    run.template operator()<quads::nvfp4, opt_per_row>();
    run.template operator()<quads::nvfp4, opt_four_over_six>();
    run.template operator()<quads::mxfp4, opt_default>();
    run.template operator()<quads::mxfp4, opt_mx_floor>();
  }

  TEST_CASE("empty tensors quantize to empty buffers") {
    const std::vector<float> none;
    const auto q = ref::quantize<quads::nvfp4>(none, 0, 32);
    CHECK(q.data.empty());
    CHECK(q.scales.empty());
    CHECK(ref::dequantize<quads::nvfp4>(q).empty());
  }
}
