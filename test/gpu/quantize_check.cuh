// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Byte-exact checks of the quantize / qdq / dequantize launchers against the host
//! reference.
#pragma once

#include "gpu_test.cuh"

#include <optional>
#include <span>
#include <sstream>

namespace quads::gpu_test {

//! Reads the global nanosecond timer.
__device__ inline unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

//! A producer that lets the next programmatic launch start at once (`pdl_release` at entry),
//! waits `ns` nanoseconds, then copies `n` bytes `src` -> `dst`: a dependent that touched `dst`
//! before its `griddepcontrol.wait` would see (or overwrite) the old bytes. `started`: where CTA
//! 0 records its start time, if not null.
static __global__ void late_copy_kernel(const unsigned char* src, unsigned char* dst, std::size_t n,
                                        unsigned long long ns, unsigned long long* started) {
  kernels::detail::pdl_release();
  kernels::detail::pdl_wait(); // launched programmatically itself (nothing before it in flight)
  const unsigned long long t0 = global_ns();
  if (started != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *started = t0;
  while (global_ns() - t0 < ns) {
  }
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    dst[i] = src[i];
}

//! Enqueues `late_copy_kernel` on a few CTAs (room on every SM for the dependent's CTAs), 20 us.
template <class T>
void late_copy(const device_buffer<T>& src, device_buffer<T>& dst, cudaStream_t stream,
               unsigned long long* started = nullptr) {
  // programmatic itself, as the launchers' kernels are when they follow each other
  REQUIRE(kernels::detail::launch_kernel(true, late_copy_kernel, dim3(16), dim3(256), 0, stream,
                                         reinterpret_cast<const unsigned char*>(src.ptr),
                                         reinterpret_cast<unsigned char*>(dst.ptr),
                                         src.n * sizeof(T), 20000ull, started) == cudaSuccess);
}

struct shape3 {
  int experts, rows, cols;
};

//! Test shapes for a block size: rows not multiple of 128, scale columns not multiple of 4,
//! expert stacks, one row, one block.
inline std::vector<shape3> test_shapes(int block) {
  const int k = block;
  std::vector<shape3> s = {
      {1, 1, k}, {1, 3, 3 * k}, {1, 130, 5 * k}, {3, 37, 16 * k}, {2, 129, 7 * k}};
  if (!quick()) {
    s.push_back({1, 257, 2048});
    s.push_back({2, 160, 2048}); // large enough for the NVFP4 pair kernel (multi-expert)
  }
  return s;
}

template <class Quantizer>
inline constexpr bool is_per_row =
    Quantizer::format::has_tensor_scale&& Quantizer::options.global == global_scale::per_row;
template <class Quantizer>
inline constexpr bool is_given =
    Quantizer::format::has_tensor_scale&& Quantizer::options.global == global_scale::given;

template <class T>
inline std::int64_t stride_for(int cols, int variant) {
  return variant % 2 == 0 ? cols : cols + 2 * static_cast<int>(16 / sizeof(T));
}

inline std::string describe(const char* op, const char* fmt, const char* layout, const char* elem,
                            shape3 s, input_kind k, std::uint64_t seed) {
  std::ostringstream o;
  o << op << " " << fmt << " " << layout << " " << elem << " [" << s.experts << ", " << s.rows
    << ", " << s.cols << "] " << kind_name(k) << " seed 0x" << std::hex << seed;
  return o.str();
}

template <class Layout>
inline const char* layout_name() {
  return std::is_same_v<Layout, swizzled_128x4> ? "swizzled_128x4" : "linear";
}

//! Quantizes on the GPU and on the host, compares every byte; then (if asked) qdq and
//! dequantize of the same input. `given_count` 1 broadcasts one given scale to all experts.
//! `late_input`: the input buffer first holds other values, and `late_copy` writes the real
//! input right before each launch, on a stream of its own (programmatic launches must wait).
template <class Quantizer, class Layout, class T>
void check_quantize(shape3 sh, input_kind kind, std::uint64_t s, int variant, bool also_qdq,
                    int given_count = 0, bool late_input = false) {
  using F = typename Quantizer::format;
  constexpr quant_options O = Quantizer::options;
  constexpr int B = F::block_size;
  const int E = sh.experts, R = sh.rows, C = sh.cols;
  const std::string what =
      describe("quantize", F::name, layout_name<Layout>(), elem_name<T>(), sh, kind, s);
  CAPTURE(what);
  const std::vector<float> x = make_input<T>(kind, E, R, C, B, s);
  const std::int64_t stride = stride_for<T>(C, variant);
  const std::size_t rows_all = static_cast<std::size_t>(E) * R;
  device_buffer<T> dx(rows_all * stride);
  upload_strided(dx, x, rows_all, C, stride);
  const kernels::tensor_shape shape{E, R, C, stride, 0};
  cudaStream_t stream = nullptr;
  std::optional<device_buffer<T>> staged; // late_input: the real input, copied late
  const auto produce = [&] {
    if (!late_input) return;
    // the buffers' fills and uploads ran on the legacy stream, which this one does not wait for
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    late_copy(*staged, dx, stream);
  };
  if (late_input) {
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    staged.emplace(rows_all * stride);
    upload_strided(*staged, x, rows_all, C, stride);
    upload_strided(dx, make_input<T>(kind, E, R, C, B, s ^ 0x5eed), rows_all, C, stride);
  }

  std::vector<tensor_scale> given = make_given<Quantizer>(E, s);
  if (given_count == 0) given_count = E;
  given.resize(static_cast<std::size_t>(given_count));
  device_buffer<tensor_scale> dgiven(given.size());
  dgiven.upload(given);

  const batched<Layout> bl{E, Layout{R, C / B}};
  const std::size_t nts = is_per_row<Quantizer> ? rows_all : static_cast<std::size_t>(E);
  device_buffer<std::uint8_t> ddata(rows_all * C / 2), dscales(bl.size());
  device_buffer<tensor_scale> dts(nts);
  device_buffer<float> damax(E);
  const kernels::scale_args args{dgiven.ptr, given_count, damax.ptr, s};
  produce();
  QUADS_CUDA_CHECK((kernels::quantize<Quantizer, Layout>(
      dx.ptr, shape, kernels::quantized_view{ddata.ptr, dscales.ptr, dts.ptr}, args, stream)));
  sync_ok();

  reference::quantize_args ra{E, {}, s};
  if (is_given<Quantizer>) ra.given = std::span<const tensor_scale>(given);
  const auto q = reference::quantize<F, O, Layout>(x, R, C, ra);
  expect_bytes(ddata.download(q.data.size()), q.data, what + " data");
  expect_bytes(dscales.download(q.scales.size()), q.scales, what + " scales");
  expect_scales(dts.download(q.tensor_scales.size()), q.tensor_scales, what + " tensor scales");

  if (also_qdq) {
    const std::vector<float> ref = reference::dequantize<F, O>(q);
    device_buffer<T> dy(rows_all * stride);
    device_buffer<tensor_scale> dts2(nts);
    produce();
    QUADS_CUDA_CHECK((kernels::qdq<Quantizer>(dx.ptr, dy.ptr, shape, args, dts2.ptr, stream)));
    sync_ok();
    expect_elems<T>(dy.download(rows_all * stride), ref, rows_all, C, stride,
                    describe("qdq", F::name, "-", elem_name<T>(), sh, kind, s));
    if (!is_given<Quantizer>)
      expect_scales(dts2.download(q.tensor_scales.size()), q.tensor_scales, what + " qdq scales");
    // in place
    produce();
    QUADS_CUDA_CHECK((kernels::qdq<Quantizer>(dx.ptr, dx.ptr, shape, args, dts2.ptr, stream)));
    sync_ok();
    expect_elems<T>(dx.download(rows_all * stride), ref, rows_all, C, stride,
                    describe("qdq in place", F::name, "-", elem_name<T>(), sh, kind, s));
  }
  if (stream != nullptr) cudaStreamDestroy(stream);
}

//! Dequantizes the host reference's output on the GPU; fp32 equals reference::dequantize bit for
//! bit, bf16/fp16 are its RNE casts.
template <class Quantizer, class Layout, class TOut>
void check_dequantize(shape3 sh, input_kind kind, std::uint64_t s, int variant) {
  using F = typename Quantizer::format;
  constexpr quant_options O = Quantizer::options;
  constexpr int B = F::block_size;
  const int E = sh.experts, R = sh.rows, C = sh.cols;
  const std::string what =
      describe("dequantize", F::name, layout_name<Layout>(), elem_name<TOut>(), sh, kind, s);
  CAPTURE(what);
  const std::vector<float> x = make_input<float>(kind, E, R, C, B, s);
  std::vector<tensor_scale> given = make_given<Quantizer>(E, s);
  reference::quantize_args ra{E, {}, s};
  if (is_given<Quantizer>) ra.given = std::span<const tensor_scale>(given);
  const auto q = reference::quantize<F, O, Layout>(x, R, C, ra);
  const std::vector<float> ref = reference::dequantize<F, O>(q);
  device_buffer<std::uint8_t> ddata(q.data.size()), dscales(q.scales.size());
  device_buffer<tensor_scale> dts(q.tensor_scales.size());
  ddata.upload(q.data);
  dscales.upload(q.scales);
  dts.upload(q.tensor_scales);
  const std::int64_t stride = stride_for<TOut>(C, variant);
  const std::size_t rows_all = static_cast<std::size_t>(E) * R;
  device_buffer<TOut> dy(rows_all * stride);
  QUADS_CUDA_CHECK((kernels::dequantize<Quantizer, Layout>(
      kernels::const_quantized_view{ddata.ptr, dscales.ptr, dts.ptr}, dy.ptr,
      kernels::tensor_shape{E, R, C, stride, 0}, nullptr)));
  sync_ok();
  expect_elems<TOut>(dy.download(rows_all * stride), ref, rows_all, C, stride, what);
}

//! Runs `check_quantize` over the shapes and input kinds (with qdq for bf16).
template <class Quantizer, class Layout, class T>
void sweep_quantize(bool also_qdq) {
  const std::uint64_t s0 = seed();
  int variant = 0;
  for (const shape3 sh : test_shapes(Quantizer::block_size))
    for (const input_kind k : all_kinds) {
      check_quantize<Quantizer, Layout, T>(sh, k, s0 + static_cast<std::uint64_t>(variant) * 7919u,
                                           variant, also_qdq);
      ++variant;
    }
  if constexpr (is_given<Quantizer>) // one given scale broadcast to every expert
    check_quantize<Quantizer, Layout, T>({3, 20, 4 * Quantizer::block_size}, input_kind::normal,
                                         s0 ^ 0x99, 1, also_qdq, 1);
}

} // namespace quads::gpu_test
