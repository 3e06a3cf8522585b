// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Pair coding of packed NVFP4 weights on the GPU (nvcc only): the device form of
//!        `encode_pair_coded` (quads/gemm/pair_coding.hpp), byte-identical to the host's.
//!
//! For the RL weight sync: the trainer's fake-quantized weights are quantized once per step and
//! pair-coded in place before the decode GEMMs read them, without a host round trip.
//! @code
//!   quads::gemm::encode_pair_coded_async(w_codes, w_codes, bytes, stream);  // in place
//!   quads::gemm::decode_gemm<quads::gemm::fp16_lane, epi>(
//!       plan, quads::gemm::fp4_weights<quads::gemm::pair_coded<quads::nvfp4>>{w_codes, w_scales},
//!       act, epi_args, workspace, stream);
//! @endcode
#pragma once

#include <quads/kernels/common.cuh>

#include <quads/gemm/pair_coding.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace quads::gemm {
namespace detail {

template <int = 0> // a template, so the header can be in several TUs
__global__ void __launch_bounds__(256)
    pair_code_words(const uint4* in, uint4* out, std::size_t vecs,
                    const __grid_constant__ pair_coding::detail::inverse inv) {
  for (std::size_t i = blockIdx.x * std::size_t{256} + threadIdx.x; i < vecs;
       i += std::size_t{gridDim.x} * 256) {
    uint4 v = in[i];
    v.x = pair_coding::encode_word(v.x, inv);
    v.y = pair_coding::encode_word(v.y, inv);
    v.z = pair_coding::encode_word(v.z, inv);
    v.w = pair_coding::encode_word(v.w, inv);
    out[i] = v;
  }
}

template <int = 0>
__global__ void __launch_bounds__(32)
    pair_code_tail(const std::uint32_t* in, std::uint32_t* out, int words,
                   const __grid_constant__ pair_coding::detail::inverse inv) {
  if (static_cast<int>(threadIdx.x) < words)
    out[threadIdx.x] = pair_coding::encode_word(in[threadIdx.x], inv);
}

} // namespace detail

//! Enqueues the pair coding of `bytes` bytes of packed codes (`plain` -> `coded`; the same
//! pointer codes in place; otherwise the ranges must not overlap). `bytes` a multiple of 4, both
//! pointers 16-byte aligned. Returns cudaErrorInvalidValue with a message
//! (`quads::kernels::last_error_message()`) on a refused argument; never synchronises.
inline cudaError_t encode_pair_coded_async(const void* plain, void* coded, std::size_t bytes,
                                           cudaStream_t stream) {
  using ::quads::kernels::detail::aligned;
  using ::quads::kernels::detail::fail;
  if (bytes % 4 != 0) return fail("quads: encode_pair_coded_async: bytes must be a multiple of 4");
  if (bytes == 0) return cudaSuccess;
  if (plain == nullptr || coded == nullptr || !aligned(plain, 16) || !aligned(coded, 16))
    return fail("quads: encode_pair_coded_async: pointers must be non-null and 16-byte aligned");
  const std::size_t vecs = bytes / 16;
  const int tail = static_cast<int>((bytes % 16) / 4);
  if (vecs > 0) {
    const std::size_t want = (vecs + 255) / 256;
    const unsigned blocks = static_cast<unsigned>(want < 65536 ? want : 65536);
    detail::pair_code_words<><<<blocks, 256, 0, stream>>>(static_cast<const uint4*>(plain),
                                                        static_cast<uint4*>(coded), vecs,
                                                        pair_coding::inverse_table);
  }
  if (tail > 0)
    detail::pair_code_tail<><<<1, 32, 0, stream>>>(
        static_cast<const std::uint32_t*>(plain) + 4 * vecs,
        static_cast<std::uint32_t*>(coded) + 4 * vecs, tail, pair_coding::inverse_table);
  return ::quads::kernels::detail::after_launch();
}

} // namespace quads::gemm
