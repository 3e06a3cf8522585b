// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief MoE expert-MLP layer (host-safe part): shape, policies, the quantizers and the epilogue
//!        chains shared by the GPU layer (quads/moe/layer.cuh) and the host reference
//!        (quads/moe/reference.hpp).
//!
//! Data flow of one layer (T tokens, E experts, top-k, hidden H, intermediate I):
//! @code
//!   logits [T, E] --route--> offsets, row maps, weight_of_row           (T * k grouped rows)
//!   x [T, H] bf16 --quantize (policy)--> X_q [T, H'] --gather rows--> A1 [T * k, H']
//!   A1 . W_gu[e]^T   (W_gu [E, 2I, H], gate/up rows interleaved)
//!      epilogue: alpha(e) -> SwiGLU -> [tap fp32] -> quantize h (NVFP4, [+ RAC residual of
//!      expert e's down channel set]) or store bf16                      h [T * k, I']
//!   h . W_dn[e]^T    (W_dn [E, H, I])
//!      epilogue: alpha(e) -> * weight_of_row -> store fp32              Y [T * k, H]
//!   combine: out[t] = Y[row_of_pair[t k]] + ... + Y[row_of_pair[t k + k - 1]] (fixed order)
//! @endcode
//! Policies (`layer_policy`):
//! | policy      | x operand                 | W      | h operand                        |
//! |-------------|---------------------------|--------|----------------------------------|
//! | bf16        | bf16                      | bf16   | bf16                             |
//! | w4a16       | bf16                      | NVFP4  | bf16                             |
//! | naive_w4a4  | NVFP4 (given scale)       | NVFP4  | NVFP4 (given scale)              |
//! | quads_rac   | NVFP4 + RAC, one set/layer| NVFP4  | NVFP4 + RAC, one set per expert  |
//! Activation tensor scales are calibrated and given (`global_scale::given`): one for x, one per
//! layer or one per expert for h. RAC: `residual_scale::shared` and `permutation::none` (the
//! channel sets are block lists of the unpermuted axis; weights are not permuted), |S| equal for
//! all experts of the down GEMM.
#pragma once

#include <quads/config.hpp>

#include <quads/epilogue/chain.hpp>
#include <quads/epilogue/fragment.hpp>
#include <quads/epilogue/nodes.hpp>
#include <quads/moe/nodes.hpp>
#include <quads/moe/routing.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/options.hpp>
#include <quads/scheme/schemes.hpp>

#include <cuda/std/cstdint>

namespace quads::moe {

//! The numeric policy of a layer (see the file comment).
enum class layer_policy : ::cuda::std::uint8_t { bf16, w4a16, naive_w4a4, quads_rac };

inline constexpr const char* to_string(layer_policy p) noexcept {
  switch (p) {
  case layer_policy::bf16:
    return "bf16";
  case layer_policy::w4a16:
    return "w4a16";
  case layer_policy::naive_w4a4:
    return "naive_w4a4";
  default:
    return "quads_rac";
  }
}

//! True for the policies whose activations are NVFP4.
QUADS_API constexpr bool fp4_activations(layer_policy p) noexcept {
  return p == layer_policy::naive_w4a4 || p == layer_policy::quads_rac;
}
QUADS_API constexpr bool fp4_weights(layer_policy p) noexcept { return p != layer_policy::bf16; }

//! Expert shapes.
struct layer_shape {
  int experts = 0;      //!< E
  int top_k = 0;        //!< k
  int hidden = 0;       //!< H (gate_up K, down N)
  int intermediate = 0; //!< I (down K; gate_up N = 2 I)
};

//! Weight format and the activation quantizer (NVFP4, TE-exact numerics, given tensor scale).
using weight_format = nvfp4;
inline constexpr quant_options activation_options{.global = global_scale::given};
using activation_quantizer = block_quantizer<nvfp4, activation_options>;
inline constexpr int block = nvfp4::block_size;

//! |S| for a ratio of K channels, rounded to whole blocks (at least one block when ratio > 0).
constexpr int rac_selected_channels(double ratio, int K) noexcept {
  if (ratio <= 0) return 0;
  int blocks = static_cast<int>(ratio * (K / block) + 0.5);
  if (blocks < 1) blocks = 1;
  if (blocks > K / block) blocks = K / block;
  return blocks * block;
}

// Epilogue chains (identical on the GPU and in the host reference).

//! gate_up with NVFP4 h (naive W4A4, QUADS): alpha -> SwiGLU -> tap -> quantize (+ residual).
using gate_up_fp4_epilogue = epilogue::chain<epilogue::scale_alpha, epilogue::swiglu<>, tap<float>,
                                             quantize_expert_output<activation_quantizer>>;
//! gate_up with bf16 h (W4A16, bf16): alpha -> SwiGLU -> tap -> store bf16.
using gate_up_bf16_epilogue =
    epilogue::chain<epilogue::scale_alpha, epilogue::swiglu<>, tap<float>, epilogue::store<bf16_t>>;
//! down: alpha -> * top-k weight -> store fp32 rows.
using down_epilogue = epilogue::chain<epilogue::scale_alpha, route_weight, epilogue::store<float>>;

} // namespace quads::moe
