// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Compile-time evaluation: codecs, layouts, tensor scales, Philox and block quantization
//! run in constant expressions, and give the same bits as at run time.
#include <doctest/doctest.h>

#include <quads/format/e2m1.hpp>
#include <quads/format/e4m3.hpp>
#include <quads/format/ue8m0.hpp>
#include <quads/layout/scale_layouts.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/random_bits.hpp>
#include <quads/quant/tensor_scale.hpp>

#include <test_support/bits.hpp>

#include <cmath>
#include <cstdint>

namespace {

// codecs
static_assert(quads::decode_e2m1(0x7) == 6.0f && quads::decode_e2m1(0xB) == -1.5f);
static_assert(quads::encode_e2m1(2.5f) == 0x4 && quads::encode_e2m1(-5.0f) == 0xE);
static_assert(quads::encode_e2m1(-0.0f) == 0x8 && quads::encode_e2m1(1e30f) == 0x7);
static_assert(quads::encode_e2m1_stochastic(0.75f, 255) == 0x2);
static_assert(quads::encode_e4m3(448.0f) == 0x7E && quads::encode_e4m3(464.0f) == 0x7E);
static_assert(quads::decode_e4m3(0x01) == 1.0f / 512.0f);
static_assert(quads::encode_ue8m0_round_up(3.0f) == 0x81 && quads::encode_ue8m0_floor(3.0f) == 0x80);
static_assert(quads::decode_ue8m0(0x7F) == 1.0f && quads::ue8m0_reciprocal(0x80) == 0.5f);
static_assert(quads::pack_e2m1x2(0x1, 0xF).bits == 0xF1);

// layouts
static_assert(quads::swizzled_128x4{128, 8}.offset(5, 2) == 82);
static_assert(quads::swizzled_128x4{128, 8}.offset(5, 5) == 593);
static_assert(quads::swizzled_128x4{130, 7}.size() == 2 * 2 * 512);
static_assert(quads::swizzled_128x4{128, 8}.coords(593).row == 5 &&
              quads::swizzled_128x4{128, 8}.coords(593).col == 5);
static_assert(quads::swizzled_128x4{130, 7}.coords(3).valid);        // row 0, column 3
static_assert(!quads::swizzled_128x4{130, 7}.coords(512 + 3).valid);  // row 0, column 7: padding
static_assert(quads::linear_scales{3, 5}.offset(2, 4) == 14);
static_assert(quads::batched<quads::linear_scales>{2, {3, 5}}.offset(1, 0, 0) == 15);
static_assert(quads::packed_offset(3, 5, 16) == 26);

// tensor scale and Philox
static_assert(quads::make_tensor_scale<quads::nvfp4>(2688.0f).encode == 1.0f);
static_assert(quads::make_tensor_scale<quads::nvfp4>(quads::e2m1_max).encode == 448.0f);
static_assert(quads::make_tensor_scale<quads::nvfp4>(__builtin_inff()).encode == 1.0f);
// Not constant expressions today (g++ rejects x / 0 and fp32 overflow while constant-evaluating),
// although they are fine at run time: make_tensor_scale(0 or amax < 2688 / FLT_MAX),
// tensor_scale_from_decode(0), and quantize of a block whose NVFP4 scale byte is 0 (e.g. all
// zeros), whose multiplier is computed as 1 / 0 before clamping to FLT_MAX.
static_assert(quads::philox4x32_10{0}(0)[0] == 0x6627e8d5u);

// block quantization
constexpr float block16[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
constexpr auto nv_ts = quads::make_tensor_scale<quads::nvfp4>(6.0f);
constexpr auto nv_q = quads::block_quantizer<quads::nvfp4>::quantize(block16, nv_ts);
static_assert(nv_q.scale == 0x7E);
static_assert(nv_q.codes[0] == 0x10 && nv_q.codes[3] == 0x76 && nv_q.codes[4] == 0x98 &&
              nv_q.codes[7] == 0xFE);

constexpr float block32[32] = {6.0f, -3.0f, 1.0f, 0.25f};
constexpr auto mx_q = quads::block_quantizer<quads::mxfp4>::quantize(block32, {});
static_assert(mx_q.scale == 0x7F);  // RN(6 * RN(1/6)) = 1 exactly: scale 2^0
static_assert(mx_q.codes[0] == 0xD7 && mx_q.codes[1] == 0x02);  // 0.25 ties to even (0)

constexpr auto sr_bits = quads::draw_block_bits<quads::nvfp4>(quads::philox4x32_10{7}, 3);
constexpr quads::quant_options sr{.round = quads::rounding::stochastic};
constexpr auto sr_q = quads::block_quantizer<quads::nvfp4, sr>::quantize(block16, nv_ts, sr_bits);
static_assert(sr_q.scale == 0x7E);

constexpr float qdq_at_compile_time = [] {
  float out[16];
  quads::block_quantizer<quads::nvfp4>::qdq(block16, nv_ts, out);
  return out[15];
}();

} // namespace

TEST_SUITE("constexpr") {
  TEST_CASE("compile-time quantization equals run-time quantization bit for bit") {
    // volatile copies keep the run-time inputs opaque to the optimizer (and keep -0.0)
    volatile float v16[16], v32[32], six = 6.0f;
    float x16[16], x32[32];
    for (int i = 0; i < 16; ++i) v16[i] = block16[i];
    for (int i = 0; i < 32; ++i) v32[i] = block32[i];
    for (int i = 0; i < 16; ++i) x16[i] = v16[i];
    for (int i = 0; i < 32; ++i) x32[i] = v32[i];
    const auto ts = quads::make_tensor_scale<quads::nvfp4>(six);
    CHECK(quads_test::same_bits(ts.encode, nv_ts.encode));
    CHECK(quads_test::same_bits(ts.decode, nv_ts.decode));

    const auto q = quads::block_quantizer<quads::nvfp4>::quantize(x16, ts);
    CHECK(q.scale == nv_q.scale);
    for (int i = 0; i < 8; ++i) CHECK(q.codes[i] == nv_q.codes[i]);
    const auto m = quads::block_quantizer<quads::mxfp4>::quantize(x32, {});
    CHECK(m.scale == mx_q.scale);
    for (int i = 0; i < 16; ++i) CHECK(m.codes[i] == mx_q.codes[i]);
    const auto bits = quads::draw_block_bits<quads::nvfp4>(quads::philox4x32_10{7}, 3);
    const auto s = quads::block_quantizer<quads::nvfp4, sr>::quantize(x16, ts, bits);
    for (int i = 0; i < 8; ++i) CHECK(s.codes[i] == sr_q.codes[i]);

    float out[16];
    quads::block_quantizer<quads::nvfp4>::qdq(x16, ts, out);
    CHECK(quads_test::same_bits(out[15], qdq_at_compile_time));
    // grid values come back up to the rounding of S_dec = RN(1/448)
    for (int i = 0; i < 16; ++i) CHECK(std::fabs(out[i] - block16[i]) <= std::fabs(block16[i]) * 0x1p-22f);
  }
}
