// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Prefill GEMM (nvcc, sm_90a): warp-specialized `wgmma` + TMA mainloop for large M,
//!        NVFP4 weights dequantized in registers (wgmma RS form), fused epilogue chain.
//!
//! `y = Epi(A W^T)`, `W` `[N, K]` NVFP4 (packed E2M1 + linear UE4M3 scales, the layout of
//! `quads::reference::quantized_tensor`), `A` `[M, K]` one of
//! - `fp4_activations<nvfp4>` / `<mxfp4>` (emulated W4A4): dequantized exactly to bf16 without
//!   the tensor scale by a pre-pass (M x K bf16 into the workspace, ~2-5 % of the GEMM's time at
//!   M = 4096);
//! - `dense_activations<bf16_lane>` (W4A16): the pre-pass only permutes.
//! The pre-pass writes each 64-group of k in the order of `prefill_position`
//! (quads/gemm/prefill_layout.hpp), the order in which the weight registers pair their codes.
//!
//! Mainloop (one CTA = 128 weight rows x 256 tokens, 3 warpgroups):
//! - producer warp (warpgroup 0, `setmaxnreg` 40): per k-tile of 64, TMA of the bf16 token tile
//!   (256 x 64, 128-byte swizzle) and of the packed weight tile (128 rows x 32 bytes), and
//!   `cp.async` of the 128 x 4 scale bytes (4-byte rows are below TMA's 16-byte box minimum),
//!   all completing on the stage's `full` mbarrier; 6 stages;
//! - consumer warpgroups 1, 2 (`setmaxnreg` 232), 64 weight rows each: thread (g, t) reads 8
//!   bytes of rows g and g + 8 (one NVFP4 block each) and 2 scale bytes from shared memory,
//!   dequantizes them with `fp4_loader` (exact, 4 x `mul.bf16x2` per 8 codes) into the four A
//!   fragments of the tile's four k-steps, then issues 4 `wgmma.m64n256k16` (A in registers, B by
//!   descriptor). It dequantizes the next tile while these run, then waits and frees the stage.
//! - epilogue: accumulators x 2^(c_w + c_a) (exact) staged through shared memory (transposed to
//!   token-major), then the chain `Epi` per element (element-wise chains) or on fragments of
//!   `lcm(input width, 16)` columns of a row, without an fp32 round trip through memory.
//!
//! Why RS (weights in registers) and not dequantizing into shared memory for the SS form: the
//! dequantized weight never touches shared memory (no extra stores, fence or barrier per tile),
//! and the packed tile read per thread is one 8-byte load per row. The cost is the M side = 64
//! weight rows per warpgroup, so the output comes out transposed (handled by the staging).
//!
//! Supported: weights NVFP4, bf16 lanes; any M >= 1 and N >= 1 (tails masked); K a multiple of 64
//! (refused otherwise). No RAC residual epilogues (use decode_gemm). Launcher errors follow
//! quads/kernels/common.cuh (cudaErrorInvalidValue + `last_error_message()`).
//! @code
//!   auto plan = quads::gemm::plan_prefill(M, N, K);   // workspace: plan.workspace_bytes
//!   quads::gemm::prefill_gemm<epi>(plan, quads::gemm::fp4_weights<quads::nvfp4>{w, w_scales},
//!       quads::gemm::fp4_activations<quads::nvfp4>{x, x_scales}, epi_args, workspace, stream);
//! @endcode
#pragma once

#if !defined(__CUDACC__)
#  error "quads/gemm/prefill.cuh needs nvcc (CUDA C++)"
#endif

#include <quads/gemm/decode.cuh>
#include <quads/gemm/prefill_layout.hpp>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace quads::gemm {
namespace detail {

// ---------------------------------------------------------------------------------------------
// PTX wrappers (sm_90a)
// ---------------------------------------------------------------------------------------------
//! The PTX wrappers of the prefill kernel (own namespace: decode.cuh has helpers of the same
//! names).
namespace sm90 {

QUADS_DEVICE_API std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
QUADS_DEVICE_API void mbar_init(std::uint32_t bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
QUADS_DEVICE_API void mbar_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
QUADS_DEVICE_API void mbar_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
QUADS_DEVICE_API void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n"
                 "}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (done == 0);
}
QUADS_DEVICE_API void tma_load_2d(std::uint32_t dst, const void* map, std::uint32_t bar, int c0,
                                  int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
               "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
               : "memory");
}
QUADS_DEVICE_API void tma_prefetch_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}
//! 4-byte `cp.async` (zero-filled when `src_bytes` is 0).
QUADS_DEVICE_API void cp_async_4(std::uint32_t dst, const void* src, std::uint32_t src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
//! The mbarrier receives one arrival when this thread's prior `cp.async`s have completed.
QUADS_DEVICE_API void cp_async_arrive_noinc(std::uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
QUADS_DEVICE_API void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }
QUADS_DEVICE_API void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
QUADS_DEVICE_API void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
QUADS_DEVICE_API void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
//! Keeps the compiler from moving accesses of `x` across the asynchronous wgmma boundary.
QUADS_DEVICE_API void fence_operand(float& x) { asm volatile("" : "+f"(x)::"memory"); }
template <int N>
QUADS_DEVICE_API void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N>
QUADS_DEVICE_API void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
QUADS_DEVICE_API void named_barrier(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

//! wgmma shared-memory descriptor of a K-major tile with the 128-byte swizzle: rows of 128
//! bytes, 8-row groups 1024 bytes apart (stride byte offset), leading byte offset unused (1).
//! The tile base must be 1024-byte aligned; a k-step of 16 bf16 adds 32 bytes (2 in the field).
QUADS_DEVICE_API std::uint64_t sw128_desc(std::uint32_t addr) {
  std::uint64_t d = static_cast<std::uint64_t>((addr & 0x3ffffu) >> 4);
  d |= std::uint64_t{1} << 16;
  d |= std::uint64_t{1024 >> 4} << 32;
  d |= std::uint64_t{1} << 62;
  return d;
}

//! `wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16` with A from registers (RS form):
//! `d += A * B`, A the 64x16 fragment of this warpgroup (4 registers per thread, the
//! `mma.m16n8k16` A layout per warp), B 16x256 in shared memory (`desc_b`, K-major).
QUADS_DEVICE_API void wgmma_m64n256k16_rs(float (&d)[128], std::uint32_t a0, std::uint32_t a1,
                                          std::uint32_t a2, std::uint32_t a3,
                                          std::uint64_t desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
      "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
      "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
      "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "
      "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, "
      "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, "
      "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, "
      "%120, %121, %122, %123, %124, %125, %126, %127"
      "}, {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
        "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
        "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "n"(1));
}

} // namespace sm90

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

//! What the mainloop reads besides the epilogue's parameters (the tensor maps are 64-byte
//! aligned members, passed by value as a `__grid_constant__`).
struct prefill_params {
  CUtensorMap map_a; //!< prepared bf16 activations [M, K], box 64 x 256, 128-byte swizzle
  CUtensorMap map_w; //!< packed weights [N, K / 2] bytes, box 32 x 128
  const std::uint8_t* w_scales;
  int M, N, K, k_tiles;
  float fold; //!< 2^(c_w + c_a)
};

template <class Epi>
struct prefill_kernel_params {
  prefill_params p;
  typename Epi::params ep;
};

//! Whether `Epi` is exactly `chain<scale_alpha, store<T>>` (the fast epilogue path).
template <class Epi>
struct alpha_store_chain : std::false_type {};
template <class T>
struct alpha_store_chain<epilogue::chain<epilogue::scale_alpha, epilogue::store<T>>>
    : std::true_type {
  using element = T;
};

//! alpha(m, n) is the same for every element (no per-row / per-column / per-expert source).
QUADS_DEVICE_API bool uniform_alpha(const epilogue::alpha_source& a) {
  auto uniform = [](epilogue::scale_source s) {
    return s == epilogue::scale_source::none || s == epilogue::scale_source::tensor;
  };
  return uniform(a.a_mode) && uniform(a.w_mode);
}

//! Stores `y0` at `out[0]` and, if `second`, `y1` at `out[1]`: one vector store when aligned.
template <class T>
QUADS_DEVICE_API void store_pair(T* out, T y0, T y1, bool second) {
  if (second && reinterpret_cast<std::uintptr_t>(out) % (2 * sizeof(T)) == 0) {
    if constexpr (sizeof(T) == 2) {
      std::uint16_t b0, b1;
      memcpy(&b0, &y0, 2);
      memcpy(&b1, &y1, 2);
      *reinterpret_cast<std::uint32_t*>(out) =
          static_cast<std::uint32_t>(b0) | (static_cast<std::uint32_t>(b1) << 16);
    } else {
      static_assert(sizeof(T) == 4, "quads: prefill store_pair: 16- or 32-bit elements");
      *reinterpret_cast<float2*>(out) =
          make_float2(element_traits<T>::to_float(y0), element_traits<T>::to_float(y1));
    }
    return;
  }
  out[0] = y0;
  if (second) out[1] = y1;
}

//! The activation pre-pass: one thread per 8 consecutive k of a token row; writes the bf16
//! lanes (FP4: `e2m1 * s * 2^-c`, exact) at `prefill_position`.
template <class Act>
__global__ void __launch_bounds__(256)
    prefill_prepare_kernel(const Act a, std::uint32_t* __restrict__ out, int M, int K) {
  using T = activation_traits<Act>;
  const int words = K / 8;
  const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<long long>(M) * words) return;
  const int m = static_cast<int>(idx / words), q = static_cast<int>(idx % words);
  const int k = 8 * q;
  std::uint32_t v[4];
  if constexpr (T::fp4) {
    using L = fp4_loader<typename T::format, bf16_lane>;
    const std::uint32_t codes = __ldg(reinterpret_cast<const std::uint32_t*>(
        a.data + static_cast<std::size_t>(m) * (K / 2) + 4 * static_cast<std::size_t>(q)));
    const std::uint8_t s =
        __ldg(a.scales + static_cast<std::size_t>(m) * (K / T::block_size) + k / T::block_size);
    L::dequant_word(codes, L::multiplier2(s), v);
  } else {
    const uint4 x = __ldg(reinterpret_cast<const uint4*>(
        reinterpret_cast<const std::uint16_t*>(a.data) + static_cast<std::size_t>(m) * K + k));
    const std::uint32_t w[4] = {x.x, x.y, x.z, x.w};
    pair_octet_words(w, v);
  }
  // pair i = 2h + hi of word w (k = 64c + 16t + 8w) goes to 64c + 32w + 16h + 2t + 8hi.
  const int c = k / 64, t = (k % 64) / 16, w = (k % 16) / 8;
  std::uint32_t* row = out + (static_cast<std::size_t>(m) * K + 64 * c + 32 * w + 2 * t) / 2;
  row[0] = v[0];
  row[4] = v[1];
  row[8] = v[2];
  row[12] = v[3];
}

//! The mainloop + fused epilogue (see the file comment). Grid: (token tiles, weight tiles).
//! `Probe` (diagnostics for the benchmark only, results are wrong): 1 = no dequantization
//! (constant A fragments), 2 = no MMAs (fragments folded into the accumulators), 3 = no
//! epilogue. 0 = the GEMM.
template <class Epi, int W, int Depth, int Probe = 0>
__global__ void __launch_bounds__(prefill_layout::threads, 1)
    prefill_kernel(const __grid_constant__ prefill_kernel_params<Epi> kp) {
  using PL = prefill_layout;
  using WL = fp4_loader<nvfp4, bf16_lane>;
  constexpr int S = PL::stages;
  const prefill_params& p = kp.p;
  extern __shared__ __align__(1024) std::uint8_t prefill_smem[];
  const std::uint32_t raw = sm90::smem_addr(prefill_smem);
  std::uint8_t* smem = prefill_smem + ((1024u - (raw & 1023u)) & 1023u);
  const std::uint32_t base = sm90::smem_addr(smem);
  const std::uint32_t full0 = base + PL::bar_offset, empty0 = full0 + 8 * S;

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int m0 = static_cast<int>(blockIdx.x) * PL::tile_m;
  const int n0 = static_cast<int>(blockIdx.y) * PL::tile_n;
  const int KT = p.k_tiles;

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      sm90::mbar_init(full0 + 8 * s, 1 + 32); // expect_tx arrival + 32 cp.async arrivals
      sm90::mbar_init(empty0 + 8 * s, 4 * PL::consumers); // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp < 4) {
    // ---------------- producer ----------------
    sm90::setmaxnreg_dec<40>();
    if (warp != 0) return;
    if (lane == 0) {
      sm90::tma_prefetch_map(&p.map_a);
      sm90::tma_prefetch_map(&p.map_w);
    }
    const int scale_cols = p.K / 16;
    for (int kt = 0; kt < KT; ++kt) {
      const int s = kt % S;
      const std::uint32_t round = static_cast<std::uint32_t>(kt / S);
      sm90::mbar_wait(empty0 + 8 * s, (round & 1u) ^ 1u);
      const std::uint32_t full = full0 + 8 * s;
      if (lane == 0) {
        sm90::mbar_expect_tx(full, PL::b_stage_bytes + PL::w_stage_bytes);
        sm90::tma_load_2d(base + s * PL::b_stage_bytes, &p.map_a, full, kt * PL::tile_k, m0);
        sm90::tma_load_2d(base + PL::w_offset + s * PL::w_stage_bytes, &p.map_w, full,
                          kt * PL::tile_k / 2, n0);
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = 4 * lane + r, n = n0 + row;
        const bool valid = n < p.N;
        const std::uint8_t* src =
            p.w_scales + static_cast<std::size_t>(valid ? n : 0) * scale_cols + 4 * kt;
        sm90::cp_async_4(base + PL::s_offset + s * PL::s_stage_bytes + 4 * row, src,
                         valid ? 4u : 0u);
      }
      sm90::cp_async_arrive_noinc(full);
    }
    sm90::cp_async_wait_all();
    return;
  }

  // ---------------- consumers ----------------
  sm90::setmaxnreg_inc<232>();
  const int wg = warp / 4 - 1, wq = warp % 4;
  const int g = lane / 4, t = lane % 4;
  const int r0 = wg * 64 + wq * 16 + g; // local weight rows r0 and r0 + 8
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i)
    acc[i] = 0.0f;

  // Dequantizes k-tile kt into the four k-steps' A fragments (waits for its stage first).
  auto load = [&](int kt, std::uint32_t(&f)[4][4]) {
    const int s = kt % S;
    sm90::mbar_wait(full0 + 8 * s, static_cast<std::uint32_t>(kt / S) & 1u);
    if constexpr (Probe == 1) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          f[i][j] = 0x3c003c00u + static_cast<std::uint32_t>(kt & 1);
      return;
    }
    const std::uint8_t* wt = smem + PL::w_offset + s * PL::w_stage_bytes;
    const std::uint8_t* st = smem + PL::s_offset + s * PL::s_stage_bytes;
    const uint2 q0 = *reinterpret_cast<const uint2*>(wt + 32 * r0 + 8 * t);
    const uint2 q1 = *reinterpret_cast<const uint2*>(wt + 32 * (r0 + 8) + 8 * t);
    const std::uint32_t s0 = WL::multiplier2(st[4 * r0 + t]);
    const std::uint32_t s1 = WL::multiplier2(st[4 * (r0 + 8) + t]);
    std::uint32_t p00[4], p01[4], p10[4], p11[4];
    WL::dequant_word(q0.x, s0, p00);
    WL::dequant_word(q0.y, s0, p01);
    WL::dequant_word(q1.x, s1, p10);
    WL::dequant_word(q1.y, s1, p11);
    // k-step 2w + h: {row g pair 2h, row g+8 pair 2h, row g pair 2h+1, row g+8 pair 2h+1}
    f[0][0] = p00[0], f[0][1] = p10[0], f[0][2] = p00[1], f[0][3] = p10[1];
    f[1][0] = p00[2], f[1][1] = p10[2], f[1][2] = p00[3], f[1][3] = p10[3];
    f[2][0] = p01[0], f[2][1] = p11[0], f[2][2] = p01[1], f[2][3] = p11[1];
    f[3][0] = p01[2], f[3][1] = p11[2], f[3][2] = p01[3], f[3][3] = p11[3];
  };
  auto mma = [&](int kt, const std::uint32_t(&f)[4][4]) {
    if constexpr (Probe == 2) {
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        acc[ks] += __uint_as_float((f[ks][0] ^ f[ks][1] ^ f[ks][2] ^ f[ks][3]) & 0x3fffffffu);
      return;
    }
    const std::uint64_t desc = sm90::sw128_desc(base + (kt % S) * PL::b_stage_bytes);
    sm90::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      sm90::wgmma_m64n256k16_rs(acc, f[ks][0], f[ks][1], f[ks][2], f[ks][3], desc + 2 * ks);
    sm90::wgmma_commit();
  };
  // Frees the stage of k-tile kt once no wgmma group (`release`) or at most the newest one
  // (`release_older`) is still in flight.
  auto release = [&](int kt) {
    sm90::wgmma_wait<0>();
    if (lane == 0) sm90::mbar_arrive(empty0 + 8 * (kt % S));
  };
  auto release_older = [&](int kt) {
    sm90::wgmma_wait<1>();
    if (lane == 0) sm90::mbar_arrive(empty0 + 8 * (kt % S));
  };

  std::uint32_t fa[4][4], fb[4][4]; // the A fragments of two k-tiles (unrolled by 2)
#pragma unroll
  for (int i = 0; i < 128; ++i)
    sm90::fence_operand(acc[i]);
  if constexpr (Depth == 1) {
    // One group in flight per warpgroup: dequantize k-tile kt + 1 while kt runs, then wait for
    // kt. The other consumer warpgroup's group keeps the tensor cores busy meanwhile.
    load(0, fa);
    for (int kt = 0; kt < KT; kt += 2) {
      mma(kt, fa);
      if (kt + 1 < KT) load(kt + 1, fb);
      release(kt);
      if (kt + 1 >= KT) break;
      mma(kt + 1, fb);
      if (kt + 2 < KT) load(kt + 2, fa);
      release(kt + 1);
    }
  } else {
    // Two groups in flight per warpgroup: issue kt, then wait for kt - 1 only, so the
    // warpgroup's own queue never drains inside the loop. Fragments of kt + 1 are dequantized
    // while kt - 1 / kt run, into the buffer kt - 1 used (free after the wait).
    load(0, fa);
    mma(0, fa);
    if (KT > 1) load(1, fb);
    for (int kt = 1; kt < KT;) {
      mma(kt, fb);
      release_older(kt - 1); // kt - 1 (fragments fa) done
      if (++kt >= KT) break;
      load(kt, fa);
      mma(kt, fa);
      release_older(kt - 1); // kt - 1 (fragments fb) done
      if (++kt >= KT) break;
      load(kt, fb);
    }
    release(KT - 1);
  }
#pragma unroll
  for (int i = 0; i < 128; ++i)
    sm90::fence_operand(acc[i]);

  // ---------------- epilogue ----------------
  if constexpr (Probe == 3) return;            // the MMAs stay: they are volatile asm
  sm90::named_barrier(1, 128 * PL::consumers); // both warpgroups are done with the B stages
  float* stage_c = reinterpret_cast<float*>(smem) + wg * PL::staging_floats;
#pragma unroll
  for (int j = 0; j < 32; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int tok = 8 * j + 2 * t + (e & 1), row = wq * 16 + g + (e >= 2 ? 8 : 0);
      stage_c[tok * PL::staging_pitch + row] = acc[4 * j + e] * p.fold; // exact: power of 2
    }
  sm90::named_barrier(2 + wg, 128);
  const int tid = static_cast<int>(threadIdx.x) % 128;
  bool done = false;
  if constexpr (alpha_store_chain<Epi>::value) {
    // `scale_alpha` + `store<T>` with per-tensor (or no) scales: alpha is one number, read
    // once; a warp stores 64 consecutive columns of a token as pairs. Same arithmetic as the
    // nodes (mul_rn, element_traits::from_float), so the bits equal the generic path's.
    using T = typename alpha_store_chain<Epi>::element;
    const epilogue::alpha_source& al = epilogue::get<0>(kp.ep);
    const auto& st = epilogue::get<1>(kp.ep);
    if (uniform_alpha(al)) {
      const float alpha = al.at(0, 0);
      for (int fi = tid; fi < PL::tile_m * 32; fi += 128) {
        const int tl = fi / 32, np = fi % 32;
        const int m = m0 + tl, n = n0 + wg * 64 + 2 * np;
        if (m >= p.M || n >= p.N) continue;
        const float2 v =
            *reinterpret_cast<const float2*>(stage_c + tl * PL::staging_pitch + 2 * np);
        const T y0 = element_traits<T>::from_float(::quads::detail::mul_rn(v.x, alpha));
        const T y1 = element_traits<T>::from_float(::quads::detail::mul_rn(v.y, alpha));
        T* out = st.out + static_cast<std::int64_t>(m) * st.ld + n;
        store_pair(out, y0, y1, n + 1 < p.N);
      }
      done = true;
    }
  }
  if (done) return;
  if constexpr (W == 1) {
    // Element chains: a warp takes 32 consecutive columns of one token, so each store of the
    // chain is one 64-byte run (a thread per 16-column fragment would scatter every store
    // over 32 sectors, which cost ~40 us per wave of tiles on the H200).
    for (int fi = tid; fi < PL::tile_m * 64; fi += 128) {
      const int tl = fi / 64, nl = fi % 64;
      const int m = m0 + tl, n = n0 + wg * 64 + nl;
      if (m >= p.M || n >= p.N) continue;
      epilogue::fragment<1> fr;
      fr.row = m;
      fr.col = n;
      fr.count = 1;
      fr.v[0] = stage_c[tl * PL::staging_pitch + nl];
      fr.r[0] = 0.0f;
      (void)epilogue::apply_node<Epi>(fr, kp.ep);
    }
  } else {
    constexpr int per_row = 64 / W;
    for (int fi = tid; fi < PL::tile_m * per_row; fi += 128) {
      const int tl = fi / per_row, nf = fi % per_row;
      const int m = m0 + tl, n = n0 + wg * 64 + nf * W;
      if (m >= p.M || n >= p.N) continue;
      epilogue::fragment<W> fr;
      fr.row = m;
      fr.col = n;
      fr.count = min(W, p.N - n);
      const float4* src =
          reinterpret_cast<const float4*>(stage_c + tl * PL::staging_pitch + nf * W);
#pragma unroll
      for (int i = 0; i < W / 4; ++i) {
        const float4 v = src[i];
        fr.v[4 * i] = v.x;
        fr.v[4 * i + 1] = v.y;
        fr.v[4 * i + 2] = v.z;
        fr.v[4 * i + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < W; ++i)
        fr.r[i] = 0.0f;
      (void)epilogue::apply_node<Epi>(fr, kp.ep);
    }
  }
}

//! cuTensorMapEncodeTiled through the runtime's driver entry point (no -lcuda needed).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() noexcept {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

//! A 2D tensor map: `rows` x `cols` elements, row pitch `cols * elem` bytes, box `box_cols` x
//! `box_rows`; out-of-range boxes are zero-filled.
inline bool make_map_2d(CUtensorMap* map, CUtensorMapDataType type, int elem_bytes, const void* ptr,
                        std::uint64_t rows, std::uint64_t cols, std::uint32_t box_cols,
                        std::uint32_t box_rows, CUtensorMapSwizzle swizzle) noexcept {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {cols * static_cast<std::uint64_t>(elem_bytes)};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  return encode(map, type, 2, const_cast<void*>(ptr), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

inline cudaError_t check_prefill_shape(const prefill_plan& plan, const char* who) {
  using ::quads::kernels::detail::fail;
  (void)who;
  if (plan.M <= 0 || plan.N <= 0 || plan.K <= 0)
    return fail("quads: prefill_gemm: M, N and K must be positive");
  if (plan.K % prefill_layout::tile_k != 0)
    return fail("quads: prefill_gemm: K must be a multiple of 64 (the k-tile; no K tails): pad "
                "K with zero blocks or use decode_gemm");
  if (plan.mma_depth != 1 && plan.mma_depth != 2)
    return fail("quads: prefill_gemm: mma_depth must be 1 or 2");
  if (plan_prefill(plan.M, plan.N, plan.K).workspace_bytes != plan.workspace_bytes)
    return fail("quads: prefill_gemm: the plan is inconsistent; make it with plan_prefill");
  if (static_cast<long long>(plan.N + prefill_layout::tile_n - 1) / prefill_layout::tile_n > 65535)
    return fail("quads: prefill_gemm: N above 8388480 rows (grid y limit)");
  return cudaSuccess;
}

//! Launches one instantiation; raises its shared-memory limit once per device (off the
//! per-call host path).
template <auto Kernel, class Params>
cudaError_t launch_prefill(int dev, dim3 grid, const Params& kp, cudaStream_t stream) {
  static std::atomic<bool> configured[64] = {};
  if (dev < 0 || dev >= 64 || !configured[dev].load(std::memory_order_acquire)) {
    if (const cudaError_t e = cudaFuncSetAttribute(
            Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, prefill_layout::smem_request);
        e != cudaSuccess)
      return ::quads::kernels::detail::fail(
          "quads: prefill_gemm: cannot raise the kernel's shared-memory limit", e);
    if (dev >= 0 && dev < 64) configured[dev].store(true, std::memory_order_release);
  }
  Kernel<<<grid, prefill_layout::threads, prefill_layout::smem_request, stream>>>(kp);
  return cudaSuccess;
}

//! The checks of everything but the activations (shape, weights, epilogue, device).
template <class Epi>
cudaError_t check_prefill_call(const prefill_plan& plan, const fp4_weights<nvfp4>& w,
                               const typename Epi::arguments& epi) {
  using ::quads::kernels::detail::aligned;
  using ::quads::kernels::detail::fail;
  if (const cudaError_t e = check_prefill_shape(plan, "prefill_gemm"); e != cudaSuccess) return e;
  if (w.data == nullptr || w.scales == nullptr || !aligned(w.data, 16) || !aligned(w.scales, 4))
    return fail("quads: prefill_gemm: weight data (16-byte aligned) and scales (4-byte aligned) "
                "needed");
  if (const char* why = epilogue::check_arguments<Epi>(epi, plan.M, plan.N)) return fail(why);
  int dev = 0, major = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess)
    return fail("quads: prefill_gemm: no current CUDA device", e);
  if (const cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
      e != cudaSuccess)
    return fail("quads: prefill_gemm: cannot query the device's compute capability", e);
  if (major != 9) return fail("quads: prefill_gemm: needs an sm_90 GPU (wgmma, built for sm_90a)");
  return cudaSuccess;
}

} // namespace detail

//! Activations after the pre-pass: bf16 `[M, K]` in `prefill_position` order, lanes scaled by
//! 2^-fold_log2 (FP4: c of the loader; dense: 0).
struct prefill_activations {
  const __nv_bfloat16* data = nullptr;
  int fold_log2 = 0;
};

//! Stage 1: writes the activations as the mainloop reads them into `workspace`
//! (`plan.workspace_bytes`, 16-byte aligned). FP4 (NVFP4 / MXFP4, linear scales) or dense bf16.
//! On success `*out` describes the prepared operand.
template <class Act>
cudaError_t prefill_prepare(const prefill_plan& plan, const Act& a, void* workspace,
                            prefill_activations* out, cudaStream_t stream) {
  using AT = detail::activation_traits<Act>;
  using ::quads::kernels::detail::aligned;
  using ::quads::kernels::detail::fail;
  static_assert(!std::is_same_v<Act, dense_activations<fp16_lane>>,
                "quads: prefill_gemm runs bf16 lanes; fp16 activations are not supported");
  static_assert(!AT::rac, "quads: prefill_gemm has no RAC path (use decode_gemm)");
  if (const cudaError_t e = detail::check_prefill_shape(plan, "prefill_prepare"); e != cudaSuccess)
    return e;
  if (out == nullptr) return fail("quads: prefill_prepare: `out` is null");
  if (workspace == nullptr || !aligned(workspace, 16))
    return fail("quads: prefill_gemm: workspace must be non-null, 16-byte aligned, "
                "plan.workspace_bytes long");
  int fold = 0;
  if constexpr (AT::fp4) {
    if (a.data == nullptr || a.scales == nullptr || !aligned(a.data, 4))
      return fail("quads: prefill_gemm: FP4 activations: data (4-byte aligned) and scales needed");
    fold = fp4_loader<typename AT::format, bf16_lane>::fold_log2;
  } else {
    if (a.data == nullptr || !aligned(a.data, 16))
      return fail("quads: prefill_gemm: dense activations must be non-null and 16-byte aligned");
  }
  const long long words = static_cast<long long>(plan.M) * (plan.K / 8);
  const unsigned blocks = static_cast<unsigned>((words + 255) / 256);
  detail::prefill_prepare_kernel<Act>
      <<<blocks, 256, 0, stream>>>(a, static_cast<std::uint32_t*>(workspace), plan.M, plan.K);
  out->data = static_cast<const __nv_bfloat16*>(workspace);
  out->fold_log2 = fold;
  return ::quads::kernels::detail::after_launch();
}

namespace detail {
template <class Epi, int Probe>
cudaError_t prefill_gemm_prepared_impl(const prefill_plan& plan, const fp4_weights<nvfp4>& w,
                                       const prefill_activations& a,
                                       const typename Epi::arguments& epi, cudaStream_t stream);
} // namespace detail

//! Stage 2: the wgmma mainloop and the fused epilogue on prepared activations.
template <class Epi>
cudaError_t prefill_gemm_prepared(const prefill_plan& plan, const fp4_weights<nvfp4>& w,
                                  const prefill_activations& a, const typename Epi::arguments& epi,
                                  cudaStream_t stream) {
  return detail::prefill_gemm_prepared_impl<Epi, 0>(plan, w, a, epi, stream);
}

//! The launcher behind `prefill_gemm_prepared`; `Probe` != 0 runs a diagnostic kernel (see
//! `prefill_kernel`; benchmark only, the output is wrong).
template <class Epi, int Probe>
cudaError_t
detail::prefill_gemm_prepared_impl(const prefill_plan& plan, const fp4_weights<nvfp4>& w,
                                   const prefill_activations& a, const typename Epi::arguments& epi,
                                   cudaStream_t stream) {
  static_assert(epilogue::check_epilogue_node<Epi>());
  static_assert(!detail::reads_residual_of<Epi>::value,
                "quads: prefill_gemm has no RAC residual accumulator (use decode_gemm)");
  // Element-wise chains run per element with coalesced stores; chains with fragment nodes get
  // fragments of lcm(input width, 16) columns (`epilogue::fragment_width`).
  constexpr int W = epilogue_fragment_width<Epi>;
  static_assert(64 % W == 0, "quads: prefill_gemm: the epilogue's fragment width must divide 64");
  using ::quads::kernels::detail::aligned;
  using ::quads::kernels::detail::fail;
  using PL = prefill_layout;
  if (const cudaError_t e = detail::check_prefill_call<Epi>(plan, w, epi); e != cudaSuccess)
    return e;
  if (a.data == nullptr || !aligned(a.data, 16))
    return fail("quads: prefill_gemm: prepared activations must be non-null, 16-byte aligned");
  int dev = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess)
    return fail("quads: prefill_gemm: no current CUDA device", e);

  detail::prefill_kernel_params<Epi> kp{};
  detail::prefill_params& p = kp.p;
  if (!detail::make_map_2d(&p.map_a, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a.data,
                           static_cast<std::uint64_t>(plan.M), static_cast<std::uint64_t>(plan.K),
                           PL::tile_k, PL::tile_m, CU_TENSOR_MAP_SWIZZLE_128B) ||
      !detail::make_map_2d(&p.map_w, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, w.data,
                           static_cast<std::uint64_t>(plan.N),
                           static_cast<std::uint64_t>(plan.K / 2), PL::tile_k / 2, PL::tile_n,
                           CU_TENSOR_MAP_SWIZZLE_NONE))
    return fail("quads: prefill_gemm: cuTensorMapEncodeTiled failed (driver entry point missing "
                "or operand not encodable)",
                cudaErrorInvalidValue);
  p.w_scales = w.scales;
  p.M = plan.M;
  p.N = plan.N;
  p.K = plan.K;
  p.k_tiles = plan.K / PL::tile_k;
  p.fold = ::quads::detail::from_bits(
      static_cast<std::uint32_t>(127 + fp4_loader<nvfp4, bf16_lane>::fold_log2 + a.fold_log2)
      << 23);
  kp.ep = Epi::to_params(epi);
  const dim3 grid(static_cast<unsigned>((plan.M + PL::tile_m - 1) / PL::tile_m),
                  static_cast<unsigned>((plan.N + PL::tile_n - 1) / PL::tile_n));
  const cudaError_t e =
      plan.mma_depth == 2
          ? detail::launch_prefill<detail::prefill_kernel<Epi, W, 2, Probe>>(dev, grid, kp, stream)
          : detail::launch_prefill<detail::prefill_kernel<Epi, W, 1, Probe>>(dev, grid, kp, stream);
  if (e != cudaSuccess) return e;
  return ::quads::kernels::detail::after_launch();
}

//! `y = Epi(A W^T)`: the pre-pass, then the mainloop (both enqueued on `stream`).
template <class Epi, class Act>
cudaError_t prefill_gemm(const prefill_plan& plan, const fp4_weights<nvfp4>& w, const Act& a,
                         const typename Epi::arguments& epi, void* workspace, cudaStream_t stream) {
  // Everything is checked before the pre-pass is enqueued, so a refusal enqueues nothing.
  if (const cudaError_t e = detail::check_prefill_call<Epi>(plan, w, epi); e != cudaSuccess)
    return e;
  prefill_activations prepared{};
  if (const cudaError_t e = prefill_prepare(plan, a, workspace, &prepared, stream);
      e != cudaSuccess)
    return e;
  return prefill_gemm_prepared<Epi>(plan, w, prepared, epi, stream);
}

} // namespace quads::gemm
