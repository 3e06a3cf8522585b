// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Chunk tiling of NVFP4 weights on the GPU (nvcc only): the device form of `tile_chunks`
//!        (quads/gemm/chunk_tiling.hpp), byte-identical to the host's.
//!
//! For the RL weight sync: the trainer's weights are quantized once per step and tiled before
//! the decode GEMMs read them, without a host round trip. Pair coding (word-local) and tiling
//! (a byte permutation of 16-byte pieces) commute; apply both for `chunk_tiled<pair_coded<nvfp4>>`.
//! @code
//!   quads::gemm::tile_chunks_async(codes, scales, tiled_codes, tiled_scales, N, K, experts, stream);
//!   quads::gemm::decode_gemm<quads::gemm::bf16_lane, epi>(
//!       plan, quads::gemm::fp4_weights<quads::gemm::chunk_tiled<quads::nvfp4>>{tiled_codes,
//!       tiled_scales}, act, epi_args, workspace, stream);
//! @endcode
#pragma once

#include <quads/kernels/common.cuh>

#include <quads/gemm/chunk_tiling.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace quads::gemm {
namespace detail {

//! Thread i writes tiled code piece i (16 bytes) and, for i < scale pieces, tiled scale piece i
//! (8 bytes); `per_e` pieces of each kind per expert.
template <int = 0> // a template, so the header can be in several TUs
__global__ void __launch_bounds__(256)
    tile_chunk_pieces(const uint4* codes, const uint2* scales, uint4* tiled_codes,
                      uint2* tiled_scales, std::size_t code_pieces, std::size_t scale_pieces,
                      std::size_t code_per_e, std::size_t scale_per_e, int K) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < code_pieces;
       i += stride) {
    const std::size_t e = i / code_per_e, in = i % code_per_e;
    tiled_codes[i] = codes[e * code_per_e + chunk_tiling::code_source(16 * in, K) / 16];
  }
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < scale_pieces;
       i += stride) {
    const std::size_t e = i / scale_per_e, in = i % scale_per_e;
    tiled_scales[i] = scales[e * scale_per_e + chunk_tiling::scale_source(8 * in, K) / 8];
  }
}

} // namespace detail

//! Enqueues the chunk tiling of `experts` row-major NVFP4 matrices `[N, K]` (codes N K / 2 bytes,
//! linear scales N K / 16 bytes each, experts back to back) into `tiled_codes` / `tiled_scales`
//! (same sizes; must not overlap the inputs). N a multiple of 16, K of 128; all pointers 16-byte
//! aligned. Returns cudaErrorInvalidValue with a message (`quads::kernels::last_error_message()`)
//! on a refused argument; never synchronises.
inline cudaError_t tile_chunks_async(const std::uint8_t* codes, const std::uint8_t* scales,
                                     std::uint8_t* tiled_codes, std::uint8_t* tiled_scales, int N,
                                     int K, int experts, cudaStream_t stream) {
  using ::quads::kernels::detail::aligned;
  using ::quads::kernels::detail::fail;
  if (const char* why = chunk_tiling::check_shape(experts, N, K)) return fail(why);
  if (codes == nullptr || scales == nullptr || tiled_codes == nullptr || tiled_scales == nullptr ||
      !aligned(codes, 16) || !aligned(scales, 16) || !aligned(tiled_codes, 16) ||
      !aligned(tiled_scales, 16))
    return fail("quads: tile_chunks_async: pointers must be non-null and 16-byte aligned");
  const std::size_t code_per_e = static_cast<std::size_t>(N) * K / 32;   // 16-byte pieces
  const std::size_t scale_per_e = static_cast<std::size_t>(N) * K / 128;  // 8-byte pieces
  const std::size_t code_pieces = code_per_e * experts, scale_pieces = scale_per_e * experts;
  const std::size_t want = (code_pieces + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(want < 65536 ? want : 65536);
  detail::tile_chunk_pieces<><<<blocks, 256, 0, stream>>>(
      reinterpret_cast<const uint4*>(codes), reinterpret_cast<const uint2*>(scales),
      reinterpret_cast<uint4*>(tiled_codes), reinterpret_cast<uint2*>(tiled_scales), code_pieces,
      scale_pieces, code_per_e, scale_per_e, K);
  return ::quads::kernels::detail::after_launch();
}

} // namespace quads::gemm
