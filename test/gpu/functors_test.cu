// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The core block functors inside kernels vs the same functors on the host (>= 10^8 values),
//! and the kernels' fast encoder / decoder vs the core codecs (all 2^32 inputs).
#include "gpu_test.cuh"

#include <bit>
#include <cmath>
#include <cuda_fp4.h>
#include <cuda_fp16.h>

#include <atomic>
#include <mutex>

namespace {
using namespace quads;
using namespace quads::gpu_test;
namespace kd = quads::kernels::detail;

// ---------------------------------------------------------------------------------------------
// A block generator that runs identically on host and device (integer ops, exact float scaling)
// ---------------------------------------------------------------------------------------------

QUADS_API float bits_to_float(std::uint32_t u) { return quads::detail::from_bits(u); }

//! Block `b` of the stream keyed by `seed`: values and a tensor scale. Mixes normal magnitudes
//! over 2^-20..2^20, E2M1 decision points one or two ulps either side after a power-of-two block
//! scale, raw bit patterns (NaN, Inf, subnormals), scale underflow down to 2^-30, zeros / -0,
//! and sprinkled specials; tensor scales from the block amax, {1, 1}, or random amaxes.
template <class Quantizer>
QUADS_API void gen_block(std::uint64_t seed, std::uint64_t b, float (&x)[Quantizer::block_size],
                         tensor_scale& ts) {
  constexpr int B = Quantizer::block_size;
  const philox4x32_10 g{seed};
  std::uint32_t w[B + 4];
  for (int d = 0; d < (B + 4) / 4; ++d) {
    const random_words4 r =
        g(b * static_cast<std::uint64_t>((B + 4) / 4) + static_cast<std::uint64_t>(d));
    for (int i = 0; i < 4; ++i)
      w[4 * d + i] = r[i];
  }
  const std::uint32_t p = w[B];
  const std::uint32_t mode = p & 7u;
  const int j = static_cast<int>((p >> 8) % 9u) - 4; // block scale 2^j for boundary blocks
  const float S = bits_to_float(static_cast<std::uint32_t>(127 + j) << 23);
  constexpr float thr[16] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f,
                             0.5f,  1.0f,  1.5f,  2.0f,  3.0f, 4.0f, 0.0f, 6.0f};
  for (int i = 0; i < B; ++i) {
    const std::uint32_t u = w[i];
    float v;
    if (mode <= 3u) {
      const std::uint32_t e0 = 127u + (p >> 12) % 41u - 20u;
      const std::uint32_t e = e0 - (u >> 24) % 9u;
      v = bits_to_float((u & 0x80000000u) | (e << 23) | (u & 0x7fffffu));
    } else if (mode == 4u) {
      if (i == 0) {
        v = quads::detail::mul_rn(6.0f, S);
      } else {
        const float t = quads::detail::mul_rn(thr[u & 15u], S);
        const int d = static_cast<int>((u >> 4) % 5u) - 2; // -2 .. 2 ulps
        std::uint32_t tb = quads::detail::to_bits(t);
        if (tb != 0u) tb = static_cast<std::uint32_t>(static_cast<int>(tb) + d);
        v = bits_to_float(tb | (u & 0x80000000u));
      }
    } else if (mode == 5u) {
      v = bits_to_float(u);
    } else if (mode == 6u) {
      const int k = static_cast<int>((p >> 12) % 31u);
      const std::uint32_t e = 127u - static_cast<std::uint32_t>(k) - (u >> 24) % 3u;
      v = (u & 0x300u) == 0u ? 0.0f
                             : bits_to_float((u & 0x80000000u) | (e << 23) | (u & 0x7fffffu));
      if ((u & 0x3000u) == 0u) v = bits_to_float(u & 0x80000000u); // ±0
    } else {
      v = bits_to_float((u & 0x807fffffu) | ((120u + (u >> 27)) << 23)); // near 2^-7 .. 2^24
    }
    if (((u >> 12) & 0xffu) == 0u) { // specials
      constexpr std::uint32_t sp[8] = {0x7fc00000u, 0xffc00001u, 0x7f800000u, 0xff800000u,
                                       0x00000000u, 0x80000000u, 0x7f7fffffu, 0x00000003u};
      v = bits_to_float(sp[(u >> 20) & 7u]);
    }
    x[i] = v;
  }
  using F = typename Quantizer::format;
  constexpr quant_options O = Quantizer::options;
  const float amax = Quantizer::amax(x);
  switch ((p >> 4) & 3u) {
  case 0:
    ts = make_tensor_scale<F, O>(amax);
    break;
  case 1:
    ts = tensor_scale{};
    break;
  case 2:
    ts = make_tensor_scale<F, O>(bits_to_float(w[B + 1]));
    break;
  default: {
    const std::uint32_t e = 127u + (w[B + 2] >> 3) % 61u - 30u;
    ts = make_tensor_scale<F, O>(quads::detail::mul_rn(amax, bits_to_float(e << 23)));
  }
  }
}

//! FNV-1a over the fp32 bits of a dequantized block, every NaN hashed as one value: a NaN
//! product's sign and payload are not the library's (the GPU's multiply returns 0x7fffffff, x86
//! propagates an operand's NaN; docs/formats.md), so only NaN-ness is compared.
QUADS_API std::uint32_t hash_block(const float* y, int n) {
  std::uint32_t h = 2166136261u;
  for (int i = 0; i < n; ++i) {
    h ^= y[i] != y[i] ? 0x7fffffffu : quads::detail::to_bits(y[i]);
    h *= 16777619u;
  }
  return h;
}

//! Per block: the core functor's bytes (codes, scale), the kernels' fast path bytes, and hashes of
//! the core dequantize and the fast dequantize.
template <class Quantizer>
__global__ void functor_kernel(std::uint64_t seed, std::uint64_t sr_seed, std::uint64_t nblocks,
                               std::uint8_t* core, std::uint8_t* fast, std::uint32_t* hashes) {
  using F = typename Quantizer::format;
  constexpr int B = Quantizer::block_size;
  constexpr int bytes = B / 2 + 1;
  for (std::uint64_t b = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       b < nblocks; b += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    float x[B];
    tensor_scale ts;
    gen_block<Quantizer>(seed, b, x, ts);
    const packed_block<F> pb =
        Quantizer::quantize(x, ts, draw_block_bits<F>(philox4x32_10{sr_seed}, b));
    for (int i = 0; i < B / 2; ++i)
      core[b * bytes + i] = pb.codes[i];
    core[b * bytes + B / 2] = pb.scale;
    float xv[1][B];
    for (int i = 0; i < B; ++i)
      xv[0][i] = x[i];
    const std::uint64_t index[1] = {b};
    kd::block_words<B> qs[1];
    kd::quantize_blocks<Quantizer, 1>(xv, ts, sr_seed, index, qs);
    const kd::block_words<B>& q = qs[0];
    for (int i = 0; i < B / 2; ++i)
      fast[b * bytes + i] = static_cast<std::uint8_t>(q.w[i / 4] >> (8 * (i % 4)));
    fast[b * bytes + B / 2] = q.scale;
    float y[B];
    Quantizer::dequantize(pb, ts, y);
    hashes[2 * b] = hash_block(y, B);
    kd::block_words<B> qc;
    for (int w = 0; w < B / 8; ++w)
      qc.w[w] = static_cast<std::uint32_t>(pb.codes[4 * w]) |
                (static_cast<std::uint32_t>(pb.codes[4 * w + 1]) << 8) |
                (static_cast<std::uint32_t>(pb.codes[4 * w + 2]) << 16) |
                (static_cast<std::uint32_t>(pb.codes[4 * w + 3]) << 24);
    qc.scale = pb.scale;
    kd::dequantize_block<Quantizer>(qc, ts, y);
    hashes[2 * b + 1] = hash_block(y, B);
  }
}

template <class Quantizer>
void check_functors(std::uint64_t values, const char* label) {
  using F = typename Quantizer::format;
  constexpr int B = Quantizer::block_size;
  constexpr int bytes = B / 2 + 1;
  const std::uint64_t nblocks = (values + B - 1) / B;
  const std::uint64_t s = seed() ^ 0xf00d, sr = seed() * 31u + 7u;
  const std::string what = label;
  CAPTURE(what);
  CAPTURE(nblocks);
  device_buffer<std::uint8_t> dcore(nblocks * bytes), dfast(nblocks * bytes);
  device_buffer<std::uint32_t> dh(2 * nblocks);
  functor_kernel<Quantizer><<<132 * 8, 256>>>(s, sr, nblocks, dcore.ptr, dfast.ptr, dh.ptr);
  QUADS_CUDA_CHECK(cudaGetLastError());
  sync_ok();
  const std::vector<std::uint8_t> core = dcore.download(nblocks * bytes);
  const std::vector<std::uint8_t> fast = dfast.download(nblocks * bytes);
  const std::vector<std::uint32_t> hashes = dh.download(2 * nblocks);

  std::atomic<std::uint64_t> bad_core{0}, bad_fast{0}, bad_deq{0}, bad_fast_deq{0};
  std::atomic<std::uint64_t> first_bad{~std::uint64_t{0}};
  const unsigned nt = host_threads();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < nt; ++t)
    pool.emplace_back([&, t] {
      std::uint64_t bc = 0, bf = 0, bd = 0, bfd = 0;
      for (std::uint64_t b = t; b < nblocks; b += nt) {
        float x[B];
        tensor_scale ts;
        gen_block<Quantizer>(s, b, x, ts);
        const packed_block<F> pb =
            Quantizer::quantize(x, ts, draw_block_bits<F>(philox4x32_10{sr}, b));
        bool c_ok = core[b * bytes + B / 2] == pb.scale, f_ok = fast[b * bytes + B / 2] == pb.scale;
        for (int i = 0; i < B / 2; ++i) {
          c_ok = c_ok && core[b * bytes + i] == pb.codes[i];
          f_ok = f_ok && fast[b * bytes + i] == pb.codes[i];
        }
        float y[B];
        Quantizer::dequantize(pb, ts, y);
        const std::uint32_t h = hash_block(y, B);
        bc += !c_ok;
        bf += !f_ok;
        bd += hashes[2 * b] != h;
        bfd += hashes[2 * b + 1] != h;
        if (!c_ok || !f_ok || hashes[2 * b] != h || hashes[2 * b + 1] != h) {
          std::uint64_t cur = first_bad.load();
          while (b < cur && !first_bad.compare_exchange_weak(cur, b)) {
          }
        }
      }
      bad_core += bc;
      bad_fast += bf;
      bad_deq += bd;
      bad_fast_deq += bfd;
    });
  for (auto& th : pool)
    th.join();
  MESSAGE(label << ": " << nblocks * B << " values (" << nblocks << " blocks) checked on " << nt
                << " host threads");
  if (first_bad.load() != ~std::uint64_t{0}) {
    const std::uint64_t b = first_bad.load();
    float x[B];
    tensor_scale ts;
    gen_block<Quantizer>(s, b, x, ts);
    std::ostringstream o;
    o << "first bad block " << b << ": ts {" << ts.encode << ", " << ts.decode << "} x =";
    for (int i = 0; i < B; ++i)
      o << " " << std::hexfloat << x[i];
    o << std::defaultfloat << "; core bytes";
    for (int i = 0; i <= B / 2; ++i)
      o << " " << std::hex << int(core[b * bytes + i]);
    o << "; fast bytes";
    for (int i = 0; i <= B / 2; ++i)
      o << " " << std::hex << int(fast[b * bytes + i]);
    MESSAGE(o.str());
  }
  CHECK(bad_core.load() == 0);
  CHECK(bad_fast.load() == 0);
  CHECK(bad_deq.load() == 0);
  CHECK(bad_fast_deq.load() == 0);
}

std::uint64_t functor_values(std::uint64_t full) {
  if (const char* s = std::getenv("QUADS_GPU_FUNCTOR_VALUES")) return std::strtoull(s, nullptr, 0);
  return quick() ? 100000 : full;
}

// ---------------------------------------------------------------------------------------------
// Exhaustive: fast encoder / decoder vs the core codecs
// ---------------------------------------------------------------------------------------------

__global__ void encoder_sweep(std::uint64_t begin, std::uint64_t end, std::uint64_t step,
                              unsigned long long* bad, unsigned* first,
                              unsigned long long* checked) {
  // The core encoder compiled for the device against CUDA's own device conversion (software
  // emulation on sm_90, so an independent implementation), all bit patterns, NaN included; the
  // block-vector form used by the kernels on every non-NaN pattern.
  unsigned long long mine = 0;
  for (std::uint64_t u0 =
           begin + 8 * (blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x);
       u0 < end; u0 += 8 * step * static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    float s[8];
    for (int i = 0; i < 8; ++i)
      s[i] = __uint_as_float(static_cast<std::uint32_t>(u0 + i));
    const std::uint32_t fw = kd::encode_e2m1x8_not_nan(s);
    for (int i = 0; i < 8; ++i) {
      ++mine;
      const unsigned cuda = __nv_cvt_float_to_fp4(s[i], __NV_E2M1, cudaRoundNearest);
      const bool ok =
          encode_e2m1(s[i]) == cuda && (s[i] != s[i] || ((fw >> (4 * i)) & 15u) == cuda);
      if (!ok && atomicAdd(bad, 1ull) == 0ull) *first = static_cast<std::uint32_t>(u0 + i);
    }
  }
  atomicAdd(checked, mine);
}

__global__ void e4m3_sweep(unsigned long long* bad, unsigned* first) {
  // encode_e4m3 on the device (hardware cvt on sm_89+) against the software path, which the
  // host suite proves equal to CUDA's host conversion for all 2^32 inputs
  for (std::uint64_t u = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       u < (std::uint64_t{1} << 32); u += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const float x = __uint_as_float(static_cast<std::uint32_t>(u));
    if (encode_e4m3(x) != quads::detail::encode_e4m3_software(x) && atomicAdd(bad, 1ull) == 0ull)
      *first = static_cast<std::uint32_t>(u);
  }
}

__global__ void rcp_sweep(unsigned long long* bad, unsigned* first) {
  // the device reciprocal behind block_quantizer's multiplier against IEEE division, all inputs
  for (std::uint64_t u = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
       u < (std::uint64_t{1} << 32); u += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const float b = __uint_as_float(static_cast<std::uint32_t>(u));
    const float want = fminf(__fdiv_rn(1.0f, b), quads::detail::flt_max);
    if (__float_as_uint(quads::detail::rcp_rn_satfinite(b)) != __float_as_uint(want) &&
        atomicAdd(bad, 1ull) == 0ull)
      *first = static_cast<std::uint32_t>(u);
  }
}

__global__ void e4m3_decode_all(float* out) {
  out[threadIdx.x] = decode_e4m3(static_cast<std::uint8_t>(threadIdx.x)); // 256 codes
}

QUADS_DEVICE_API float cuda_e2m1(unsigned c) {
  return __half2float(
      __half(__nv_cvt_fp4_to_halfraw(static_cast<__nv_fp4_storage_t>(c), __NV_E2M1)));
}

//! `decode_e2m1` of each code, and `decode_e2m1_word` (the byte-permute decoder of 8 codes) of
//! words holding every code at every nibble position, against CUDA's conversion.
__global__ void decoder_sweep(unsigned* bad) {
  const unsigned c = threadIdx.x; // 16 codes
  if (__float_as_uint(decode_e2m1(static_cast<std::uint8_t>(c))) != __float_as_uint(cuda_e2m1(c)))
    atomicAdd(bad, 1u);
  for (unsigned j = 0; j < 16; ++j) { // nibble i holds (c + i j) mod 16
    std::uint32_t word = 0;
    for (unsigned i = 0; i < 8; ++i)
      word |= ((c + i * j) & 15u) << (4 * i);
    float v[8];
    kd::decode_e2m1_word(word, v);
    for (unsigned i = 0; i < 8; ++i)
      if (__float_as_uint(v[i]) != __float_as_uint(cuda_e2m1((word >> (4 * i)) & 15u)))
        atomicAdd(bad, 1u);
  }
}

} // namespace

TEST_SUITE("gpu.functors") {
  TEST_CASE(
      "sm90: the device E2M1 encoder and decoders equal CUDA's device conversions for all inputs") {
    device_buffer<unsigned long long> bad(1, 0);
    device_buffer<unsigned> first(1, 0);
    device_buffer<unsigned long long> checked(1, 0);
    const std::uint64_t step = quick() ? 4099 : 1; // quick: a strided subset
    encoder_sweep<<<132 * 16, 256>>>(0, std::uint64_t{1} << 32, step, bad.ptr, first.ptr,
                                     checked.ptr);
    QUADS_CUDA_CHECK(cudaGetLastError());
    sync_ok();
    const auto nb = bad.download(1)[0];
    INFO("first mismatch at bits 0x" << std::hex << first.download(1)[0]);
    CHECK(nb == 0);
    if (!quick()) // every bit pattern
      CHECK(checked.download(1)[0] == (1ull << 32));
    device_buffer<unsigned> dbad(1, 0);
    decoder_sweep<<<1, 16>>>(dbad.ptr);
    sync_ok();
    CHECK(dbad.download(1)[0] == 0u);
  }

  TEST_CASE("sm90: the device E4M3 encoder equals the software encoder for all 2^32 inputs") {
    device_buffer<unsigned long long> bad(1, 0);
    device_buffer<unsigned> first(1, 0);
    e4m3_sweep<<<132 * 16, 256>>>(bad.ptr, first.ptr);
    QUADS_CUDA_CHECK(cudaGetLastError());
    sync_ok();
    INFO("first mismatch at bits 0x" << std::hex << first.download(1)[0]);
    CHECK(bad.download(1)[0] == 0ull);
  }

  TEST_CASE("sm90: the device reciprocal equals IEEE 1/x for all 2^32 inputs") {
    device_buffer<unsigned long long> bad(1, 0);
    device_buffer<unsigned> first(1, 0);
    rcp_sweep<<<132 * 16, 256>>>(bad.ptr, first.ptr);
    QUADS_CUDA_CHECK(cudaGetLastError());
    sync_ok();
    INFO("first mismatch at bits 0x" << std::hex << first.download(1)[0]);
    CHECK(bad.download(1)[0] == 0ull);
  }

  TEST_CASE("sm90: the device E4M3 decoder equals the host decoder for all 256 codes") {
    device_buffer<float> out(256, 0.0f);
    e4m3_decode_all<<<1, 256>>>(out.ptr);
    QUADS_CUDA_CHECK(cudaGetLastError());
    sync_ok();
    const auto got = out.download(256);
    for (int c = 0; c < 256; ++c) {
      const float want = decode_e4m3(static_cast<std::uint8_t>(c));
      INFO("code 0x" << std::hex << c);
      if (std::isnan(want))
        CHECK(std::isnan(got[c]));
      else
        CHECK(std::bit_cast<std::uint32_t>(got[c]) == std::bit_cast<std::uint32_t>(want));
    }
  }

  TEST_CASE("sm90: nvfp4 block functors inside a kernel equal the host on 10^8 values") {
    check_functors<block_quantizer<nvfp4>>(functor_values(100'000'000), "nvfp4 default");
  }
  TEST_CASE("sm90: mxfp4 block functors inside a kernel equal the host on 10^8 values") {
    check_functors<block_quantizer<mxfp4>>(functor_values(100'000'000), "mxfp4 round-up");
  }
  TEST_CASE("sm90: every option's block functors inside a kernel equal the host") {
    const std::uint64_t n = functor_values(10'000'000);
    check_functors<
        block_quantizer<nvfp4, quant_options{.block_rule = block_scale_rule::four_over_six}>>(
        n, "nvfp4 four-over-six");
    check_functors<block_quantizer<nvfp4, quant_options{.round = rounding::stochastic}>>(
        n, "nvfp4 stochastic");
    check_functors<
        block_quantizer<nvfp4, quant_options{.round = rounding::stochastic,
                                             .block_rule = block_scale_rule::four_over_six}>>(
        n, "nvfp4 stochastic four-over-six");
    check_functors<block_quantizer<mxfp4, quant_options{.mx_rounding = ue8m0_rounding::floor}>>(
        n, "mxfp4 floor");
    check_functors<block_quantizer<mxfp4, quant_options{.round = rounding::stochastic}>>(
        n, "mxfp4 stochastic");
  }

  TEST_CASE("sm90: fast_divmod is exact") {
    std::mt19937_64 rng(seed());
    for (int t = 0; t < 200000; ++t) {
      const std::uint32_t d =
          static_cast<std::uint32_t>(rng() % (t % 2 ? 5000u : 0xffffffffu)) + 1u;
      const std::uint32_t n = static_cast<std::uint32_t>(rng());
      const kd::fast_divmod f(d);
      std::uint32_t q, r;
      f.divmod(n, q, r);
      if (q != n / d || r != n % d) {
        FAIL_CHECK("fast_divmod " << n << " / " << d << " gave " << q << " r " << r);
        break;
      }
    }
  }
}
