// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The weight-sync contract on the GPU: `kernels::dequantize(trainer::sync_weights(W))`
//! equals the trainer's `trainer::fake_quant_weights(W)` bit for bit (fp32 and bf16 outputs), the
//! packed bytes equal the host's `reference::sync_weights`, and the GPU clipped-STE mask equals
//! the host's, for nvfp4 and mxfp4, every option (rcp_approx: GPU-only checks), both scale
//! layouts, dense and expert stacks, bf16 and fp32 masters.
#include "gpu_helpers.cuh"
#include "policy_helpers.hpp"

#include <quads/policy/trainer.cuh>
#include <quads/policy/weight_sync.hpp>

#include <string>
#include <vector>

using namespace policy_test;
using namespace policy_gpu_test;
namespace ref = quads::reference;
namespace tr = quads::trainer;
using bf16 = __nv_bfloat16;

namespace {

inline constexpr quads::quant_options o_rcp{.math = quads::scale_math::rcp_approx};
inline constexpr quads::quant_options o_rcp_sr{.round = quads::rounding::stochastic,
                                               .math = quads::scale_math::rcp_approx};
inline constexpr quads::quant_options o_rcp_46{
    .math = quads::scale_math::rcp_approx, .block_rule = quads::block_scale_rule::four_over_six};
inline constexpr quads::quant_options o_rcp_rows{.math = quads::scale_math::rcp_approx,
                                                 .global = quads::global_scale::per_row};

struct case_shape {
  int experts, n, k;
};
constexpr case_shape gpu_shapes[] = {{1, 48, 64}, {3, 20, 96}, {2, 130, 32}};

template <class Format, class Layout>
struct packed_dev {
  dbuf<std::uint8_t> data, scales;
  dbuf<quads::tensor_scale> ts;
  packed_dev(int experts, int n, int k, bool per_row)
      : data(static_cast<std::size_t>(experts) * n * k / 2),
        scales(quads::batched<Layout>{experts, Layout{n, k / Format::block_size}}.size()),
        ts(static_cast<std::size_t>(per_row ? experts * n : experts)) {}
  quads::kernels::quantized_view view() { return {data.p, scales.p, ts.p}; }
  quads::kernels::const_quantized_view cview() const { return {data.p, scales.p, ts.p}; }
};

bool same_scales(const std::vector<quads::tensor_scale>& a,
                 const std::vector<quads::tensor_scale>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!quads_test::same_bits(a[i].encode, b[i].encode) ||
        !quads_test::same_bits(a[i].decode, b[i].decode))
      return false;
  return true;
}

template <class P, class Layout>
void check_gpu_contract(std::string_view name, std::uint64_t seed, bool per_expert_given) {
  using Q = typename P::weight_quantizer;
  using F = typename Q::format;
  constexpr bool host_ok = Q::options.math != quads::scale_math::rcp_approx;
  constexpr bool per_row = F::has_tensor_scale && Q::options.global == quads::global_scale::per_row;
  for (const case_shape cs : gpu_shapes) {
    INFO(std::string(name) << " layout "
                           << (std::is_same_v<Layout, quads::linear_scales> ? "linear" : "swizzled")
                           << " shape [" << cs.experts << ", " << cs.n << ", " << cs.k << "]");
    auto g = quads_test::rng(std::string("gpu.") + std::string(name) + std::to_string(cs.n));
    const std::vector<float> w = weights(g, cs.experts, cs.n, cs.k, true); // bf16 values
    const quads::kernels::tensor_shape shape{cs.experts, cs.n, cs.k};
    const std::size_t count = w.size();
    const std::size_t ts_count = per_row ? static_cast<std::size_t>(cs.experts) * cs.n : cs.experts;

    std::vector<quads::tensor_scale> given;
    for (int e = 0; e < (per_expert_given ? cs.experts : 1); ++e)
      given.push_back(quads::make_tensor_scale<quads::nvfp4>(0.1f * static_cast<float>(e + 1)));
    dbuf<quads::tensor_scale> given_d(given.size());
    given_d.upload(given);
    const tr::device_fake_quant_args dargs{
        given_d.p, static_cast<int>(given.size()), nullptr, 0, seed, 0};
    const quads::fake_quant_args hargs{.weight_given = given, .weight_seed = seed};

    dbuf<float> w32(count), wq32(count), deq32(count), amax(cs.experts);
    dbuf<bf16> w16(count), wq16(count), deq16(count);
    dbuf<quads::tensor_scale> fq_ts(ts_count), fq_ts16(ts_count);
    w32.upload(w);
    w16.upload(to_bf16(w));
    packed_dev<F, Layout> p32(cs.experts, cs.n, cs.k, per_row),
        p16(cs.experts, cs.n, cs.k, per_row);

    // Trainer side: fake-quantized weights. Rollout side: packed weights, dequantized.
    QUADS_CUDA_REQUIRE(
        tr::fake_quant_weights<P>(w32.p, wq32.p, cs.experts, cs.n, cs.k, fq_ts.p, amax.p, dargs));
    QUADS_CUDA_REQUIRE(
        (tr::sync_weights<P, Layout>(w32.p, cs.experts, cs.n, cs.k, p32.view(), amax.p, dargs)));
    QUADS_CUDA_REQUIRE((quads::kernels::dequantize<Q, Layout>(p32.cview(), deq32.p, shape)));
    QUADS_CUDA_REQUIRE(
        tr::fake_quant_weights<P>(w16.p, wq16.p, cs.experts, cs.n, cs.k, fq_ts16.p, amax.p, dargs));
    QUADS_CUDA_REQUIRE(
        (tr::sync_weights<P, Layout>(w16.p, cs.experts, cs.n, cs.k, p16.view(), amax.p, dargs)));
    QUADS_CUDA_REQUIRE((quads::kernels::dequantize<Q, Layout>(p16.cview(), deq16.p, shape)));
    QUADS_CUDA_REQUIRE(cudaDeviceSynchronize());

    const std::vector<float> trainer32 = wq32.download();
    REQUIRE(diff(trainer32, deq32.download()) == ""); // the contract, fp32
    REQUIRE(diff(from_bf16(wq16.download()), from_bf16(deq16.download())) == ""); // and bf16
    REQUIRE(diff(from_bf16(wq16.download()), round_bf16(trainer32)) == ""); // bf16 = RNE(fp32)
    REQUIRE(quads_test::mismatch_report(p16.data.download(), p32.data.download()) == "");
    REQUIRE(quads_test::mismatch_report(p16.scales.download(), p32.scales.download()) == "");
    if constexpr (F::has_tensor_scale) {
      REQUIRE(same_scales(fq_ts.download(), p32.ts.download())); // trainer and rollout scales
    }

    if constexpr (host_ok) { // and the GPU equals the host on both sides, byte for byte
      const auto hq = ref::fake_quant_weights<P>(w, cs.experts, cs.n, cs.k, hargs);
      REQUIRE(diff(trainer32, hq.values) == "");
      const auto hp = ref::sync_weights<P, Layout>(w, cs.experts, cs.n, cs.k, hargs);
      REQUIRE(quads_test::mismatch_report(p32.data.download(), hp.data) == "");
      REQUIRE(quads_test::mismatch_report(p32.scales.download(), hp.scales) == "");
      if constexpr (F::has_tensor_scale) REQUIRE(same_scales(p32.ts.download(), hp.tensor_scales));
    }

    // The clipped-STE mask on the GPU (fp32 and bf16 master; fp32 gradient of ones).
    const std::vector<float> ones(count, 1.0f);
    dbuf<float> grad32(count), grad16(count);
    grad32.upload(ones);
    grad16.upload(ones);
    const quads::kernels::scale_args sa{dargs.weight_given, dargs.weight_given_count, nullptr,
                                        seed};
    QUADS_CUDA_REQUIRE(
        (tr::apply_ste<Q, quads::ste::clipped>(w32.p, grad32.p, shape, fq_ts.p, sa)));
    QUADS_CUDA_REQUIRE(
        (tr::apply_ste<Q, quads::ste::clipped>(w16.p, grad16.p, shape, fq_ts16.p, sa)));
    QUADS_CUDA_REQUIRE(cudaDeviceSynchronize());
    const std::vector<float> m32 = grad32.download();
    REQUIRE(diff(m32, grad16.download()) == "");
    if constexpr (host_ok) {
      const auto hq = ref::fake_quant_weights<P>(w, cs.experts, cs.n, cs.k, hargs);
      std::vector<float> hgrad = ones;
      ref::apply_ste<Q, quads::ste::clipped>(std::span<const float>(w), std::span<float>(hgrad),
                                             hq);
      REQUIRE(diff(m32, hgrad) == "");
    }
    // Every masked element carries code ±6 (GPU bytes), and the mask is 0/1.
    const std::vector<std::uint8_t> codes = p32.data.download();
    for (std::size_t i = 0; i < count; ++i) {
      REQUIRE((m32[i] == 0.0f || m32[i] == 1.0f));
      if (m32[i] == 0.0f) REQUIRE(((codes[i / 2] >> (4 * (i % 2))) & 0x7u) == 0x7u);
    }
  }
}

template <class P>
void check_gpu_layouts(std::string_view name, std::uint64_t seed = 0,
                       bool per_expert_given = false) {
  check_gpu_contract<P, quads::linear_scales>(name, seed, per_expert_given);
  check_gpu_contract<P, quads::swizzled_128x4>(name, seed, per_expert_given);
}

} // namespace

TEST_SUITE("policy.gpu.weight_sync") {
  TEST_CASE("nvfp4 default: GPU trainer QDQ == GPU rollout dequant == host, bit for bit") {
    check_gpu_layouts<quads::weight_only<quads::nvfp4>>("nvfp4");
  }
  TEST_CASE("nvfp4 stochastic rounding with the same seed") {
    check_gpu_layouts<quads::weight_only<quads::nvfp4, o_stochastic>>(
        "sr", quads_test::derived_seed("gpu.sr"));
  }
  TEST_CASE("nvfp4 four_over_six, with and without stochastic rounding") {
    check_gpu_layouts<quads::weight_only<quads::nvfp4, o_four_six>>("46");
    check_gpu_layouts<quads::weight_only<quads::nvfp4, o_four_six_sr>>(
        "46sr", quads_test::derived_seed("gpu.46sr"));
  }
  TEST_CASE("nvfp4 given tensor scales (one; one per expert) and per-row scales") {
    check_gpu_layouts<quads::weight_only<quads::nvfp4, o_given>>("given1");
    check_gpu_layouts<quads::weight_only<quads::nvfp4, o_given>>("givenE", 0, true);
    check_gpu_layouts<quads::weight_only<quads::nvfp4, o_per_row>>("rows");
  }
  TEST_CASE("nvfp4 rcp_approx (GPU-only scale math), with stochastic rounding, 4/6, per-row") {
    check_gpu_layouts<quads::weight_only<quads::nvfp4, o_rcp>>("rcp");
    check_gpu_layouts<quads::weight_only<quads::nvfp4, o_rcp_sr>>(
        "rcpsr", quads_test::derived_seed("gpu.rcpsr"));
    check_gpu_layouts<quads::weight_only<quads::nvfp4, o_rcp_46>>("rcp46");
    check_gpu_layouts<quads::weight_only<quads::nvfp4, o_rcp_rows>>("rcprows");
  }
  TEST_CASE("mxfp4 round-up, floor, stochastic") {
    check_gpu_layouts<quads::weight_only<quads::mxfp4>>("mx");
    check_gpu_layouts<quads::weight_only<quads::mxfp4, o_mx_floor>>("mxfloor");
    check_gpu_layouts<quads::weight_only<quads::mxfp4, o_mx_floor_sr>>(
        "mxsr", quads_test::derived_seed("gpu.mxsr"));
  }
}
