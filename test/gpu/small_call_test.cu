// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The small-call paths against the host reference: the tensor amax on sizes on both
//! sides of each of its launch thresholds (one CTA; memset + atomics with 256 threads x 2 / x 4
//! words, 1024 threads x 8 words), with garbage or accumulated output buffers, every input kind
//! (NaN / Inf included), expert stacks and padded strides; the per-tensor quantize through it; and
//! small quantize / QDQ calls (the one-block block and row kernels, the MXFP4 half-block kernel)
//! on rows on both sides of the one-block row threshold, every padding case of the last swizzled
//! row tile, and a scale buffer that is only 4-byte aligned.
#include "quantize_check.cuh"

namespace {
using namespace quads;
using namespace quads::gpu_test;
using bf16 = __nv_bfloat16;
using q_given = block_quantizer<nvfp4, quant_options{.global = global_scale::given}>;
using q_tensor = block_quantizer<nvfp4>;
using q_row = block_quantizer<nvfp4, quant_options{.global = global_scale::per_row}>;
using q_mx = block_quantizer<mxfp4>;

//! `tensor_amax` (and, with `accumulate`, max(old, new)) equals `reference::amax` per expert.
template <class T>
void check_amax(shape3 sh, input_kind kind, std::uint64_t s, int variant, bool accumulate) {
  const int E = sh.experts, R = sh.rows, C = sh.cols;
  CAPTURE(describe(accumulate ? "tensor amax (accumulate)" : "tensor amax (garbage out)", "-",
                   "-", elem_name<T>(), sh, kind, s));
  const std::size_t rows_all = static_cast<std::size_t>(E) * R;
  const std::vector<float> x = make_input<T>(kind, E, R, C, 16, s);
  const std::int64_t stride = stride_for<T>(C, variant);
  device_buffer<T> dx(rows_all * stride);
  upload_strided(dx, x, rows_all, C, stride);
  // garbage: 0x7f7f7f7f, a huge positive float that an atomicMax into an unzeroed buffer keeps
  device_buffer<float> dt(E, 0x7f);
  std::vector<float> old(static_cast<std::size_t>(E));
  if (accumulate) { // previous maxima around the inputs' range, some above, some below
    std::mt19937 g(static_cast<unsigned>(s));
    for (float& o : old)
      o = std::ldexp(1.0f, static_cast<int>(g() % 40) - 20);
    dt.upload(old);
  }
  QUADS_CUDA_CHECK(
      kernels::tensor_amax(dx.ptr, kernels::tensor_shape{E, R, C, stride, 0}, dt.ptr, nullptr,
                           accumulate));
  sync_ok();
  const auto t = dt.download(E);
  for (int e = 0; e < E; ++e) {
    float want = expert_amax(x, e, R, C);
    if (accumulate) want = std::fmax(want, old[static_cast<std::size_t>(e)]);
    CHECK(fbits(t[static_cast<std::size_t>(e)]) == fbits(want));
  }
}

//! Shapes around the amax thresholds (16-byte words per expert; bf16: cols / 8 per row): one
//! CTA up to 1024 words, then memset + atomics with 2 words per thread up to one round of the
//! grid, 4 words, and 1024 threads x 8 words from 4 Mi words (4096 x 8192 bf16).
std::vector<shape3> amax_shapes() {
  if (quick()) return {{1, 1, 8200}, {2, 16, 4096}, {1, 64, 4104}};
  return {{1, 1, 64},     {1, 1, 8192},   {1, 1, 8200},   {1, 16, 4096},  {1, 16, 4104},
          {2, 16, 4096},  {1, 64, 4096},  {1, 64, 4104},  {3, 33, 1016},  {1, 130, 2048},
          {2, 128, 4104}, {1, 300, 1024}, {1, 1024, 8192}, {1, 4096, 8192}};
}

//! Quantize (and QDQ where given) of small calls.
template <class Quantizer, class Layout>
void sweep_small(bool also_qdq) {
  const std::uint64_t s0 = seed();
  int variant = 0;
  constexpr int B = Quantizer::block_size;
  // rows of 1..256 blocks (one block per thread) and 257 / 300 blocks (two cached blocks);
  // 1 / 16 / 64 x 4096: the criterion shapes; row counts around the swizzled chunk cases
  // (last row tile with < 32, 32..95, 96..127, 128 real rows); expert stacks
  std::vector<shape3> shapes = {{1, 1, 4096},    {1, 16, 4096},   {1, 64, 4096},
                                {1, 3, 100 * B}, {1, 2, 256 * B}, {1, 2, 257 * B},
                                {2, 5, 300 * B}, {3, 7, 64 * B},  {1, 97, 12 * B},
                                {2, 128, 8 * B}, {1, 160, 5 * B}, {1, 33, 3 * B}};
  if (quick()) shapes.resize(4);
  for (const shape3 sh : shapes)
    for (const input_kind kind : all_kinds) {
      if (quick() && kind != input_kind::normal && kind != input_kind::specials) continue;
      const std::uint64_t s = s0 + static_cast<std::uint64_t>(variant) * 7919u;
      check_quantize<Quantizer, Layout, bf16>(sh, kind, s, variant, also_qdq);
      ++variant;
    }
}

//! Swizzled quantize into a scale buffer that is 4- but not 16-byte aligned (the API asks for 4)
//! equals the reference.
template <class Quantizer>
void check_scales_offset(shape3 sh, std::uint64_t s) {
  using F = typename Quantizer::format;
  constexpr int B = F::block_size;
  const int E = sh.experts, R = sh.rows, C = sh.cols;
  CAPTURE(describe("quantize (scales at +4 bytes)", F::name, "swizzled", "bf16", sh,
                   input_kind::normal, s));
  const std::vector<float> x = make_input<bf16>(input_kind::normal, E, R, C, B, s);
  const std::size_t rows_all = static_cast<std::size_t>(E) * R;
  device_buffer<bf16> dx(rows_all * C);
  upload_strided(dx, x, rows_all, C, C);
  const std::vector<tensor_scale> given = make_given<Quantizer>(E, s);
  device_buffer<tensor_scale> dgiven(given.size());
  dgiven.upload(given);
  const batched<swizzled_128x4> bl{E, swizzled_128x4{R, C / B}};
  device_buffer<std::uint8_t> ddata(rows_all * C / 2), dscales(bl.size() + 16);
  device_buffer<tensor_scale> dts(static_cast<std::size_t>(E));
  device_buffer<float> damax(E);
  const kernels::scale_args args{dgiven.ptr, E, damax.ptr, s};
  QUADS_CUDA_CHECK((kernels::quantize<Quantizer, swizzled_128x4>(
      dx.ptr, kernels::tensor_shape{E, R, C},
      kernels::quantized_view{ddata.ptr, dscales.ptr + 4, dts.ptr}, args, nullptr)));
  sync_ok();
  reference::quantize_args ra{E, {}, s};
  if (is_given<Quantizer>) ra.given = std::span<const tensor_scale>(given);
  const auto q = reference::quantize<F, Quantizer::options, swizzled_128x4>(x, R, C, ra);
  expect_bytes(ddata.download(q.data.size()), q.data, "data");
  const std::vector<std::uint8_t> sc = dscales.download(bl.size() + 4);
  expect_bytes(std::vector<std::uint8_t>(sc.begin() + 4, sc.end()), q.scales, "scales");
}
} // namespace

TEST_SUITE("gpu.small_calls") {
  TEST_CASE("sm90: tensor amax is reference::amax around every launch threshold") {
    int variant = 0;
    for (const shape3 sh : amax_shapes())
      for (const input_kind k : all_kinds) {
        if (quick() && k != input_kind::normal && k != input_kind::specials) continue;
        const std::uint64_t s = seed() + 15485863u * static_cast<std::uint64_t>(variant);
        check_amax<bf16>(sh, k, s, variant, variant % 3 == 2);
        check_amax<float>(sh, k, s, variant + 1, variant % 3 == 1);
        ++variant;
      }
  }
  TEST_CASE("sm90: the per-tensor quantize through the tensor amax is byte-identical") {
    int variant = 0;
    // 16-element blocks: 4112 = 257 x 16 (words per expert just above 64 x 4096 bf16)
    for (const shape3 sh : {shape3{1, 16, 4096}, shape3{2, 64, 4112}, shape3{1, 130, 2048}})
      for (const input_kind k : {input_kind::normal, input_kind::specials, input_kind::zeros}) {
        check_quantize<q_tensor, swizzled_128x4, bf16>(sh, k, seed() + 31u * variant, variant,
                                                       variant % 2 == 0);
        ++variant;
      }
  }
  TEST_CASE("sm90: small quantize / QDQ calls are byte-identical") {
    sweep_small<q_given, swizzled_128x4>(true);
    sweep_small<q_given, linear_scales>(false);
    sweep_small<q_row, swizzled_128x4>(true);
    sweep_small<q_mx, swizzled_128x4>(false);
    sweep_small<q_mx, linear_scales>(false);
  }
  TEST_CASE("sm90: small swizzled quantize into 4-byte aligned scales is byte-identical") {
    for (const shape3 sh : {shape3{1, 1, 4096}, shape3{2, 16, 4096}, shape3{1, 100, 512}}) {
      check_scales_offset<q_given>(sh, seed() + 1);
      check_scales_offset<q_mx>(sh, seed() + 2);
    }
  }
}
