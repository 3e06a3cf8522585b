// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The `epilogue_node` concept, its readable check, and the width facts of a node.
//!
//! An epilogue node is a type with
//! - `struct arguments` (host side: what the user fills in, pointers to device memory included);
//! - `struct params` (what the kernel receives by value: must be trivially copyable);
//! - `static params to_params(const arguments&)` (host);
//! - one of two `apply` forms (host + device):
//!   - element node: `static float apply(float value, int row, int col, const params&)`;
//!   - fragment node: `template <int W> static fragment<W2> apply(const fragment<W>&, const
//!     params&)`, for nodes that look at several columns at once (SwiGLU, quantize-output).
//! Optional width facts of fragment nodes (default 1): `width_divisor` (output columns = input
//! columns / divisor: 2 for SwiGLU) and `min_width` (the output fragment must hold a multiple of
//! this many columns: the block size for quantize-output). `reads_residual = true` marks nodes
//! that read `fragment::r` (`rac_residual`). An optional
//! `static const char* check(const arguments&, int rows, int cols)` returns a message for
//! arguments that cannot work for an output of `rows x cols` (input columns), or nullptr.
#pragma once

#include <quads/config.hpp>

#include <quads/epilogue/fragment.hpp>

#include <cuda/std/type_traits>

#include <concepts>

namespace quads::epilogue {

namespace detail {

template <class N>
concept has_arguments = requires { typename N::arguments; };
template <class N>
concept has_params = requires { typename N::params; };
template <class N>
concept has_trivial_params =
    has_params<N> && ::cuda::std::is_trivially_copyable_v<typename N::params>;
template <class N>
concept has_to_params = has_arguments<N> && has_params<N> &&
                        requires(const typename N::arguments& a) {
                          { N::to_params(a) } -> std::same_as<typename N::params>;
                        };
template <class N>
concept has_element_apply = has_params<N> && requires(float v, int r, int c,
                                                      const typename N::params& p) {
  { N::apply(v, r, c, p) } -> std::convertible_to<float>;
};

template <class N>
consteval int width_divisor_of() {
  if constexpr (requires { N::width_divisor; }) return N::width_divisor;
  else return 1;
}
template <class N>
consteval int min_width_of() {
  if constexpr (requires { N::min_width; }) return N::min_width;
  else return 1;
}
template <class N>
consteval bool reads_residual_of() {
  if constexpr (requires { N::reads_residual; }) return N::reads_residual;
  else return false;
}

consteval int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }
consteval int lcm(int a, int b) { return a / gcd(a, b) * b; }

//! Input columns a node needs per fragment so that its own output granularity holds.
template <class N>
inline constexpr int node_input_width = min_width_of<N>() * width_divisor_of<N>();

//! Whether `N` works element by element: an element node, or a chain of such nodes only
//! (chains say so through `element_wise`). Fragment nodes, even of width 1, are not.
template <class N>
consteval bool is_element_wise() {
  if constexpr (requires { N::element_wise; }) return N::element_wise;
  else return has_element_apply<N>;
}

template <class N>
concept has_fragment_apply =
    has_params<N> && requires(const fragment<node_input_width<N>>& f, const typename N::params& p) {
      N::apply(f, p);
    };

} // namespace detail

//! Columns of one fragment that the GEMM epilogues hand to node (chain) `N`: 1 when it works
//! element by element (every element independent: small-M decode epilogues spread over more
//! threads), otherwise lcm(its input width, 16), which is what a fragment node may rely on.
template <class N>
inline constexpr int fragment_width =
    detail::is_element_wise<N>() ? 1 : detail::lcm(detail::node_input_width<N>, 16);

//! `G` consecutive lanes of one warp that hold one fragment together, each lane `W / G` of its
//! columns (`rank`: this lane's place in the group, `mask`: the group's lanes for `__shfl_sync`).
//! GEMM epilogues hand lane groups to chains whose every block node (`min_width > 1`) has a group
//! form (`group_node`): a block of 16 outputs then takes 16 lanes instead of one thread's serial
//! chain of ~1,000 instructions.
template <int G>
struct lane_group {
  static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0,
                "quads: a lane group is a power of two of at most 32 lanes");
  static constexpr int size = G;
  int rank;
  unsigned mask;
  //! The group of warp lane `lane` (groups are aligned runs of G lanes).
  QUADS_API static constexpr lane_group of_lane(int lane) noexcept {
    return {lane % G, G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (lane & ~(G - 1))};
  }
};

//! A block node's group form: `template <int W, int G> static fragment<W> apply_group(const
//! fragment<W>&, const params&, lane_group<G>)` for `W = 1`, `G = min_width`: each lane holds
//! one output column of the block, every lane of the group calls it together, and it writes the
//! same bytes as `apply` on the whole block. Device code only (it shuffles).
template <class N>
concept group_node = detail::has_params<N> && requires(const fragment<1>& f,
                                                       const typename N::params& p,
                                                       lane_group<detail::min_width_of<N>()> g) {
  N::template apply_group<1, detail::min_width_of<N>()>(f, p, g);
};

//! Lanes per fragment with which GEMM epilogues run `N` (1: one thread per fragment). Chains
//! say so through `lane_group_size`.
template <class N>
inline constexpr int lane_group_size = [] {
  if constexpr (requires { N::lane_group_size; }) return N::lane_group_size;
  else return 1;
}();

//! A composable epilogue step (see the file comment for the requirements).
template <class N>
concept epilogue_node =
    detail::has_arguments<N> && detail::has_params<N> && detail::has_trivial_params<N> &&
    detail::has_to_params<N> && (detail::has_element_apply<N> || detail::has_fragment_apply<N>);

//! Names the first requirement of `epilogue_node` that `N` misses, as a readable error. Use it in
//! a `static_assert` where a node enters (chains and GEMM launchers do).
template <class N>
consteval bool check_epilogue_node() {
  static_assert(detail::has_arguments<N>,
                "quads: epilogue node lacks `struct arguments` (its host-side settings)");
  static_assert(detail::has_params<N>,
                "quads: epilogue node lacks `struct params` (what the kernel receives)");
  if constexpr (detail::has_params<N>) {
    static_assert(detail::has_trivial_params<N>,
                  "quads: epilogue node `params` must be trivially copyable: it is passed to the "
                  "kernel by value");
    if constexpr (detail::has_arguments<N>)
      static_assert(detail::has_to_params<N>,
                    "quads: epilogue node lacks `static params to_params(const arguments&)`");
    static_assert(detail::has_element_apply<N> || detail::has_fragment_apply<N>,
                  "quads: epilogue node lacks `apply`: an element node needs `static float "
                  "apply(float value, int row, int col, const params&)`, a fragment node "
                  "`template <int W> static fragment<...> apply(const fragment<W>&, const "
                  "params&)`");
  }
  static_assert(detail::width_divisor_of<N>() >= 1 && detail::min_width_of<N>() >= 1,
                "quads: epilogue node width_divisor and min_width must be >= 1");
  return true;
}

//! Applies one node to a fragment: element nodes to every valid value, fragment nodes as they are.
template <class N, int W>
QUADS_API constexpr auto apply_node(const fragment<W>& f, const typename N::params& p) {
  if constexpr (detail::has_fragment_apply<N>) {
    return N::apply(f, p);
  } else {
    fragment<W> g = f;
    for (int i = 0; i < W; ++i)
      if (i < f.count) g.v[i] = static_cast<float>(N::apply(f.v[i], f.row, f.col + i, p));
    return g;
  }
}

//! Calls the node's optional argument check.
template <class N>
const char* check_arguments(const typename N::arguments& a, int rows, int cols) {
  if constexpr (requires { N::check(a, rows, cols); }) return N::check(a, rows, cols);
  else return nullptr;
}

} // namespace quads::epilogue
