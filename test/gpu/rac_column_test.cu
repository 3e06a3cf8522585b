// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief RAC's pair kernel (even K / B) and column kernel (odd K / B), both for no permutation,
//! shared residual scale, NVFP4 turbo path, bf16 / fp16, against the host reference on the GPU
//! suite's adversarial inputs (NaN, Inf, boundary values, scale underflow, zeros, raw bit
//! patterns), for given and per-tensor x scales, both scale layouts, ratios 0 .. 100 %, K with
//! fewer than 32 blocks, |S| not a multiple of 32, and odd K' / B (unaligned rows); and the pair
//! kernel with the residual's own scale (odd K / B and 100 % then take the plain kernel); and the
//! gather kernel of permuted selections (shared and own residual scales).
#include "gpu_test.cuh"

#include <quads/compensation/compensation.hpp>
#include <quads/compensation/rac.cuh>

#include <random>

namespace {
using namespace quads;
using namespace quads::gpu_test;
namespace qc = quads::compensation;
namespace qk = quads::compensation::kernels;

template <class Quantizer, class Layout, class T>
void check_rac(input_kind kind, int rows, int K, double ratio, std::uint64_t s,
               qc::residual_scale rsc, qc::permutation perm) {
  using F = typename Quantizer::format;
  constexpr quant_options O = Quantizer::options;
  constexpr bool given = O.global == global_scale::given;
  const std::vector<float> x = make_input<T>(kind, 1, rows, K, 16, s);
  std::vector<T> xt(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    xt[i] = to_elem<T>(x[i]);
  const qc::channel_statistics st(K);
  const auto sel = qc::select_channels(qc::random_channels{s}, st, ratio, perm);
  const tensor_scale g = make_given<Quantizer>(2, s)[1];
  const auto host = qc::reference::quantize_activation<F, O, Layout>(
      x, rows, sel, {.residual = rsc, .given = std::span(&g, 1)});

  const int Kp = sel.augmented_channels();
  const Layout layout{rows, Kp / 16};
  device_buffer<T> dx(xt.size());
  dx.upload(xt);
  device_buffer<std::uint8_t> data(static_cast<std::size_t>(rows) * Kp / 2, 0xa5),
      scales(layout.size(), 0xa5);
  device_buffer<tensor_scale> xs(1), rs(1), dg(1);
  dg.upload({g});
  device_buffer<float> ws(qk::rac_workspace_floats(rows));
  const auto t = qk::make_selection_tables(sel);
  device_buffer<int> slot(t.slot.size()), blocks(t.blocks.size() + 1), order(t.order.size() + 1);
  slot.upload(t.slot);
  if (!t.blocks.empty()) blocks.upload(t.blocks);
  if (!t.order.empty()) order.upload(t.order);
  const qk::device_selection view{sel.channels, sel.selected_blocks(),
                                  t.order.empty() ? nullptr : order.ptr, slot.ptr,
                                  t.blocks.empty() ? nullptr : blocks.ptr};
  const qk::rac_args args{rsc, given ? dg.ptr : nullptr, ws.ptr, 0};
  QUADS_CUDA_CHECK((qk::rac_quantize<Quantizer, Layout, T>(
      dx.ptr, rows, view, qk::rac_view{data.ptr, scales.ptr, xs.ptr, rs.ptr}, args)));
  sync_ok();
  INFO(kind_name(kind) << " rows " << rows << " K " << K << " ratio " << ratio << " seed " << s
                       << " " << qc::to_string(perm) << (given ? " given" : " per-tensor")
                       << (std::is_same_v<Layout, swizzled_128x4> ? " swizzled" : " linear"));
  const auto d = data.download(host.data.size());
  const auto sc = scales.download(host.scales.size());
  std::size_t bad = 0, first = d.size();
  for (std::size_t i = 0; i < d.size(); ++i)
    if (d[i] != host.data[i] && bad++ == 0) first = i;
  INFO("code bytes differing: " << bad << " (first " << first << ")");
  CHECK(bad == 0);
  CHECK(sc == host.scales);
  const tensor_scale hx = host.x_scales[0], dxs = xs.download(1)[0];
  CHECK(std::memcmp(&hx, &dxs, sizeof hx) == 0);
  const tensor_scale hr = host.r_scales[0], drs = rs.download(1)[0];
  CHECK(std::memcmp(&hr, &drs, sizeof hr) == 0);
}

template <class Quantizer, class Layout, class T>
void sweep(std::uint64_t s, qc::residual_scale rsc = qc::residual_scale::shared,
           qc::permutation perm = qc::permutation::none) {
  // even K / B takes the pair kernel: 1 x 4096 (8 full warp steps), 130 x 1536 (3 steps per
  // row), 300 x 544 (17 pairs: a part step per row), 129 x 3104 (97 pairs: 4 steps, the last with
  // one pair), 70 x 1056; odd K / B (13, 1 blocks) the column kernel
  const int shapes[][2] = {{1, 4096},  {37, 208},   {130, 1536}, {64, 16},
                           {300, 544}, {129, 3104}, {70, 1056}};
  const double ratios[] = {0.0, 0.125, 0.3, 0.5, 1.0};
  int i = 0;
  for (const auto kind : all_kinds)
    for (const auto& sh : shapes) {
      const double ratio = ratios[(i++) % 5];
      check_rac<Quantizer, Layout, T>(kind, sh[0], sh[1], ratio, s + static_cast<std::uint64_t>(i),
                                      rsc, perm);
    }
}

using q_given = block_quantizer<nvfp4, quant_options{.global = global_scale::given}>;
using q_tensor = block_quantizer<nvfp4>;

} // namespace

TEST_SUITE("gpu.rac_column") {
  TEST_CASE(
      "sm90: RAC's pair and column kernels are byte-identical to the host reference on adversarial "
      "inputs") {
    const std::uint64_t s = seed();
    sweep<q_given, linear_scales, __nv_bfloat16>(s);
    sweep<q_given, swizzled_128x4, __nv_bfloat16>(s + 100);
    sweep<q_tensor, linear_scales, __nv_bfloat16>(s + 200);
    sweep<q_given, linear_scales, __half>(s + 300);
    sweep<q_tensor, swizzled_128x4, __half>(s + 400);
  }
  TEST_CASE("sm90: RAC's pair kernel with the residual's own scale is byte-identical to the host "
            "reference on adversarial inputs") {
    const std::uint64_t s = seed();
    sweep<q_given, linear_scales, __nv_bfloat16>(s + 500, qc::residual_scale::own);
    sweep<q_tensor, swizzled_128x4, __half>(s + 600, qc::residual_scale::own);
  }
  TEST_CASE("sm90: RAC's gather kernel (selected channels moved to the end) is byte-identical to "
            "the host reference on adversarial inputs") {
    const std::uint64_t s = seed();
    constexpr auto end = qc::permutation::selected_to_end;
    sweep<q_given, linear_scales, __nv_bfloat16>(s + 700, qc::residual_scale::shared, end);
    sweep<q_tensor, swizzled_128x4, __half>(s + 800, qc::residual_scale::shared, end);
    sweep<q_tensor, linear_scales, __nv_bfloat16>(s + 900, qc::residual_scale::own, end);
  }
}
