// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief scale_math::rcp_approx (GPU-only) against a device-side model of the FlashInfer/vLLM
//! recipe written here from hardware instructions: rcp.approx.ftz.f32 and cvt.rn.satfinite.e4m3.
#include "quantize_check.cuh"

#include <cuda_fp8.h>

namespace {
using namespace quads;
using namespace quads::gpu_test;
using bf16 = __nv_bfloat16;

__device__ float rcp_hw(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

//! Model: per block, SF = e4m3_satfinite(S_enc * (amax * rcp(6))) by the hardware converter,
//! element scale = SF == 0 ? 0 : rcp(float(SF) * rcp(S_enc)), code = e2m1(x * scale).
//! `row_ts` holds the tensor scale of each row. Writes codes and linear scales.
template <class T>
__global__ void rcp_model(const T* x, int rows, int cols, std::int64_t stride,
                          const tensor_scale* row_ts, std::uint8_t* data, std::uint8_t* scales) {
  const int nkb = cols / 16;
  for (int u = blockIdx.x * blockDim.x + threadIdx.x; u < rows * nkb; u += gridDim.x * blockDim.x) {
    const int r = u / nkb, kb = u % nkb;
    float v[16];
    float amax = 0.0f;
    for (int i = 0; i < 16; ++i) {
      v[i] = kernels::detail::to_float(x[r * stride + kb * 16 + i]);
      if (!(v[i] != v[i])) amax = fmaxf(amax, fabsf(v[i]));
    }
    const tensor_scale ts = row_ts[r];
    const float sf = __fmul_rn(ts.encode, __fmul_rn(amax, rcp_hw(6.0f)));
    const __nv_fp8_storage_t b = __nv_cvt_float_to_fp8(sf, __NV_SATFINITE, __NV_E4M3);
    const std::uint8_t byte = static_cast<std::uint8_t>(b & 0x7f);
    const __half_raw hr = __nv_cvt_fp8_to_halfraw(byte, __NV_E4M3);
    const float sfv = __half2float(__half(hr));
    const float m = byte == 0 ? 0.0f : rcp_hw(__fmul_rn(sfv, rcp_hw(ts.encode)));
    for (int i = 0; i < 8; ++i)
      data[static_cast<std::size_t>(u) * 8 + i] = static_cast<std::uint8_t>(
          encode_e2m1(__fmul_rn(v[2 * i], m)) | (encode_e2m1(__fmul_rn(v[2 * i + 1], m)) << 4));
    scales[u] = byte;
  }
}

template <global_scale G, class Layout, class T>
void check_rcp(shape3 sh, input_kind kind, std::uint64_t s, int variant) {
  using Q = block_quantizer<nvfp4, quant_options{.math = scale_math::rcp_approx, .global = G}>;
  const int R = sh.rows, C = sh.cols; // experts = 1
  const std::string what =
      describe("quantize rcp_approx", "nvfp4", layout_name<Layout>(), elem_name<T>(), sh, kind, s);
  CAPTURE(what);
  const std::vector<float> x = make_input<T>(kind, 1, R, C, 16, s);
  const std::int64_t stride = stride_for<T>(C, variant);
  device_buffer<T> dx(static_cast<std::size_t>(R) * stride);
  upload_strided(dx, x, static_cast<std::size_t>(R), C, stride);
  // tensor scales per row, computed on the host exactly as the kernels' amax -> scale rule
  std::vector<tensor_scale> row_ts(static_cast<std::size_t>(R));
  tensor_scale given = make_tensor_scale<nvfp4, Q::options>(3.0f);
  for (int r = 0; r < R; ++r) {
    if (G == global_scale::given)
      row_ts[r] = given;
    else if (G == global_scale::per_tensor)
      row_ts[r] = make_tensor_scale<nvfp4, Q::options>(reference::amax(x));
    else
      row_ts[r] = make_tensor_scale<nvfp4, Q::options>(
          reference::amax(std::span<const float>(x).subspan(static_cast<std::size_t>(r) * C, C)));
  }
  device_buffer<tensor_scale> dts_rows(row_ts.size());
  dts_rows.upload(row_ts);
  device_buffer<std::uint8_t> mdata(static_cast<std::size_t>(R) * C / 2),
      mscales(static_cast<std::size_t>(R) * C / 16);
  rcp_model<T><<<64, 256>>>(dx.ptr, R, C, stride, dts_rows.ptr, mdata.ptr, mscales.ptr);
  QUADS_CUDA_CHECK(cudaGetLastError());

  device_buffer<tensor_scale> dgiven(1);
  dgiven.upload({given});
  const Layout layout{R, C / 16};
  device_buffer<std::uint8_t> ddata(static_cast<std::size_t>(R) * C / 2), dscales(layout.size());
  device_buffer<tensor_scale> dts(G == global_scale::per_row ? R : 1);
  device_buffer<float> damax(1);
  QUADS_CUDA_CHECK(
      (kernels::quantize<Q, Layout>(dx.ptr, kernels::tensor_shape{1, R, C, stride, 0},
                                    kernels::quantized_view{ddata.ptr, dscales.ptr, dts.ptr},
                                    kernels::scale_args{dgiven.ptr, 1, damax.ptr, 0})));
  sync_ok();
  expect_bytes(ddata.download(mdata.n), mdata.download(mdata.n), what + " data");
  const auto lin = mscales.download(mscales.n);
  std::vector<std::uint8_t> want(layout.size(), 0);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C / 16; ++c)
      want[layout.offset(r, c)] = lin[static_cast<std::size_t>(r) * (C / 16) + c];
  expect_bytes(dscales.download(layout.size()), want, what + " scales");
  const auto ts = dts.download(dts.n);
  for (std::size_t i = 0; i < ts.size(); ++i) {
    CHECK(fbits(ts[i].encode) == fbits(row_ts[i].encode));
    CHECK(fbits(ts[i].decode) == fbits(row_ts[i].decode));
  }
}

template <global_scale G, class Layout, class T>
void sweep_rcp() {
  int variant = 0;
  for (const shape3 sh0 : test_shapes(16)) {
    const shape3 sh{1, sh0.rows, sh0.cols};
    for (const input_kind k : all_kinds) {
      check_rcp<G, Layout, T>(sh, k, seed() + 49979687u * variant, variant);
      ++variant;
    }
  }
}
} // namespace

TEST_SUITE("gpu.rcp_approx") {
  TEST_CASE("sm90: rcp_approx quantize matches the device model of the fast-math recipe") {
    sweep_rcp<global_scale::given, swizzled_128x4, bf16>();
    sweep_rcp<global_scale::per_tensor, linear_scales, bf16>();
    sweep_rcp<global_scale::per_row, swizzled_128x4, __half>();
    sweep_rcp<global_scale::given, linear_scales, float>();
  }
}
