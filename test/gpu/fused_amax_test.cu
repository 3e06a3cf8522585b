// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Amax kernels, and RMSNorm / SiLU-and-mul fused quantize against host mirrors of their
//! documented numerics followed by reference::quantize.
#include "quantize_check.cuh"

namespace {
using namespace quads;
using namespace quads::gpu_test;
using bf16 = __nv_bfloat16;

// ---------------------------------------------------------------------------------------------
// Host mirrors (written from the formulas in quads/kernels/fused.cuh, not calling them)
// ---------------------------------------------------------------------------------------------

//! RMSNorm h = (x * rstd) * w with the kernel's summation order: thread t of n owns blocks
//! t, t + n, ...; lanes combine by xor butterfly 16..1; warp sums are added in warp order.
std::vector<float> rmsnorm_mirror(const std::vector<float>& x, const std::vector<float>& w,
                                  float eps, std::size_t rows, int cols, int block, int threads) {
  std::vector<float> h(x.size());
  const int nkb = cols / block;
  std::vector<float> part(static_cast<std::size_t>(threads));
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = &x[r * cols];
    for (int t = 0; t < threads; ++t) {
      float s = 0.0f;
      for (int kb = t; kb < nkb; kb += threads)
        for (int i = 0; i < block; ++i) {
          const float v = xr[kb * block + i];
          const volatile float p = v * v; // rounded product, never fused
          s = s + p;
        }
      part[t] = s;
    }
    for (int w0 = 0; w0 < threads; w0 += 32)
      for (int o = 16; o > 0; o >>= 1) {
        float nxt[32];
        for (int l = 0; l < 32; ++l)
          nxt[l] = part[w0 + l] + part[w0 + (l ^ o)];
        for (int l = 0; l < 32; ++l)
          part[w0 + l] = nxt[l];
      }
    float total = part[0];
    for (int w0 = 32; w0 < threads; w0 += 32)
      total = total + part[w0];
    const float rstd = 1.0f / std::sqrt(total / static_cast<float>(cols) + eps);
    for (int c = 0; c < cols; ++c) {
      const volatile float a = xr[c] * rstd;
      h[r * cols + c] = a * w[c];
    }
  }
  return h;
}

//! The kernels' exp_rn, transcribed: k = rint(t log2 e), two-part ln2, degree-7 Taylor, 2^k in
//! two exact steps.
float exp_mirror(float t) {
  if (t != t) return t;
  if (t > 88.8f) return std::numeric_limits<float>::infinity();
  if (t < -104.0f) return 0.0f;
  volatile float tmp = t * 1.44269502162933349609375f;
  const float k = std::nearbyint(static_cast<float>(tmp));
  volatile float r = t + (-k * 0.693145751953125f);
  volatile float kl = -k * 1.428606765330187045e-06f;
  r = r + kl;
  const float c[8] = {1.98412701138295233249664306640625e-04f,
                      1.38888892251998186111450195312e-03f,
                      8.33333376795053482055664062500e-03f,
                      4.16666679084300994873046875000e-02f,
                      1.66666671633720397949218750000e-01f,
                      0.5f,
                      1.0f,
                      1.0f};
  volatile float p = c[0];
  for (int i = 1; i < 8; ++i) {
    volatile float pr = p * r;
    p = pr + c[i];
  }
  const int ki = static_cast<int>(k);
  const int k1 = ki / 2, k2 = ki - k1;
  volatile float y = p * from_fbits(static_cast<std::uint32_t>(k1 + 127) << 23);
  return y * from_fbits(static_cast<std::uint32_t>(k2 + 127) << 23);
}

std::vector<float> silu_mul_mirror(const std::vector<float>& g, const std::vector<float>& u) {
  std::vector<float> h(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    const float e = exp_mirror(-g[i]);
    const float silu = g[i] / (1.0f + e);
    const volatile float p = silu * u[i];
    h[i] = p;
  }
  return h;
}

template <class Quantizer, class Layout>
void compare_quantized(const reference::quantized_tensor<typename Quantizer::format, Layout>& q,
                       device_buffer<std::uint8_t>& ddata, device_buffer<std::uint8_t>& dscales,
                       device_buffer<tensor_scale>& dts, const std::string& what) {
  expect_bytes(ddata.download(q.data.size()), q.data, what + " data");
  expect_bytes(dscales.download(q.scales.size()), q.scales, what + " scales");
  expect_scales(dts.download(q.tensor_scales.size()), q.tensor_scales, what + " tensor scales");
}

enum class producer { rmsnorm, silu };

template <class Quantizer, class Layout, class T>
void check_fused(producer which, shape3 sh, input_kind kind, std::uint64_t s, int variant) {
  using F = typename Quantizer::format;
  constexpr quant_options O = Quantizer::options;
  constexpr int B = F::block_size;
  const int E = sh.experts, R = sh.rows, C = sh.cols;
  const std::string what =
      describe(which == producer::rmsnorm ? "rmsnorm_quantize" : "silu_mul_quantize", F::name,
               layout_name<Layout>(), elem_name<T>(), sh, kind, s);
  CAPTURE(what);
  const std::size_t rows_all = static_cast<std::size_t>(E) * R;
  const std::vector<float> x = make_input<T>(kind, E, R, C, B, s);
  const std::vector<float> x2 = make_input<T>(input_kind::normal, E, R, C, B, s + 1);
  const std::int64_t stride = stride_for<T>(C, variant);
  device_buffer<T> dx(rows_all * stride), dx2(rows_all * stride);
  upload_strided(dx, x, rows_all, C, stride);
  upload_strided(dx2, x2, rows_all, C, stride);
  std::vector<float> w(static_cast<std::size_t>(C));
  std::mt19937 rng(static_cast<unsigned>(s));
  for (auto& v : w)
    v = from_elem(to_elem<T>(0.5f + static_cast<float>(rng() % 1000) / 1000.0f));
  device_buffer<T> dw(w.size());
  upload_strided(dw, w, 1, C, C);
  const float eps = 1e-6f;

  std::vector<tensor_scale> given = make_given<Quantizer>(E, s);
  device_buffer<tensor_scale> dgiven(given.size());
  dgiven.upload(given);
  const batched<Layout> bl{E, Layout{R, C / B}};
  const std::size_t nts = is_per_row<Quantizer> ? rows_all : static_cast<std::size_t>(E);
  device_buffer<std::uint8_t> ddata(rows_all * C / 2), dscales(bl.size());
  device_buffer<tensor_scale> dts(nts);
  device_buffer<float> damax(E);
  const kernels::scale_args args{dgiven.ptr, E, damax.ptr, s};
  const kernels::quantized_view out{ddata.ptr, dscales.ptr, dts.ptr};
  const kernels::tensor_shape shape{E, R, C, stride, 0};
  std::vector<float> h;
  if (which == producer::rmsnorm) {
    QUADS_CUDA_CHECK(
        (kernels::rmsnorm_quantize<Quantizer, Layout>(dx.ptr, dw.ptr, eps, shape, out, args)));
    h = rmsnorm_mirror(x, w, eps, rows_all, C, B, kernels::row_cta_threads<F>(C));
  } else {
    QUADS_CUDA_CHECK(
        (kernels::silu_mul_quantize<Quantizer, Layout>(dx.ptr, dx2.ptr, shape, out, args)));
    h = silu_mul_mirror(x, x2);
  }
  sync_ok();
  reference::quantize_args ra{E, {}, s};
  if (is_given<Quantizer>) ra.given = std::span<const tensor_scale>(given);
  const auto q = reference::quantize<F, O, Layout>(h, R, C, ra);
  compare_quantized<Quantizer, Layout>(q, ddata, dscales, dts, what);
}

template <class Quantizer, class Layout, class T>
void sweep_fused(producer which) {
  int variant = 0;
  const input_kind kinds[] = {input_kind::normal, input_kind::heavy,    input_kind::boundary,
                              input_kind::zeros,  input_kind::specials, input_kind::bits};
  std::vector<shape3> shapes = test_shapes(Quantizer::block_size);
  shapes.push_back({1, 5, 16384}); // more blocks than CTA threads: several blocks per thread
  for (const shape3 sh : shapes)
    for (const input_kind k : kinds) {
      check_fused<Quantizer, Layout, T>(which, sh, k, seed() + 15485863u * variant, variant);
      ++variant;
    }
}

using q_default = block_quantizer<nvfp4>;
using q_given = block_quantizer<nvfp4, quant_options{.global = global_scale::given}>;
using q_per_row = block_quantizer<nvfp4, quant_options{.global = global_scale::per_row}>;
using q_sr_given = block_quantizer<nvfp4, quant_options{.round = rounding::stochastic,
                                                        .global = global_scale::given}>;
using m_up = block_quantizer<mxfp4>;

template <class T>
void check_amax(shape3 sh, input_kind kind, std::uint64_t s, int variant) {
  const int E = sh.experts, R = sh.rows, C = sh.cols;
  CAPTURE(describe("amax", "-", "-", elem_name<T>(), sh, kind, s));
  const std::size_t rows_all = static_cast<std::size_t>(E) * R;
  const std::vector<float> x = make_input<T>(kind, E, R, C, 16, s);
  const std::int64_t stride = stride_for<T>(C, variant);
  device_buffer<T> dx(rows_all * stride);
  upload_strided(dx, x, rows_all, C, stride);
  const kernels::tensor_shape shape{E, R, C, stride, 0};
  device_buffer<float> dt(E), dr(rows_all);
  QUADS_CUDA_CHECK(kernels::tensor_amax(dx.ptr, shape, dt.ptr));
  QUADS_CUDA_CHECK(kernels::row_amax(dx.ptr, shape, dr.ptr));
  sync_ok();
  const auto t = dt.download(E);
  const auto r = dr.download(rows_all);
  for (int e = 0; e < E; ++e) {
    const float want = expert_amax(x, e, R, C);
    CHECK(fbits(t[e]) == fbits(want));
  }
  std::size_t bad = 0;
  for (std::size_t i = 0; i < rows_all; ++i)
    bad += fbits(r[i]) != fbits(reference::amax(std::span<const float>(x).subspan(i * C, C)));
  CHECK(bad == 0);
  // accumulate: max(old, new) with old = 2 * amax
  std::vector<float> old(E);
  for (int e = 0; e < E; ++e)
    old[e] = std::isinf(t[e]) ? 1.0f : 2.0f * t[e] + 1.0f;
  dt.upload(old);
  QUADS_CUDA_CHECK(kernels::tensor_amax(dx.ptr, shape, dt.ptr, nullptr, true));
  sync_ok();
  const auto acc = dt.download(E);
  for (int e = 0; e < E; ++e)
    CHECK(fbits(acc[e]) == fbits(std::fmax(old[e], t[e])));
}

} // namespace

TEST_SUITE("gpu.amax") {
  TEST_CASE("sm90: tensor, per-expert and per-row amax equal reference::amax") {
    int variant = 0;
    for (const shape3 sh : test_shapes(16))
      for (const input_kind k : all_kinds) {
        const std::uint64_t s = seed() + 32452843u * variant;
        check_amax<bf16>(sh, k, s, variant);
        check_amax<__half>(sh, k, s, variant + 1);
        check_amax<float>(sh, k, s, variant);
        ++variant;
      }
  }
  TEST_CASE("sm90: tensor_scale_from_amax equals make_tensor_scale") {
    std::vector<float> a = {0.0f,
                            1.0f,
                            448.0f * 6.0f,
                            1e-30f,
                            3e38f,
                            from_fbits(0x7f800000u),
                            from_fbits(0x00000001u),
                            123.456f};
    std::mt19937 rng(static_cast<unsigned>(seed()));
    for (int i = 0; i < 1000; ++i)
      a.push_back(from_fbits(rng() & 0x7fffffffu));
    device_buffer<float> da(a.size());
    da.upload(a);
    device_buffer<tensor_scale> d1(a.size()), d2(a.size());
    QUADS_CUDA_CHECK(
        kernels::tensor_scale_from_amax<q_default>(da.ptr, d1.ptr, static_cast<int>(a.size())));
    using q46 =
        block_quantizer<nvfp4, quant_options{.block_rule = block_scale_rule::four_over_six}>;
    QUADS_CUDA_CHECK(
        kernels::tensor_scale_from_amax<q46>(da.ptr, d2.ptr, static_cast<int>(a.size())));
    sync_ok();
    const auto g1 = d1.download(a.size()), g2 = d2.download(a.size());
    std::vector<tensor_scale> w1, w2;
    for (float v : a) {
      w1.push_back(make_tensor_scale<nvfp4>(v));
      w2.push_back(make_tensor_scale<nvfp4, q46::options>(v));
    }
    expect_scales(g1, w1, "make_tensor_scale nvfp4");
    expect_scales(g2, w2, "make_tensor_scale nvfp4 4/6");
  }
}

TEST_SUITE("gpu.fused") {
  TEST_CASE("sm90: the host mirror of exp_rn is the kernels' exp_rn and is accurate") {
    std::mt19937 rng(static_cast<unsigned>(seed()));
    double worst = 0.0;
    for (int i = 0; i < 2000000; ++i) {
      const float t =
          (i < 1000000)
              ? static_cast<float>(static_cast<double>(rng()) / 4294967296.0 * 200.0 - 100.0)
              : from_fbits(rng());
      const float a = exp_mirror(t), b = kernels::exp_rn(t);
      if (fbits(a) != fbits(b) && !(a != a && b != b)) {
        FAIL_CHECK("exp mirror " << a << " vs exp_rn " << b << " at " << t);
        break;
      }
      if (t > -87.0f && t < 88.0f) {
        const double ref = std::exp(static_cast<double>(t));
        const double ulp = std::ldexp(1.0, std::ilogb(ref) - 23);
        worst = std::max(worst, std::fabs(static_cast<double>(a) - ref) / ulp);
      }
    }
    MESSAGE("exp_rn: worst error " << worst << " ulp on (-87, 88)");
    CHECK(worst < 4.0);
    CHECK(kernels::row_cta_threads<nvfp4>(2048) == 128);
    CHECK(kernels::row_cta_threads<nvfp4>(16) == 32);
    CHECK(kernels::row_cta_threads<mxfp4>(16384) == 256);
  }
  TEST_CASE("sm90: RMSNorm -> quantize equals reference::quantize of the host fp32 RMSNorm") {
    sweep_fused<q_default, swizzled_128x4, bf16>(producer::rmsnorm);
    sweep_fused<q_given, linear_scales, bf16>(producer::rmsnorm);
    sweep_fused<q_per_row, swizzled_128x4, bf16>(producer::rmsnorm);
    sweep_fused<q_per_row, linear_scales, float>(producer::rmsnorm);
    sweep_fused<q_sr_given, swizzled_128x4, __half>(producer::rmsnorm);
    sweep_fused<m_up, swizzled_128x4, bf16>(producer::rmsnorm);
  }
  TEST_CASE(
      "sm90: SiLU(gate) * up -> quantize equals reference::quantize of the host fp32 product") {
    sweep_fused<q_default, swizzled_128x4, bf16>(producer::silu);
    sweep_fused<q_given, swizzled_128x4, __half>(producer::silu);
    sweep_fused<q_per_row, linear_scales, bf16>(producer::silu);
    sweep_fused<m_up, linear_scales, float>(producer::silu);
  }
}
