// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Large quantize / QDQ calls (the pair and turbo block kernels of kernels/quantize.cuh,
//! which small calls never reach) and the tensor amax against the host reference, on shapes above
//! the small-call threshold: partial 128-row tiles of swizzled scales (padding written by the
//! kernel), expert stacks, padded row strides, every input kind (NaN blocks take the generic
//! path), calls in which every thread runs several grid-stride iterations, and an amax output
//! buffer holding garbage before the call.
#include "quantize_check.cuh"

namespace {
using namespace quads;
using namespace quads::gpu_test;
using bf16 = __nv_bfloat16;
using q_given = block_quantizer<nvfp4, quant_options{.global = global_scale::given}>;
using q_tensor = block_quantizer<nvfp4>;

//! Shapes with more than 128 blocks per SM (132 SMs): 64 and 128 blocks per row (the pair
//! kernel's tile walk for swizzled scales), 48 (its warp octet walk) and 130 (its row walk).
std::vector<shape3> large_shapes() {
  std::vector<shape3> s = {{1, 300, 1024}, {2, 130, 2048}, {1, 140, 2080}, {1, 600, 768}};
  if (!quick()) s.push_back({3, 257, 1024});
  return s;
}

template <class Quantizer, class Layout, class T>
void sweep_large(bool also_qdq) {
  const std::uint64_t s0 = seed();
  int variant = 0;
  for (const shape3 sh : large_shapes())
    for (const input_kind k : all_kinds) {
      const std::uint64_t s = s0 + static_cast<std::uint64_t>(variant) * 104729u;
      check_quantize<Quantizer, Layout, T>(sh, k, s, variant, also_qdq);
      ++variant;
    }
}

//! Shapes on which every thread of the pair / turbo block kernels runs several grid-stride
//! iterations (the pair loop's pointer stepping and row wrap, with an even and an odd number of
//! block pairs per row), and expert stacks. Unpadded rows (variant 0), data kinds with and
//! without NaN blocks. Quick mode (sanitizers): two smaller shapes.
template <class Quantizer, class Layout, class T>
void sweep_many_iterations(bool also_qdq) {
  const std::uint64_t s0 = seed();
  int n = 0;
  const std::vector<shape3> shapes =
      quick() ? std::vector<shape3>{{2, 301, 2080}, {2, 301, 2048}}
              : std::vector<shape3>{{1, 8191, 2080}, {2, 2049, 4096}, {1, 4097, 1536}};
  for (const shape3 sh : shapes)
    for (const input_kind k : {input_kind::normal, input_kind::specials, input_kind::boundary}) {
      check_quantize<Quantizer, Layout, T>(sh, k, s0 + 7727u * static_cast<std::uint64_t>(n), 0,
                                           also_qdq);
      ++n;
    }
}

template <class T>
void check_amax_garbage(shape3 sh, input_kind kind, std::uint64_t s, int variant) {
  const int E = sh.experts, R = sh.rows, C = sh.cols;
  CAPTURE(describe("tensor amax (garbage out)", "-", "-", elem_name<T>(), sh, kind, s));
  const std::size_t rows_all = static_cast<std::size_t>(E) * R;
  const std::vector<float> x = make_input<T>(kind, E, R, C, 16, s);
  const std::int64_t stride = stride_for<T>(C, variant);
  device_buffer<T> dx(rows_all * stride);
  upload_strided(dx, x, rows_all, C, stride);
  device_buffer<float> dt(E, 0x7f); // 0x7f7f7f7f: a huge positive float an atomicMax would keep
  QUADS_CUDA_CHECK(kernels::tensor_amax(dx.ptr, kernels::tensor_shape{E, R, C, stride, 0}, dt.ptr));
  sync_ok();
  const auto t = dt.download(E);
  for (int e = 0; e < E; ++e) {
    const float want = expert_amax(x, e, R, C);
    CHECK(fbits(t[e]) == fbits(want));
  }
}
} // namespace

TEST_SUITE("gpu.large") {
  TEST_CASE("sm90: large calls of quantize (swizzled, linear scales) and QDQ are byte-identical") {
    sweep_large<q_given, swizzled_128x4, bf16>(true);
    sweep_large<q_given, swizzled_128x4, __half>(true);
    sweep_large<q_given, linear_scales, bf16>(false);
    sweep_large<q_tensor, swizzled_128x4, bf16>(false);
    sweep_large<q_tensor, linear_scales, __half>(false);
  }
  TEST_CASE("sm90: large calls stay byte-identical over many grid-stride iterations") {
    sweep_many_iterations<q_given, swizzled_128x4, bf16>(true);
    sweep_many_iterations<q_given, linear_scales, __half>(true);
  }
  TEST_CASE("sm90: tensor amax overwrites a garbage buffer with reference::amax") {
    int variant = 0;
    for (const shape3 sh :
         {shape3{1, 300, 1024}, shape3{3, 37, 256}, shape3{5, 64, 4096}, shape3{1, 1, 64}})
      for (const input_kind k : all_kinds) {
        const std::uint64_t s = seed() + 15485863u * variant;
        check_amax_garbage<bf16>(sh, k, s, variant);
        check_amax_garbage<float>(sh, k, s, variant + 1);
        ++variant;
      }
    // more than one round (programmatic zeroing + amax kernels): 256 x 4 and 1024 x 8 kernels
    for (const shape3 sh : {shape3{1, 2048, 4096}, shape3{4, 512, 4096}, shape3{1, 4096, 8192}})
      for (const input_kind k : {input_kind::normal, input_kind::specials}) {
        const std::uint64_t s = seed() + 15485863u * variant;
        check_amax_garbage<bf16>(sh, k, s, variant);
        check_amax_garbage<float>(sh, k, s, variant + 1);
        ++variant;
      }
  }
}
