// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief GPU linear forward/backward (fake-quant kernels + cuBLAS) against the float64 host
//! reference on fresh random inputs, and the argument checks of the GPU trainer path.
//!
//! Tolerance (documented in docs/policies.md): per output element, relative to the sum of the
//! absolute values of its terms, S = sum |a_i b_i| (+ |bias|):
//! - bf16 outputs (y, dx): |gpu - ref| <= (2^-8 for each operand that is an NVFP4 QDQ value,
//!   which bf16 rounds with unit roundoff 2^-8; MXFP4 QDQ values and bf16 inputs are exact) +
//!   2^-8 (bf16 rounding of the output) + 2^-16 (fp32 accumulation), times S;
//! - fp32 outputs (dW, dbias): the same without the output term.
//! The fake-quantized operands themselves are checked bit for bit (bf16 RNE of the host's fp32
//! QDQ), and gradients the clipped STE masks must be exactly +0.
#include "gpu_helpers.cuh"
#include "policy_helpers.hpp"

#include <quads/policy/trainer.cuh>

#include <cmath>
#include <string>
#include <vector>

using namespace policy_test;
using namespace policy_gpu_test;
namespace ref = quads::reference;
namespace tr = quads::trainer;
using bf16 = __nv_bfloat16;

namespace {

//! Max over elements of |gpu - ref| / S, and whether it stays within `tol`.
struct error_stat {
  double worst = 0.0;
  std::size_t where = 0;
};

error_stat relative_errors(const std::vector<float>& gpu, const std::vector<double>& want,
                           const std::vector<double>& abs_sum) {
  error_stat s;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    const double denom = abs_sum[i] > 0.0 ? abs_sum[i] : 1e-30;
    const double r = std::fabs(static_cast<double>(gpu[i]) - want[i]) / denom;
    if (!(r <= s.worst)) {
      s.worst = r;
      s.where = i;
    }
  }
  return s;
}

template <class P>
constexpr bool nvfp4_rounded_weights() {
  if constexpr (P::quantizes_weights)
    return P::weight_quantizer::format::has_tensor_scale;
  else
    return false;
}
template <class P>
constexpr bool nvfp4_rounded_acts() {
  if constexpr (P::quantizes_activations)
    return P::activation_quantizer::format::has_tensor_scale;
  else
    return false;
}

template <class P, class TW = bf16>
void check_linear_gpu(std::string_view name, quads::linear_shape s,
                      const quads::fake_quant_args& hargs = {}, bool with_bias = true) {
  const std::string label = std::string(name) +
                            (std::is_same_v<TW, float> ? " (fp32 master)" : "") +
                            (with_bias ? " +bias" : "") + " E=" + std::to_string(s.experts);
  INFO(label);
  auto g =
      quads_test::rng(std::string("gpu.linear.") + std::string(name) + std::to_string(s.experts));
  const std::size_t M = static_cast<std::size_t>(s.total_rows());
  const std::size_t N = static_cast<std::size_t>(s.n), K = static_cast<std::size_t>(s.k);
  // fp32 masters are not bf16 values: the fp32 path must QDQ the fp32 weights.
  std::vector<float> w = weights(g, s.experts, s.n, s.k, !std::is_same_v<TW, float>);
  std::vector<float> x = round_bf16(quads_test::normal_values(g, M * K));
  std::vector<float> bias =
      round_bf16(quads_test::normal_values(g, static_cast<std::size_t>(s.experts) * N, 0.5f));
  if (!with_bias) bias.clear();
  std::vector<float> dy = round_bf16(quads_test::normal_values(g, M * N));

  // Host float64 reference.
  const auto fwd = ref::linear_forward<P, double>(x, w, bias, s, hargs);
  const auto grads = ref::linear_backward<P, double>(dy, x, w, s, fwd.saved);

  // GPU.
  cublas_handle handle;
  dbuf<bf16> x_d(M * K), bias_d(bias.size()), y_d(M * N), dy_d(M * N), dx_d(M * K);
  dbuf<TW> w_d(w.size());
  dbuf<float> dw_d(w.size()), db_d(static_cast<std::size_t>(s.experts) * N);
  x_d.upload(to_bf16(x));
  bias_d.upload(to_bf16(bias));
  dy_d.upload(to_bf16(dy));
  if constexpr (std::is_same_v<TW, float>)
    w_d.upload(w);
  else
    w_d.upload(to_bf16(w));
  dbuf<quads::tensor_scale> wg_d(hargs.weight_given.size()), ag_d(hargs.act_given.size());
  wg_d.upload(
      std::vector<quads::tensor_scale>(hargs.weight_given.begin(), hargs.weight_given.end()));
  ag_d.upload(std::vector<quads::tensor_scale>(hargs.act_given.begin(), hargs.act_given.end()));
  const tr::device_fake_quant_args dargs{
      wg_d.p,        static_cast<int>(wg_d.n), ag_d.p, static_cast<int>(ag_d.n), hargs.weight_seed,
      hargs.act_seed};
  dbuf<unsigned char> ws_mem(tr::linear_workspace_bytes<P, TW>(s, with_bias));
  const tr::linear_workspace ws = tr::carve_linear_workspace<P, TW>(ws_mem.p, s, with_bias);
  cudaStream_t stream;
  QUADS_CUDA_REQUIRE(cudaStreamCreate(&stream));
  const cudaError_t fe = tr::linear_forward<P, TW>(
      handle.h, x_d.p, w_d.p, with_bias ? bias_d.p : nullptr, y_d.p, s, ws, dargs, stream);
  INFO("forward: " << std::string(tr::last_error_message()));
  REQUIRE(fe == cudaSuccess);
  const cudaError_t be = tr::linear_backward<P, TW>(handle.h, dy_d.p, x_d.p, w_d.p, dx_d.p, dw_d.p,
                                                    db_d.p, s, ws, dargs, stream);
  INFO("backward: " << std::string(tr::last_error_message()));
  REQUIRE(be == cudaSuccess);
  QUADS_CUDA_REQUIRE(cudaStreamSynchronize(stream));
  QUADS_CUDA_REQUIRE(cudaStreamDestroy(stream));

  // Operands bit for bit: bf16 RNE of the host's fp32 fake quantization.
  if (P::quantizes_weights || std::is_same_v<TW, float>) {
    std::vector<bf16> wop(w.size());
    REQUIRE(cudaMemcpy(wop.data(), ws.weight_op, w.size() * 2, cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    REQUIRE(diff(from_bf16(wop), round_bf16(fwd.saved.weights.values)) == "");
  }
  std::vector<float> xop_host;
  for (const auto& a : fwd.saved.acts)
    xop_host.insert(xop_host.end(), a.values.begin(), a.values.end());
  if (P::quantizes_activations && M > 0) {
    std::vector<bf16> xop(M * K);
    REQUIRE(cudaMemcpy(xop.data(), ws.act_op, M * K * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
    REQUIRE(diff(from_bf16(xop), round_bf16(xop_host)) == "");
  }

  // Sums of |terms| per output element.
  const std::vector<float>& wo = fwd.saved.weights.values;
  std::vector<double> sy(M * N), sdx(M * K), sdw(w.size(), 0.0),
      sdb(static_cast<std::size_t>(s.experts) * N, 0.0);
  for (int e = 0; e < s.experts; ++e) {
    const std::size_t r0 = static_cast<std::size_t>(s.row_offset(e));
    const std::size_t rows = static_cast<std::size_t>(s.rows[static_cast<std::size_t>(e)]);
    const float* we = wo.data() + static_cast<std::size_t>(e) * N * K;
    for (std::size_t i = r0; i < r0 + rows; ++i) {
      for (std::size_t j = 0; j < N; ++j) {
        double a = with_bias ? std::fabs(bias[e * N + j]) : 0.0;
        for (std::size_t c = 0; c < K; ++c)
          a += std::fabs(static_cast<double>(xop_host[i * K + c]) * we[j * K + c]);
        sy[i * N + j] = a;
        sdb[e * N + j] += std::fabs(dy[i * N + j]);
      }
      for (std::size_t c = 0; c < K; ++c) {
        double a = 0.0;
        for (std::size_t j = 0; j < N; ++j)
          a += std::fabs(static_cast<double>(dy[i * N + j]) * we[j * K + c]);
        sdx[i * K + c] = a;
      }
      for (std::size_t j = 0; j < N; ++j)
        for (std::size_t c = 0; c < K; ++c)
          sdw[(e * N + j) * K + c] +=
              std::fabs(static_cast<double>(dy[i * N + j]) * xop_host[i * K + c]);
    }
  }
  const double acc = std::ldexp(1.0, -16), out16 = std::ldexp(1.0, -8);
  const double op_w = nvfp4_rounded_weights<P>() ? std::ldexp(1.0, -8) : 0.0;
  const double op_x = nvfp4_rounded_acts<P>() ? std::ldexp(1.0, -8) : 0.0;
  // An fp32 master is rounded to the bf16 GEMM operand (relative error up to 2^-8, bf16 has an
  // 8-bit significand) where no weight quantizer already accounts for it in `op_w`.
  const double op_master =
      !P::quantizes_weights && std::is_same_v<TW, float> ? std::ldexp(1.0, -8) : 0.0;
  const double tol_y = op_w + op_master + op_x + out16 + acc;
  const double tol_dx = op_w + op_master + out16 + acc;
  const double tol_dw = op_x + acc;

  const auto ey = relative_errors(from_bf16(y_d.download()), fwd.y, sy);
  const auto edx = relative_errors(from_bf16(dx_d.download()), grads.dx, sdx);
  const std::vector<float> dw_gpu = dw_d.download();
  const auto edw = relative_errors(dw_gpu, grads.dw, sdw);
  const auto edb = relative_errors(db_d.download(), grads.dbias, sdb);
  MESSAGE(label << ": max |err|/S  y " << ey.worst << " (tol " << tol_y << ")  dx " << edx.worst
                << " (tol " << tol_dx << ")  dW " << edw.worst << " (tol " << tol_dw << ")  dbias "
                << edb.worst);
  CHECK(ey.worst <= tol_y);
  CHECK(edx.worst <= tol_dx);
  CHECK(edw.worst <= tol_dw);
  CHECK(edb.worst <= acc);

  // Exact zeros where the reference STE masked (and for experts without rows).
  int masked = 0;
  for (std::size_t i = 0; i < dw_gpu.size(); ++i)
    if (grads.dw[i] == 0.0) {
      ++masked;
      REQUIRE(quads_test::same_bits(dw_gpu[i], 0.0f));
    }
  if (std::is_same_v<typename P::weight_gradient, quads::ste::clipped>) CHECK(masked > 0);
  const std::vector<float> dx_gpu = from_bf16(dx_d.download());
  for (std::size_t i = 0; i < dx_gpu.size(); ++i)
    if (grads.dx[i] == 0.0) REQUIRE(quads_test::same_bits(dx_gpu[i], 0.0f));
}

template <class P, class TW = bf16>
void check_shapes(std::string_view name, const quads::fake_quant_args& hargs = {}) {
  check_linear_gpu<P, TW>(name, quads::linear_shape::dense(64, 96, 128), hargs);
  check_linear_gpu<P, TW>(name, quads::linear_shape::grouped(64, 96, {17, 0, 40, 7}), hargs, false);
}

} // namespace

TEST_SUITE("policy.gpu.linear") {
  TEST_CASE("bf16 baseline matches the float64 reference") {
    check_shapes<quads::no_fake_quant>("bf16");
    check_shapes<quads::no_fake_quant, float>("bf16");
  }
  TEST_CASE("weight_only nvfp4, identity and clipped STE, bf16 and fp32 masters") {
    check_shapes<quads::weight_only<quads::nvfp4>>("wo-nvfp4");
    check_shapes<quads::weight_only<quads::nvfp4, o_default, quads::ste::clipped>>("wo-nvfp4-clip");
    check_shapes<quads::weight_only<quads::nvfp4, o_four_six_sr, quads::ste::clipped>, float>(
        "wo-nvfp4-46sr-clip", {.weight_seed = quads_test::derived_seed("gpu.lin.46")});
  }
  TEST_CASE("weight_only mxfp4 floor with clipped STE (operands exact in bf16)") {
    check_shapes<quads::weight_only<quads::mxfp4, o_mx_floor, quads::ste::clipped>>(
        "wo-mxfp4-clip");
  }
  TEST_CASE("w4a4 nvfp4 (per-row activations), identity and clipped STE") {
    check_shapes<quads::w4a4<quads::nvfp4>>("w4a4-nvfp4");
    check_shapes<quads::w4a4<quads::nvfp4, o_default, quads::per_row_options, quads::ste::clipped>>(
        "w4a4-nvfp4-clip");
  }
  TEST_CASE("w4a4 nvfp4 with given scales, per-tensor stochastic activations") {
    const std::vector<quads::tensor_scale> wg = {quads::make_tensor_scale<quads::nvfp4>(0.4f)};
    const std::vector<quads::tensor_scale> ag = {
        quads::make_tensor_scale<quads::nvfp4>(3.0f), quads::make_tensor_scale<quads::nvfp4>(2.0f),
        quads::make_tensor_scale<quads::nvfp4>(4.0f), quads::make_tensor_scale<quads::nvfp4>(1.0f)};
    constexpr quads::quant_options act_sr{.round = quads::rounding::stochastic};
    using P = quads::w4a4<quads::nvfp4, o_given, act_sr, quads::ste::clipped>;
    check_linear_gpu<P>("w4a4-given-sr", quads::linear_shape::dense(64, 96, 128),
                        {.weight_given = wg, .act_seed = quads_test::derived_seed("gpu.lin.sr")});
    using P2 = quads::w4a4<quads::nvfp4, o_default, o_given, quads::ste::clipped>;
    check_linear_gpu<P2>("w4a4-actgiven", quads::linear_shape::grouped(64, 96, {17, 0, 40, 7}),
                         {.act_given = ag});
  }
  TEST_CASE("w4a4 mxfp4 floor with clipped STE") {
    check_shapes<quads::w4a4<quads::mxfp4, o_mx_floor, o_mx_floor, quads::ste::clipped>>(
        "w4a4-mxfp4-clip");
  }
}

TEST_SUITE("policy.gpu.errors") {
  TEST_CASE("argument checks fail before enqueuing, with a message naming the problem") {
    using P = quads::weight_only<quads::mxfp4>;
    cublas_handle handle;
    dbuf<bf16> x(64 * 64), y(64 * 64), w(64 * 64);
    dbuf<unsigned char> mem(1 << 20);
    auto s = quads::linear_shape::dense(16, 16, 48); // k = 48: not a multiple of 32
    auto ws = tr::carve_linear_workspace<P>(mem.p, s);
    CHECK(tr::linear_forward<P>(handle.h, x.p, w.p, nullptr, y.p, s, ws) == cudaErrorInvalidValue);
    CHECK(std::string(tr::last_error_message()).find("multiple of the weight block size 32") !=
          std::string::npos);

    s = quads::linear_shape::dense(16, 16, 64);
    ws = tr::carve_linear_workspace<P>(mem.p, s);
    CHECK(tr::linear_forward<P>(nullptr, x.p, w.p, nullptr, y.p, s, ws) == cudaErrorInvalidValue);
    CHECK(std::string(tr::last_error_message()).find("cublasHandle_t is null") !=
          std::string::npos);

    CHECK(tr::linear_forward<P>(handle.h, x.p, w.p, nullptr, y.p, s, tr::linear_workspace{}) ==
          cudaErrorInvalidValue);
    CHECK(std::string(tr::last_error_message()).find("workspace buffer") != std::string::npos);

    CHECK(tr::linear_forward<P>(handle.h, x.p, w.p + 1, nullptr, y.p, s, ws) ==
          cudaErrorInvalidValue);
    CHECK(std::string(tr::last_error_message()).find("16-byte aligned") != std::string::npos);

    auto bad = quads::linear_shape::grouped(16, 64, {4, 4});
    bad.rows.pop_back();
    CHECK(tr::linear_backward<P>(handle.h, y.p, x.p, w.p, x.p, nullptr, nullptr, bad, ws) ==
          cudaErrorInvalidValue);
    CHECK(std::string(tr::last_error_message()).find("one entry per expert") != std::string::npos);

    using G = quads::weight_only<quads::nvfp4, o_given>;
    auto wsg = tr::carve_linear_workspace<G>(mem.p, s);
    CHECK(tr::linear_forward<G>(handle.h, x.p, w.p, nullptr, y.p, s, wsg) == cudaErrorInvalidValue);
    CHECK(std::string(tr::last_error_message()).find("weight_given") != std::string::npos);

    // Kernel launcher errors come through with the step named.
    dbuf<std::uint8_t> data(64 * 64), scales(4096);
    dbuf<float> amax(4);
    CHECK(tr::sync_weights<P>(w.p, 1, 16, 48, {data.p, scales.p, nullptr}, amax.p) ==
          cudaErrorInvalidValue);
    const std::string m = tr::last_error_message();
    CHECK(m.find("sync_weights (kernels::quantize)") != std::string::npos);
    CHECK(m.find("multiple of the block size 32") != std::string::npos);

    // apply_ste needs a contiguous tensor.
    dbuf<float> grad(64 * 64);
    using WQ = quads::block_quantizer<quads::mxfp4>;
    CHECK((tr::apply_ste<WQ, quads::ste::clipped>(w.p, grad.p,
                                                  quads::kernels::tensor_shape{1, 16, 64, 128},
                                                  nullptr, {})) == cudaErrorInvalidValue);
    CHECK(std::string(tr::last_error_message()).find("contiguous") != std::string::npos);

    // A bias needs the fp32 buffer of a with_bias workspace.
    CHECK(tr::linear_forward<P>(handle.h, x.p, w.p, y.p, y.p, s, ws) == cudaErrorInvalidValue);
    CHECK(std::string(tr::last_error_message()).find("with_bias = true") != std::string::npos);

    // Success clears the message.
    CHECK(tr::linear_forward<P>(handle.h, x.p, w.p, nullptr, y.p, s, ws) == cudaSuccess);
    CHECK(std::string(tr::last_error_message()).empty());
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
}
