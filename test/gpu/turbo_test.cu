// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The turbo NVFP4 block path's pieces (kernels/common.cuh) against the core codecs:
//! the E2M1 magnitude / dequantized magnitude for all 2^32 inputs, the sign-nibble permute and
//! the NaN-propagating packed block amax on random and special 16-bit words.
#include "gpu_test.cuh"

#include <random>

namespace {
using namespace quads;
using namespace quads::gpu_test;
namespace kd = quads::kernels::detail;

__global__ void turbo_codec_sweep(unsigned long long* bad, unsigned* first) {
  const std::uint64_t n = std::uint64_t{1} << 32;
  for (std::uint64_t u = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; u < n;
       u += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const float s = __uint_as_float(static_cast<std::uint32_t>(u));
    if (s != s) continue; // the turbo path never sees NaN (such blocks take the generic path)
    const std::uint32_t want = encode_e2m1_not_nan(s);
    const std::uint32_t got =
        (kd::e2m1_turbo_t(s) - 298u) | ((static_cast<std::uint32_t>(u) >> 28) & 8u);
    const float q = kd::e2m1_turbo_q(s);
    const bool ok =
        got == want &&
        __float_as_uint(q) ==
            (__float_as_uint(decode_e2m1(static_cast<std::uint8_t>(want))) & 0x7fffffffu);
    if (!ok && atomicAdd(bad, 1ull) == 0ull) *first = static_cast<std::uint32_t>(u);
  }
}

//! The saturating encoder (kernels/common.cuh) on every non-NaN s with |s| < 7, at multiplier
//! m = 1 (m / 8 = 0.125): value i of a word in nibble i = bits % 8, the other nibbles from the
//! neighbouring inputs; the code word, its sign nibbles and the dequantized magnitude / 8
//! against the core codec.
__global__ void sat_codec_sweep(unsigned long long* bad, unsigned* first) {
  const std::uint64_t n = std::uint64_t{1} << 32;
  for (std::uint64_t u = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; u < n;
       u += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t b = static_cast<std::uint32_t>(u);
    const float s = __uint_as_float(b);
    if (!(fabsf(s) < 7.0f)) continue; // NaN, Inf and |s| >= 7 blocks take the other encoder
    const int pos = static_cast<int>(b & 7u);
    float v[8];
    std::uint32_t want = 0;
    for (int i = 0; i < 8; ++i) {
      // neighbours: inputs a few ulps away, with their own signs
      const std::uint32_t nb = (b + static_cast<std::uint32_t>(i - pos) * 0x9e3779u) ^
                               (static_cast<std::uint32_t>(i & 1) << 31);
      float x = i == pos ? s : __uint_as_float(nb);
      if (!(fabsf(x) < 7.0f)) x = 0.5f * static_cast<float>(i) - 2.0f;
      v[i] = x;
      want |= encode_e2m1_not_nan(x) << (4 * i);
    }
    std::uint32_t bf[8];
    float sum[8];
    for (int i = 0; i < 8; ++i) {
      const float a8 = kd::fmul_sat(fabsf(v[i]), 0.125f);
      bf[i] = kd::sat_binade(a8);
      sum[i] = kd::sat_sum(bf[i], a8);
    }
    const std::uint32_t got = kd::sat_pack(bf, sum) | kd::sign_nibbles32(v);
    const float q = kd::sat_value(bf[pos], sum[pos]) * 8.0f;
    const std::uint8_t code = static_cast<std::uint8_t>((want >> (4 * pos)) & 15u);
    const bool ok = got == want && __float_as_uint(q) == (__float_as_uint(decode_e2m1(code)) &
                                                          0x7fffffffu);
    if (!ok && atomicAdd(bad, 1ull) == 0ull) *first = b;
  }
}

template <class T>
__global__ void turbo_words_check(const std::uint32_t* w, int blocks, unsigned* bad) {
  const int b = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (b >= blocks) return;
  kd::raw_block<T, 16> r;
  const std::uint32_t* p = w + 8 * b;
  r.w[0] = make_uint4(p[0], p[1], p[2], p[3]);
  r.w[1] = make_uint4(p[4], p[5], p[6], p[7]);
  float v[16];
  kd::widen(r, v);
  // amax: NaN iff some element is NaN, else the core amax
  bool any_nan = false;
  for (int i = 0; i < 16; ++i)
    any_nan = any_nan || v[i] != v[i];
  const float a = kd::block_amax_nan16<T, 16>(r);
  const float want = block_quantizer<nvfp4>::amax(v);
  if (any_nan ? a == a : __float_as_uint(a) != __float_as_uint(want)) atomicAdd(bad, 1u);
  // sign nibbles
  for (int h = 0; h < 2; ++h) {
    // from the raw sign bits: widening fp16 NaN does not keep the sign
    std::uint32_t s = 0;
    for (int i = 0; i < 8; ++i)
      s |= ((p[4 * h + i / 2] >> (16 * (i % 2) + 15)) & 1u) << (4 * i + 3);
    const uint4 q = r.w[h];
    if (kd::sign_nibbles16(q.x, q.y, q.z, q.w) != s) atomicAdd(bad, 1u);
  }
}

//! Runs a sweep kernel over all 2^32 bit patterns (grid-stride) and checks it found no mismatch.
void run_sweep(void (*sweep)(unsigned long long*, unsigned*)) {
  device_buffer<unsigned long long> bad(1, 0);
  device_buffer<unsigned> first(1, 0);
  sweep<<<132 * 16, 256>>>(bad.ptr, first.ptr);
  QUADS_CUDA_CHECK(cudaGetLastError());
  sync_ok();
  INFO("first mismatch at bits 0x" << std::hex << first.download(1)[0]);
  CHECK(bad.download(1)[0] == 0ull);
}

template <class T>
void check_words() {
  const int blocks = quick() ? 1 << 14 : 1 << 20;
  std::mt19937_64 rng(seed() ^ 0x7b7b);
  std::vector<std::uint32_t> w(static_cast<std::size_t>(blocks) * 8);
  const std::uint16_t specials[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x0001,
                                    0x8001, 0x7c00, 0xfc00, 0x7e00, 0x7f7f, 0x3f80, 0x7bff};
  for (std::size_t i = 0; i < w.size(); ++i) {
    std::uint32_t u = static_cast<std::uint32_t>(rng());
    if ((rng() & 7) == 0) u = (u & 0xffff0000u) | specials[rng() % 14];
    if ((rng() & 7) == 0) u = (u & 0xffffu) | (std::uint32_t{specials[rng() % 14]} << 16);
    if ((rng() & 3) == 0) u &= 0xbfffbfffu; // fewer NaN / Inf exponents
    w[i] = u;
  }
  device_buffer<std::uint32_t> dw(w.size());
  dw.upload(w);
  device_buffer<unsigned> bad(1, 0);
  turbo_words_check<T><<<(blocks + 255) / 256, 256>>>(dw.ptr, blocks, bad.ptr);
  QUADS_CUDA_CHECK(cudaGetLastError());
  sync_ok();
  CHECK(bad.download(1)[0] == 0u);
}

} // namespace

TEST_SUITE("gpu.turbo") {
  TEST_CASE("sm90: the turbo E2M1 magnitude and dequantized magnitude equal the core codec for all "
            "non-NaN inputs") {
    run_sweep(turbo_codec_sweep);
  }
  TEST_CASE("sm90: the saturating E2M1 encoder (codes, signs, dequantized magnitude) equals the "
            "core codec for all inputs below 7 in magnitude") {
    run_sweep(sat_codec_sweep);
  }
  TEST_CASE("sm90: the packed block amax and sign nibbles equal the core on bf16 and fp16 words") {
    check_words<__nv_bfloat16>();
    check_words<__half>();
  }
}
