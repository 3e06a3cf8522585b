// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Exhaustive over codes: every E2M1, E4M3/UE4M3 and UE8M0 code decodes as CUDA's host
//! conversions say, encode(decode(c)) == c, the UE8M0 reciprocal is exact, E2M1 nibble packing
//! matches `__nv_cvt_float2_to_fp4x2`, and the interop bit conversions round-trip.
//!
//! Values are compared as fp32 bit patterns, so -0.0 vs +0.0 counts as a mismatch. NaN codes
//! (E4M3 0x7F/0xFF, UE8M0 0xFF) only have to decode to some NaN on both sides: the NaN payload
//! and sign are not part of either contract.

#include "sweep.hpp"

#include <quads/format/e2m1.hpp>
#include <quads/format/e4m3.hpp>
#include <quads/format/ue8m0.hpp>
#include <quads/interop/cuda_fp.hpp>

#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstdio>

#if !QUADS_HAS_CUDA_FP()
#  error "quads/interop/cuda_fp.hpp is disabled although cuda_fp4.h/cuda_fp8.h are reachable"
#endif

namespace {

namespace qx = quads::exhaustive;
using quads::detail::from_bits;
using quads::detail::is_nan;
using quads::detail::to_bits;

//! Compares two decoded values bit for bit, except that any NaN matches any NaN.
void check_value(qx::tally& t, unsigned code, float got, float want) {
  if (is_nan(got) && is_nan(want)) {
    t.check(code, 0, 0);
  } else {
    t.check(code, to_bits(got), to_bits(want));
  }
}

//! bf16 bits -> fp32 by widening; exact for every bf16 value including the subnormal 2^-127.
float widen_bf16(unsigned short b) { return from_bits(static_cast<std::uint32_t>(b) << 16); }

bool check_e2m1() {
  qx::tally dec, dec_half, round_trip;
  for (unsigned c = 0; c < 16; ++c) {
    __nv_fp4_e2m1 v;
    v.__x = static_cast<__nv_fp4_storage_t>(c);
    const float q = quads::decode_e2m1(static_cast<std::uint8_t>(c));
    check_value(dec, c, q, static_cast<float>(v));
    // the raw half bits from the lowest-level CUDA decoder, widened by CUDA's own helper
    check_value(dec_half, c, q,
                __internal_halfraw_to_float(__nv_cvt_fp4_to_halfraw(v.__x, __NV_E2M1)));
    round_trip.check(c, quads::encode_e2m1(q), c);
  }
  bool ok = qx::report("decode_e2m1(c) == float(__nv_fp4_e2m1{c}), all 16 codes", dec, 2, 8);
  ok &= qx::report("decode_e2m1(c) == __nv_cvt_fp4_to_halfraw(c) widened, all 16 codes",
                   dec_half, 2, 8);
  ok &= qx::report("encode_e2m1(decode_e2m1(c)) == c, all 16 codes", round_trip, 2, 2);

  // Packing: element 0 in the low nibble on both sides, in both directions.
  qx::tally pack, unpack;
  for (unsigned p = 0; p < 256; ++p) {
    const auto lo = static_cast<std::uint8_t>(p & 0xfu), hi = static_cast<std::uint8_t>(p >> 4);
    const float2 f{quads::decode_e2m1(lo), quads::decode_e2m1(hi)};
    const quads::e2m1x2_t packed = quads::pack_e2m1x2(quads::encode_e2m1(f.x),
                                                      quads::encode_e2m1(f.y));
    pack.check(p, packed.bits, __nv_cvt_float2_to_fp4x2(f, __NV_E2M1, cudaRoundNearest));
    const float2 back = static_cast<float2>(quads::interop::to_cuda(packed));
    const std::uint64_t got = (std::uint64_t{to_bits(f.y)} << 32) | to_bits(f.x);
    const std::uint64_t want = (std::uint64_t{to_bits(back.y)} << 32) | to_bits(back.x);
    unpack.check(p, got, want);
  }
  ok &= qx::report("pack_e2m1x2(encode(a), encode(b)) == __nv_cvt_float2_to_fp4x2({a, b}), 256",
                   pack, 2, 2);
  ok &= qx::report("float2(__nv_fp4x2_e2m1 from pack_e2m1x2) == {decode(lo), decode(hi)}, 256",
                   unpack, 2, 16);
  return ok;
}

bool check_e4m3() {
  qx::tally dec, dec_u, round_trip;
  for (unsigned b = 0; b < 256; ++b) {
    const auto byte = static_cast<std::uint8_t>(b);
    const float q = quads::decode_e4m3(byte);
    check_value(dec, b, q, static_cast<float>(quads::interop::to_cuda(quads::e4m3_t{byte})));
    // UE4M3 ignores the sign bit: same value as the E4M3 code with the sign cleared.
    __nv_fp8_e4m3 cleared;
    cleared.__x = static_cast<__nv_fp8_storage_t>(b & 0x7fu);
    check_value(dec_u, b, quads::decode_ue4m3(byte), static_cast<float>(cleared));
    // NaN codes re-encode to the canonical 0x7F
    const unsigned want = (b & 0x7fu) == 0x7fu ? 0x7fu : b;
    round_trip.check(b, quads::encode_e4m3(q), want);
  }
  bool ok = qx::report("decode_e4m3(b) == float(__nv_fp8_e4m3{b}), all 256 codes", dec, 2, 8);
  ok &= qx::report("decode_ue4m3(b) == float(__nv_fp8_e4m3{b & 0x7f}), all 256 codes", dec_u, 2,
                   8);
  ok &= qx::report("encode_e4m3(decode_e4m3(b)) == b (NaN codes -> 0x7f), all 256 codes",
                   round_trip, 2, 2);
  return ok;
}

bool check_ue8m0() {
  qx::tally dec, dec_op, up, floor, rcp, rcp_mirror;
  for (unsigned b = 0; b < 256; ++b) {
    const auto byte = static_cast<std::uint8_t>(b);
    const float q = quads::decode_ue8m0(byte);
    check_value(dec, b, q, widen_bf16(__nv_cvt_e8m0_to_bf16raw(byte).x));
    check_value(dec_op, b, q, static_cast<float>(quads::interop::to_cuda(quads::ue8m0_t{byte})));
    up.check(b, quads::encode_ue8m0_round_up(q), b);
    floor.check(b, quads::encode_ue8m0_floor(q), b);
    if (b == 0xffu) continue;
    // 2^(127-b) * 2^(b-127) is exactly 1 (both factors and the product are fp32 values)
    const float r = quads::ue8m0_reciprocal(byte);
    rcp.check(b, to_bits(r * q), to_bits(1.0f));
    const auto mirror = static_cast<std::uint8_t>(254 - b);
    rcp_mirror.check(b, to_bits(r), to_bits(quads::decode_ue8m0(mirror)));
  }
  bool ok = qx::report("decode_ue8m0(b) == __nv_cvt_e8m0_to_bf16raw(b) widened, all 256 codes",
                       dec, 2, 8);
  ok &= qx::report("decode_ue8m0(b) == float(__nv_fp8_e8m0{b}), all 256 codes", dec_op, 2, 8);
  ok &= qx::report("encode_ue8m0_round_up(decode_ue8m0(b)) == b, all 256 codes", up, 2, 2);
  ok &= qx::report("encode_ue8m0_floor(decode_ue8m0(b)) == b, all 256 codes", floor, 2, 2);
  ok &= qx::report("ue8m0_reciprocal(b) * decode_ue8m0(b) == 1.0f exactly, b in 0..254", rcp, 2,
                   8);
  ok &= qx::report("ue8m0_reciprocal(b) == decode_ue8m0(254 - b), b in 0..254", rcp_mirror, 2, 8);
  return ok;
}

bool check_interop() {
  using namespace quads::interop;
  qx::tally to, back;
  for (unsigned b = 0; b < 256; ++b) {
    const auto byte = static_cast<std::uint8_t>(b);
    const quads::e2m1x2_t p{byte};
    const quads::e4m3_t e{byte};
    const quads::ue4m3_t s{byte};
    const quads::ue8m0_t m{byte};
    // the CUDA object holds the same byte ...
    to.check(4 * b + 0, to_cuda(p).__x, b);
    to.check(4 * b + 1, to_cuda(e).__x, b);
    to.check(4 * b + 2, to_cuda(s).__x, b);
    to.check(4 * b + 3, to_cuda(m).__x, b);
    // ... and comes back unchanged
    back.check(4 * b + 0, from_cuda(to_cuda(p)).bits, b);
    back.check(4 * b + 1, from_cuda(to_cuda(e)).bits, b);
    back.check(4 * b + 2, from_cuda(to_cuda(s)).bits, b);
    back.check(4 * b + 3, from_cuda(to_cuda(m)).bits, b);
  }
  std::printf("(interop inputs are 4*byte + type, type 0 e2m1x2, 1 e4m3, 2 ue4m3, 3 ue8m0)\n");
  bool ok = qx::report("to_cuda(t{b}).__x == b for e2m1x2/e4m3/ue4m3/ue8m0, all 256 bytes", to,
                       3, 2);
  ok &= qx::report("from_cuda(to_cuda(t{b})).bits == b for the same four types", back, 3, 2);
  return ok;
}

} // namespace

int main() {
  std::printf("exhaustive-decode: every code of every format\n");
  bool ok = check_e2m1();
  ok &= check_e4m3();
  ok &= check_ue8m0();
  ok &= check_interop();
  return ok ? 0 : 1;
}
