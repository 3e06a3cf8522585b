// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief `chain<Nodes...>`: epilogue nodes applied left to right; a chain is itself a node.
//!
//! Overview: `chain<scale_alpha, bias<bf16_t>, store<bf16_t>>` scales the accumulator, adds a
//! bias and stores bf16. Its `arguments` is a flat aggregate with one member per node, in order:
//! @code
//!   using epi = quads::epilogue::chain<scale_alpha, bias<float>, store<float>>;
//!   epi::arguments args{{.alpha = 1.0f, .a = a_scales, .a_mode = scale_source::tensor},
//!                       {bias_ptr},
//!                       {out_ptr, ldo}};
//!   auto p = epi::to_params(args);     // trivially copyable; what the kernel receives
//! @endcode
//! `get<I>(args)` / `get<I>(params)` reach the I-th node's part. A chain's width facts are
//! derived from its nodes: `input_width` is the number of input columns a fragment must be a
//! multiple of (e.g. 32 for SwiGLU followed by an NVFP4 quantize-output: 16 output columns per
//! block, two inputs per output).
#pragma once

#include <quads/config.hpp>

#include <quads/epilogue/fragment.hpp>
#include <quads/epilogue/node.hpp>

#include <cuda/std/cstddef>
#include <cuda/std/utility>

namespace quads::epilogue {

namespace detail {

template <::cuda::std::size_t I, class T>
struct leaf {
  T value;
};

template <class Seq, class... T>
struct pack_impl;
template <::cuda::std::size_t... I, class... T>
struct pack_impl<::cuda::std::index_sequence<I...>, T...> : leaf<I, T>... {
  pack_impl() = default;
  //! One argument per element, so `{{.alpha = 2.0f}, {bias_ptr}}` works (designated
  //! initializers included), without the nested braces of an aggregate of aggregates.
  constexpr pack_impl(const T&... v)
    requires(sizeof...(T) > 0)
      : leaf<I, T>{v}... {}
};

//! `T...` side by side (trivially copyable when every `T` is), built from one value per element.
template <class... T>
using pack = pack_impl<::cuda::std::make_index_sequence<sizeof...(T)>, T...>;

template <::cuda::std::size_t I, class... T>
struct type_at;
template <class H, class... T>
struct type_at<0, H, T...> {
  using type = H;
};
template <::cuda::std::size_t I, class H, class... T>
struct type_at<I, H, T...> : type_at<I - 1, T...> {};

} // namespace detail

//! The I-th element of a chain's `arguments` or `params`.
template <::cuda::std::size_t I, class T>
QUADS_API constexpr T& get(detail::leaf<I, T>& l) noexcept {
  return l.value;
}
template <::cuda::std::size_t I, class T>
QUADS_API constexpr const T& get(const detail::leaf<I, T>& l) noexcept {
  return l.value;
}

//! Epilogue nodes applied in order. Requirements: every node satisfies `epilogue_node`; a node
//! that reads the residual accumulator (`rac_residual`) comes before any width-changing node.
template <class... Nodes>
struct chain {
  static_assert((check_epilogue_node<Nodes>() && ...));

  using arguments = detail::pack<typename Nodes::arguments...>;
  using params = detail::pack<typename Nodes::params...>;

  static constexpr int size = static_cast<int>(sizeof...(Nodes));
  static constexpr int width_divisor = (detail::width_divisor_of<Nodes>() * ... * 1);
  static constexpr bool reads_residual = (detail::reads_residual_of<Nodes>() || ...);
  static constexpr bool element_wise = (detail::is_element_wise<Nodes>() && ...);

private:
  static consteval int compute_input_width() {
    const int mins[] = {detail::min_width_of<Nodes>()..., 1};
    const int divs[] = {detail::width_divisor_of<Nodes>()..., 1};
    int req = 1;
    for (int i = size - 1; i >= 0; --i) req = detail::lcm(req, mins[i]) * divs[i];
    return req;
  }
  static consteval bool residual_before_width_change() {
    const bool res[] = {detail::reads_residual_of<Nodes>()..., false};
    const int divs[] = {detail::width_divisor_of<Nodes>()..., 1};
    bool narrowed = false;
    for (int i = 0; i < size; ++i) {
      if (res[i] && narrowed) return false;
      narrowed = narrowed || divs[i] != 1;
    }
    return true;
  }

public:
  //! Input columns per fragment must be a multiple of this.
  static constexpr int input_width = compute_input_width();
  static constexpr int min_width = input_width / width_divisor;

private:
  // Lanes per fragment: the output block width when every block node has a group form, sees
  // one column per lane (every width-changing node before it) and the block fits a warp.
  static consteval int compute_lane_group() {
    constexpr int G = min_width;
    if constexpr (G == 1 || G > 32 || (G & (G - 1)) != 0 || element_wise) {
      return 1;
    } else {
      const int mins[] = {detail::min_width_of<Nodes>()..., 1};
      const int divs[] = {detail::width_divisor_of<Nodes>()..., 1};
      const bool group[] = {group_node<Nodes>..., true};
      int narrowed = 1;
      for (int i = 0; i < size; ++i) {
        if (mins[i] > 1 && (mins[i] != G || !group[i] || narrowed != width_divisor)) return 1;
        narrowed *= divs[i];
      }
      return G;
    }
  }

public:
  //! Lanes that run one fragment of `input_width` columns together (`apply_group`), or 1.
  static constexpr int lane_group_size = compute_lane_group();

  static_assert(residual_before_width_change(),
                "quads: rac_residual reads the residual accumulator column by column; put it "
                "before width-changing nodes such as swiglu");

  static params to_params(const arguments& a) {
    params p{};
    assign(p, a, ::cuda::std::make_index_sequence<sizeof...(Nodes)>{});
    return p;
  }

  template <int W>
  QUADS_API static constexpr auto apply(const fragment<W>& f, const params& p) {
    return apply_from<0>(f, p);
  }

  //! One lane's part of a fragment run by `lane_group_size` lanes together (`W = width_divisor`
  //! input columns each): block nodes through their group form, the others as in `apply`. Every
  //! lane of the group calls it together (device code).
  //! (Constrained rather than asserted, so that `group_node` of a chain nested in another chain
  //! is false instead of an error when the nested chain has no group form.)
  template <int W, int G>
    requires(G == lane_group_size && G > 1 && W == width_divisor)
  QUADS_API static constexpr fragment<W / width_divisor> apply_group(const fragment<W>& f,
                                                                     const params& p,
                                                                     lane_group<G> g) {
    return group_from<0>(f, p, g);
  }

  //! The nodes' argument checks in order, for an input of `rows x cols`; nullptr if all pass.
  static const char* check(const arguments& a, int rows, int cols) {
    if (cols % input_width != 0)
      return "quads: the epilogue needs the GEMM's output columns (N) to be a multiple of its "
             "input width (SwiGLU pairs, quantize-output blocks)";
    return check_from<0>(a, rows, cols);
  }

private:
  template <::cuda::std::size_t... I>
  static void assign(params& p, const arguments& a, ::cuda::std::index_sequence<I...>) {
    ((get<I>(p) = Nodes::to_params(get<I>(a))), ...);
  }

  template <::cuda::std::size_t I, int W>
  QUADS_API static constexpr auto apply_from(const fragment<W>& f, const params& p) {
    if constexpr (I == sizeof...(Nodes)) {
      return f;
    } else {
      using node = typename detail::type_at<I, Nodes...>::type;
      return apply_from<I + 1>(apply_node<node>(f, get<I>(p)), p);
    }
  }

  template <::cuda::std::size_t I, int W, int G>
  QUADS_API static constexpr auto group_from(const fragment<W>& f, const params& p,
                                             lane_group<G> g) {
    if constexpr (I == sizeof...(Nodes)) {
      return f;
    } else {
      using node = typename detail::type_at<I, Nodes...>::type;
      if constexpr (detail::min_width_of<node>() > 1)
        return group_from<I + 1>(node::template apply_group<W, G>(f, get<I>(p), g), p, g);
      else
        return group_from<I + 1>(apply_node<node>(f, get<I>(p)), p, g);
    }
  }

  template <::cuda::std::size_t I>
  static const char* check_from(const arguments& a, int rows, int cols) {
    if constexpr (I == sizeof...(Nodes)) {
      return nullptr;
    } else {
      using node = typename detail::type_at<I, Nodes...>::type;
      if (const char* m = check_arguments<node>(get<I>(a), rows, cols)) return m;
      return check_from<I + 1>(a, rows, cols / detail::width_divisor_of<node>());
    }
  }
};

} // namespace quads::epilogue
