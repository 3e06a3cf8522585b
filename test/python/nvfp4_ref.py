# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
"""Independent NumPy + ml_dtypes reference for NVFP4 / MXFP4 block quantization.

Written from docs/formats.md (TransformerEngine's NVFP4 recipe, section 2.4; UE8M0 and MX rules,
sections 2.2 and 2.6; swizzled 128x4 layout, section 3.3), not from quads' C++, so that a
byte-exact match with `quads::reference` means two readings of the specification agree.

All arithmetic is np.float32 with one IEEE rounding per operation (NumPy never contracts a*b+c
into an FMA). Element conversions use ml_dtypes' RNE casts with two corrections:
- `float8_e4m3fn` is not saturating (above 464 it gives NaN), so the scale is clamped to 448
  before the cast, as TE's reference does;
- `float4_e2m1fn` maps NaN to 0x8 / 0x0, while CUDA's `__nv_cvt_float_to_fp4` (and quads) give
  +6 = 0x7: the CUDA rule is applied on top.
UE8M0 bytes are computed from exponents (`np.frexp` / the fp32 exponent field), never with
ml_dtypes' `float8_e8m0fnu` cast, which rounds to nearest in the linear domain.

Stochastic rounding follows quads' own definition (include/quads/quant/random_bits.hpp and
`encode_e2m1_stochastic`): Philox-4x32-10 keyed by the 64-bit seed; block b (global index
(expert * rows + row) * (cols / B) + kb) uses counters b * (B / 16) + i; element j of the block
takes byte j % 4 (bits 8 * (j % 4) .. +7) of word j / 4; t = |y| + (r / 256) * step(|y|) with
step 0.5 / 1 / 2 on [0, 2) / [2, 4) / [4, inf), then floor to the E2M1 grid, sign kept, NaN -> +6.
"""

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

F32 = np.float32
U32 = np.uint32
FLT_MAX = F32(np.finfo(np.float32).max)
RN_ONE_SIXTH = F32(1.0) / F32(6.0)  # 0x3E2AAAAB
RN_ONE_FOURTH = F32(1.0) / F32(4.0)
E4M3_MAX = F32(448.0)
E2M1_GRID_FLOOR = [F32(v) for v in (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)]

assert RN_ONE_SIXTH.view(U32) == 0x3E2AAAAB

SCHEMES = {"nvfp4": 16, "mxfp4": 32}


@dataclass(frozen=True)
class Options:
    scheme: str = "nvfp4"
    rounding: str = "nearest"          # nearest | stochastic
    block_rule: str = "amax6"          # amax6 | four_over_six (nvfp4 only)
    global_scale: str = "per_tensor"   # per_tensor | per_row | given (nvfp4 only)
    mx_rounding: str = "round_up"      # round_up | floor (mxfp4 only)
    seed: int = 0
    given: tuple = ()                  # decode-direction fp32 scales: 1 or `experts` of them

    @property
    def block(self):
        return SCHEMES[self.scheme]


@dataclass
class Quantized:
    data: np.ndarray          # uint8 [experts * rows * cols / 2]
    scales_grid: np.ndarray   # uint8 [experts, rows, cols / B] (before layout)
    tscale: np.ndarray        # float32 [n, 2] (encode, decode)
    deq: np.ndarray           # float32 [experts, rows, cols]
    extra: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Element codecs


def e2m1_encode_rne(y):
    """float32 -> E2M1 code (uint8), RNE, saturating to +-6, sign kept, NaN -> 0x7 (CUDA)."""
    codes = y.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & np.uint8(0xF)
    codes[np.isnan(y)] = 0x7
    return codes


def e2m1_encode_stochastic(y, r8):
    """float32 -> E2M1 code with 8 random bits per element (quads' rule, see module doc)."""
    a = np.abs(y)
    step = np.where(a < F32(2), F32(0.5), np.where(a < F32(4), F32(1), F32(2))).astype(F32)
    t = a + (r8.astype(F32) * F32(1.0 / 256.0)) * step
    mag = np.zeros(y.shape, np.uint8)
    for g in E2M1_GRID_FLOOR:
        mag += (t >= g).astype(np.uint8)
    codes = mag | (np.signbit(y).astype(np.uint8) << 3)
    codes[np.isnan(y)] = 0x7
    return codes


def e2m1_decode(codes):
    return codes.view(ml_dtypes.float4_e2m1fn).astype(F32)


def e4m3_satfinite(s):
    """Non-negative float32 -> E4M3 byte, RNE, saturating at 448 (clamp first: see module doc)."""
    return np.minimum(s, E4M3_MAX).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)


def e4m3_decode(b):
    return b.view(ml_dtypes.float8_e4m3fn).astype(F32)


def ue8m0_round_up(v):
    """Smallest power of two >= v (v >= 0) as a UE8M0 byte: 2^(byte - 127), byte in 0..254.
    0 and everything <= 2^-127 give 0x00; above 2^127 and Inf saturate to 0xFE."""
    v = np.asarray(v, F32)
    frac, exp = np.frexp(v)  # v = frac * 2^exp, frac in [0.5, 1); exact also for subnormals
    ceil_log2 = np.where(frac == F32(0.5), exp - 1, exp).astype(np.int64)
    byte = np.clip(ceil_log2 + 127, 0, 254)
    byte = np.where(v == 0, 0, byte)
    byte = np.where(np.isinf(v), 254, byte)
    return byte.astype(np.uint8)


def exponent_field(v):
    return ((np.asarray(v, F32).view(U32) >> U32(23)) & U32(0xFF)).astype(np.int64)


def ue8m0_floor_rule(amax_b):
    """OCP MX: shared exponent floor(log2 amax_b) - 2 (emax of E2M1), clamped at byte 0.
    floor(log2 amax_b) is the round-toward-zero UE8M0 conversion of amax_b, i.e. its fp32
    exponent field, saturated like CUDA's `cvt.rz.satfinite.ue8m0` (formats.md section 2.2:
    Inf -> 0xFE), so an Inf amax gives 0xFE - 2 = 0xFC, the same byte as FLT_MAX."""
    return np.maximum(np.minimum(exponent_field(amax_b), 254) - 2, 0).astype(np.uint8)


def pow2(e):
    return np.ldexp(F32(1.0), np.asarray(e, np.int32)).astype(F32)


# ---------------------------------------------------------------------------------------------
# Philox-4x32-10 and the per-block random bits

PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(ctr, key):
    """Vectorised Philox-4x32-10. ctr: 4 uint64 arrays (32-bit values), key: 2 Python ints."""
    c0, c1, c2, c3 = (np.asarray(c, np.uint64) & MASK32 for c in ctr)
    k0, k1 = key[0] & 0xFFFFFFFF, key[1] & 0xFFFFFFFF
    for _ in range(10):
        p0 = np.uint64(PHILOX_M0) * c0
        p1 = np.uint64(PHILOX_M1) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & MASK32,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & MASK32)
        k0 = (k0 + PHILOX_W0) & 0xFFFFFFFF
        k1 = (k1 + PHILOX_W1) & 0xFFFFFFFF
    return [c.astype(U32) for c in (c0, c1, c2, c3)]


# Random123 tests/kat_vectors, "philox4x32 10" lines: counter[4], key[2] -> output[4].
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def block_random_bytes(seed, n_blocks, block):
    """uint8 [n_blocks, block]: the 8 random bits of every element of blocks 0 .. n_blocks-1."""
    draws = block // 16
    b = np.arange(n_blocks, dtype=np.uint64)
    words = []
    for d in range(draws):
        ctr = b * np.uint64(draws) + np.uint64(d)
        zero = np.zeros_like(ctr)
        words += philox4x32_10((ctr & MASK32, ctr >> np.uint64(32), zero, zero),
                               (seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF))
    w = np.stack(words, axis=1)  # [n_blocks, block / 4]
    j = np.arange(block)
    return ((w[:, j // 4] >> (U32(8) * (j % 4).astype(U32))) & U32(0xFF)).astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# Tensor scales


def amax_ignore_nan(x, axis):
    return np.fmax.reduce(np.abs(x), axis=axis, initial=F32(0.0)).astype(F32)


def tensor_scale_from_amax(amax, bound):
    """TE: S_enc = min(6 * bound / amax, FLT_MAX) (IEEE fp32 division), 1 if amax == 0 or
    S_enc == 0; S_dec = 1 / S_enc."""
    amax = np.asarray(amax, F32)
    with np.errstate(divide="ignore", over="ignore"):
        enc = np.fmin(F32(6.0 * bound) / amax, FLT_MAX)
    enc = np.where((amax == 0) | (enc == 0), F32(1.0), enc).astype(F32)
    return enc, (F32(1.0) / enc).astype(F32)


def tensor_scale_from_decode(dec):
    """A stored decode-direction scale: S_dec kept, S_enc = min(1 / S_dec, FLT_MAX) (TE's clamp).
    S_dec = 0 is what amax_t = 0 gives in the decode direction (amax_t / 2688), so it gets TE's
    amax_t = 0 rule: S_enc = S_dec = 1. Non-finite or negative S_dec is rejected by quads."""
    dec = np.asarray(dec, F32)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        enc = np.fmin(F32(1.0) / dec, FLT_MAX)
    zero = dec == 0
    return (np.where(zero, F32(1.0), enc).astype(F32),
            np.where(zero, F32(1.0), dec).astype(F32))


# ---------------------------------------------------------------------------------------------
# Block quantization


def _nvfp4_candidate(xb, amax_b, enc, dec, inv_target, r8):
    """One NVFP4 scale candidate for blocks xb [..., 16]: (byte, codes, dequantized)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        byte = e4m3_satfinite(amax_b * (enc * inv_target))
        s = e4m3_decode(byte)
        mult = np.fmin(F32(1.0) / (s * dec), FLT_MAX).astype(F32)
        y = xb * mult[..., None]
        codes = e2m1_encode_rne(y) if r8 is None else e2m1_encode_stochastic(y, r8)
        dq = (e2m1_decode(codes) * s[..., None]) * dec[..., None]
    return byte, codes, dq


def _sse_in_order(xb, dq):
    """fp32 sum over the block of (x - dq)^2, element order, one rounding per mul and add."""
    acc = np.zeros(xb.shape[:-1], F32)
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(xb.shape[-1]):
            d = xb[..., j] - dq[..., j]
            acc = acc + d * d
    return acc


def quantize(x, opts):
    """x: float32 [experts, rows, cols]. Returns a `Quantized` (scales not yet laid out)."""
    x = np.ascontiguousarray(x, F32)
    E, R, C = x.shape
    B = opts.block
    if C % B:
        raise ValueError(f"cols {C} not a multiple of the block size {B}")
    nkb = C // B
    xb = x.reshape(E, R, nkb, B)
    amax_b = amax_ignore_nan(xb, axis=-1)
    r8 = None
    if opts.rounding == "stochastic":
        r8 = block_random_bytes(opts.seed, E * R * nkb, B).reshape(E, R, nkb, B)
    extra = {}

    if opts.scheme == "mxfp4":
        if opts.mx_rounding == "round_up":
            byte = ue8m0_round_up(amax_b * RN_ONE_SIXTH)
        else:
            byte = ue8m0_floor_rule(amax_b)
        mult = pow2(127 - byte.astype(np.int32))
        with np.errstate(over="ignore", invalid="ignore"):
            y = xb * mult[..., None]
        codes = e2m1_encode_rne(y) if r8 is None else e2m1_encode_stochastic(y, r8)
        with np.errstate(over="ignore"):  # 4 * 2^126 and up overflow to Inf, as in fp32 on a GPU
            deq = e2m1_decode(codes) * pow2(byte.astype(np.int32) - 127)[..., None]
        tscale = np.ones((E, 2), F32)
    else:
        bound = 256.0 if opts.block_rule == "four_over_six" else 448.0
        if opts.global_scale == "per_tensor":
            enc, dec = tensor_scale_from_amax(amax_ignore_nan(x.reshape(E, -1), axis=1), bound)
            tscale = np.stack([enc, dec], axis=1)
            enc_r = np.repeat(enc[:, None], R, axis=1)
            dec_r = np.repeat(dec[:, None], R, axis=1)
        elif opts.global_scale == "per_row":
            enc_r, dec_r = tensor_scale_from_amax(amax_ignore_nan(x, axis=2), bound)
            tscale = np.stack([enc_r.reshape(-1), dec_r.reshape(-1)], axis=1)
        elif opts.global_scale == "given":
            g = np.asarray(opts.given, F32)
            if g.size == 1:
                g = np.repeat(g, E)
            enc, dec = tensor_scale_from_decode(g)
            tscale = np.stack([enc, dec], axis=1)
            enc_r = np.repeat(enc[:, None], R, axis=1)
            dec_r = np.repeat(dec[:, None], R, axis=1)
        else:
            raise ValueError(opts.global_scale)
        enc_b = np.repeat(enc_r[..., None], nkb, axis=2).astype(F32)
        dec_b = np.repeat(dec_r[..., None], nkb, axis=2).astype(F32)
        byte, codes, deq = _nvfp4_candidate(xb, amax_b, enc_b, dec_b, RN_ONE_SIXTH, r8)
        if opts.block_rule == "four_over_six":
            byte4, codes4, deq4 = _nvfp4_candidate(xb, amax_b, enc_b, dec_b, RN_ONE_FOURTH, r8)
            pick4 = _sse_in_order(xb, deq4) < _sse_in_order(xb, deq)
            byte = np.where(pick4, byte4, byte)
            codes = np.where(pick4[..., None], codes4, codes)
            deq = np.where(pick4[..., None], deq4, deq)
            extra["picked_four"] = int(pick4.sum())
    codes = codes.reshape(-1)
    data = (codes[0::2] & 0xF) | ((codes[1::2] & 0xF) << 4)
    return Quantized(data=data.astype(np.uint8), scales_grid=byte.astype(np.uint8),
                     tscale=tscale.astype(F32), deq=deq.reshape(E, R, C).astype(F32),
                     extra=extra)


# ---------------------------------------------------------------------------------------------
# Scale layouts


def layout_linear(grid):
    return np.ascontiguousarray(grid).reshape(-1)


def layout_swizzled_128x4(grid):
    """[experts, rows, nkb] -> bytes in the 128x4 layout of formats.md section 3.3: per expert,
    rows padded to 128 and nkb to 4 with zeros, tiles (128 rows x 4 scales, 512 B) K-tile fastest,
    inside a tile row = 32 * i + j stored as [j][i][k]."""
    E, R, K = grid.shape
    mt, kt = -(-R // 128), -(-K // 4)
    padded = np.zeros((E, mt * 128, kt * 4), np.uint8)
    padded[:, :R, :K] = grid
    # axes: e, mtile, i, j, ktile, k  ->  e, mtile, ktile, j, i, k
    t = padded.reshape(E, mt, 4, 32, kt, 4).transpose(0, 1, 4, 3, 2, 5)
    return np.ascontiguousarray(t).reshape(-1)


def swizzled_offset(row, kb, rows, nkb):
    """Offset of (row, kb) in one expert's swizzled layout, via the layout function itself."""
    grid = np.zeros((1, rows, nkb), np.int64)
    grid[0, row, kb] = 1
    marker = layout_swizzled_128x4(grid.astype(np.uint8))
    return int(np.flatnonzero(marker)[0])


def self_check():
    """Checks of the reference's own building blocks against published values."""
    # nvmath get_block_scale_offset examples (formats.md section 3.3): NVFP4 A, M = K = 128.
    assert swizzled_offset(5, 2, 128, 128 // 16) == 82, "swizzle (5, 2) != 82"
    assert swizzled_offset(5, 5, 128, 128 // 16) == 593, "swizzle (5, 5) != 593"
    for ctr, key, want in PHILOX_KAT:
        got = philox4x32_10([np.array([c], np.uint64) for c in ctr], key)
        assert tuple(int(w[0]) for w in got) == want, f"Philox KAT failed for {ctr}, {key}"
    # E2M1 RNE decision points (formats.md section 1.2): ties to the even code.
    pts = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 1e30, -0.0, np.nan], F32)
    assert list(e2m1_encode_rne(pts)) == [0, 2, 2, 4, 4, 6, 6, 7, 7, 8, 7]
    # UE8M0 round-up (formats.md section 2.2).
    v = np.array([0, 1, 1.5, 3, 2.0**-127, 2.0**-126, np.inf, 2.0**127 * 1.5, 1e-45], F32)
    assert list(ue8m0_round_up(v)) == [0, 127, 128, 129, 0, 1, 254, 254, 0]
    assert list(ue8m0_floor_rule(np.array([6, 8, 0, 1e-40, 1, np.inf], F32))) == \
        [127, 128, 0, 0, 125, 252]
