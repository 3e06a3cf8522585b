// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The small-call paths of session 6 against the host reference: the tensor amax in each
//! combine mode (one CTA, one cluster of 8 or 16 CTAs, zeroing kernel + programmatic dependent
//! launch, memset + atomics) on sizes on both sides of each threshold, with garbage or
//! accumulated output buffers, every input kind (NaN / Inf included), expert stacks and padded
//! strides; and quantize / QDQ with the one-block instantiations of the block and row kernels
//! (`detail::small_knobs`) on and off, rows on both sides of the one-block row threshold.
#include "quantize_check.cuh"

namespace {
using namespace quads;
using namespace quads::gpu_test;
namespace kd = quads::kernels::detail;
using bf16 = __nv_bfloat16;
using q_given = block_quantizer<nvfp4, quant_options{.global = global_scale::given}>;
using q_tensor = block_quantizer<nvfp4>;
using q_row = block_quantizer<nvfp4, quant_options{.global = global_scale::per_row}>;
using q_mx = block_quantizer<mxfp4>;

//! Restores the launchers' knobs on scope exit.
struct knob_guard {
  kd::amax_tuning amax = kd::amax_knobs();
  kd::small_call_tuning small = kd::small_knobs();
  ~knob_guard() {
    kd::amax_knobs() = amax;
    kd::small_knobs() = small;
  }
};

struct amax_mode {
  const char* name;
  kd::amax_combine combine;
  int cluster_ctas;
};
constexpr amax_mode amax_modes[] = {{"cluster8", kd::amax_combine::cluster, 8},
                                    {"cluster16", kd::amax_combine::cluster, 16},
                                    {"cluster2", kd::amax_combine::cluster, 2},
                                    {"pdl", kd::amax_combine::pdl_atomic, 8},
                                    {"memset", kd::amax_combine::memset_atomic, 8}};

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
    float want = reference::amax(std::span<const float>(x).subspan(
        static_cast<std::size_t>(e) * R * C, static_cast<std::size_t>(R) * C));
    if (accumulate) want = std::fmax(want, old[static_cast<std::size_t>(e)]);
    CHECK(fbits(t[static_cast<std::size_t>(e)]) == fbits(want));
  }
}

//! Shapes around the amax thresholds (16-byte words per expert; bf16: cols / 8 per row): one
//! CTA up to 1024 words, one cluster up to `ctas * 4096` words (8: 32768 = 64 x 4096 bf16),
//! the atomic paths above.
std::vector<shape3> amax_shapes() {
  std::vector<shape3> s = {{1, 1, 64},       {1, 1, 8192},     {1, 1, 8200},  {1, 16, 4096},
                           {2, 16, 4096},    {1, 64, 4096},    {1, 64, 4104}, {3, 33, 1016},
                           {1, 130, 2048},   {2, 128, 4104},   {1, 300, 1024}};
  if (!quick()) s.push_back({1, 1024, 4096});
  return s;
}

//! Quantize (and QDQ where given) of small calls with the one-block kernels `one` on / off.
template <class Quantizer, class Layout>
void sweep_small(bool one, bool also_qdq) {
  knob_guard g;
  kd::small_knobs().one_block_kernel = one;
  kd::small_knobs().row_one_block = one;
  const std::uint64_t s0 = seed();
  int variant = 0;
  constexpr int B = Quantizer::block_size;
  // rows of 1..256 blocks (one block per thread) and 257 / 300 blocks (two cached blocks);
  // 16 x 4096 and 64 x 4096: the criterion shapes; an expert stack
  const std::vector<shape3> shapes = {{1, 1, 4096},   {1, 16, 4096}, {1, 64, 4096},
                                      {1, 3, 100 * B}, {1, 2, 256 * B}, {1, 2, 257 * B},
                                      {2, 5, 300 * B}, {3, 7, 64 * B}};
  for (const shape3 sh : shapes)
    for (const input_kind k : all_kinds) {
      const std::uint64_t s = s0 + static_cast<std::uint64_t>(variant) * 7919u;
      check_quantize<Quantizer, Layout, bf16>(sh, k, s, variant, also_qdq);
      ++variant;
    }
}
} // namespace

TEST_SUITE("gpu.small_calls") {
  TEST_CASE("sm90: tensor amax is reference::amax in every combine mode, around every threshold") {
    knob_guard g;
    int variant = 0;
    for (const amax_mode& m : amax_modes) {
      CAPTURE(m.name);
      kd::amax_knobs().combine = m.combine;
      kd::amax_knobs().cluster_ctas = m.cluster_ctas;
      for (const shape3 sh : amax_shapes())
        for (const input_kind k : all_kinds) {
          const std::uint64_t s = seed() + 15485863u * static_cast<std::uint64_t>(variant);
          check_amax<bf16>(sh, k, s, variant, variant % 3 == 2);
          check_amax<float>(sh, k, s, variant + 1, variant % 3 == 1);
          ++variant;
        }
    }
  }
  TEST_CASE("sm90: the per-tensor quantize is byte-identical with each amax combine mode") {
    knob_guard g;
    int variant = 0;
    for (const amax_mode& m : amax_modes) {
      CAPTURE(m.name);
      kd::amax_knobs().combine = m.combine;
      kd::amax_knobs().cluster_ctas = m.cluster_ctas;
      for (const shape3 sh : {shape3{1, 16, 4096}, shape3{2, 64, 4104}, shape3{1, 130, 2048}})
        for (const input_kind k : {input_kind::normal, input_kind::specials, input_kind::zeros}) {
          check_quantize<q_tensor, swizzled_128x4, bf16>(sh, k, seed() + 31u * variant, variant,
                                                         variant % 2 == 0);
          ++variant;
        }
    }
  }
  TEST_CASE("sm90: small quantize / QDQ calls are byte-identical with the one-block kernels on "
            "and off") {
    for (const bool one : {true, false}) {
      CAPTURE(one);
      sweep_small<q_given, swizzled_128x4>(one, true);
      sweep_small<q_given, linear_scales>(one, false);
      sweep_small<q_row, swizzled_128x4>(one, true);
      sweep_small<q_mx, swizzled_128x4>(one, false);
    }
  }
}
