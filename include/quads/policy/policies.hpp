// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Fake-quant policies of the trainer (`no_fake_quant`, `weight_only`, `w4a4`) and the
//! `fake_quant_policy` concept.
//!
//! A policy says which operands of a linear layer the trainer fake-quantizes, with which
//! quantizer (`block_quantizer<Format, Options>`, the one QDQ path the rollout also uses), and
//! which straight-through rule carries the gradient back to the master values:
//!
//! | policy | forward | dx | dW |
//! | --- | --- | --- | --- |
//! | `no_fake_quant` | `x W^T` | `dy W` | `dy^T x` |
//! | `weight_only<F, O, Ste>` (QUADS, W4A16) | `x QDQ(W)^T` | `dy QDQ(W)` | `Ste(dy^T x)` |
//! | `w4a4<F, OW, OA, Ste>` | `QDQ(x) QDQ(W)^T` | `Ste(dy QDQ(W))` | `Ste(dy^T QDQ(x))` |
//!
//! (`+ bias` in the forward, `dbias = sum over rows of dy`.) Callers read the static members:
//! `quantizes_weights`, `quantizes_activations`, `weight_quantizer`, `activation_quantizer`
//! (`no_quantizer` when an operand is left alone), `weight_gradient`, `activation_gradient`
//! (STE rules, `straight_through_estimator`), and `name`.
#pragma once

#include <quads/config.hpp>

#include <quads/policy/ste.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/options.hpp>
#include <quads/scheme/schemes.hpp>

#include <concepts>
#include <type_traits>

namespace quads {

//! The quantizer slot of an operand a policy does not fake-quantize.
struct no_quantizer {};

//! True for `block_quantizer<Format, Options>` specializations.
template <class T>
inline constexpr bool is_block_quantizer = false;
template <class Format, quant_options Options>
inline constexpr bool is_block_quantizer<block_quantizer<Format, Options>> = true;

//! Activation options of `w4a4` by default: TE-exact numerics with one tensor scale per row
//! (per token), as W4A4 rollout engines quantize activations.
inline constexpr quant_options per_row_options{.global = global_scale::per_row};

//! BF16 baseline: nothing is fake-quantized.
struct no_fake_quant {
  static constexpr const char* name = "bf16";
  static constexpr bool quantizes_weights = false;
  static constexpr bool quantizes_activations = false;
  using weight_quantizer = no_quantizer;
  using activation_quantizer = no_quantizer;
  using weight_gradient = ste::identity;
  using activation_gradient = ste::identity;
};

//! Asymmetric QAT (QUADS' trainer, "W4A16 QAT"): weights go through `QDQ` with exactly the
//! rollout's quantizer, activations stay in the trainer's precision.
//! Requirements: `Format` satisfies `block_scaled_format`; `Ste` `straight_through_estimator`.
template <class Format, quant_options Options = quant_options{}, class Ste = ste::identity>
struct weight_only {
  static_assert(check_straight_through_estimator<Ste>());
  static constexpr const char* name = "weight_only";
  static constexpr bool quantizes_weights = true;
  static constexpr bool quantizes_activations = false;
  using weight_quantizer = block_quantizer<Format, Options>;
  using activation_quantizer = no_quantizer;
  using weight_gradient = Ste;
  using activation_gradient = ste::identity;
};

//! Symmetric W4A4 QAT, for comparison: weights and activations both go through `QDQ`
//! (activations with `ActOptions`, by default one scale per row), one STE rule for both.
template <class Format, quant_options WeightOptions = quant_options{},
          quant_options ActOptions = per_row_options, class Ste = ste::identity>
struct w4a4 {
  static_assert(check_straight_through_estimator<Ste>());
  static constexpr const char* name = "w4a4";
  static constexpr bool quantizes_weights = true;
  static constexpr bool quantizes_activations = true;
  using weight_quantizer = block_quantizer<Format, WeightOptions>;
  using activation_quantizer = block_quantizer<Format, ActOptions>;
  using weight_gradient = Ste;
  using activation_gradient = Ste;
};

namespace detail {
template <class P>
concept policy_has_name = requires {
  { P::name } -> std::convertible_to<const char*>;
};
template <class P>
concept policy_has_quantizes_weights = requires {
  { P::quantizes_weights } -> std::convertible_to<bool>;
};
template <class P>
concept policy_has_quantizes_activations = requires {
  { P::quantizes_activations } -> std::convertible_to<bool>;
};
template <class P>
concept policy_has_weight_quantizer = requires { typename P::weight_quantizer; };
template <class P>
concept policy_has_activation_quantizer = requires { typename P::activation_quantizer; };
template <class P>
concept policy_has_weight_gradient = requires { typename P::weight_gradient; };
template <class P>
concept policy_has_activation_gradient = requires { typename P::activation_gradient; };

//! The quantizer slot matches the flag: a `block_quantizer` when set, `no_quantizer` when not.
template <class Q, bool Quantizes>
inline constexpr bool quantizer_slot_ok =
    Quantizes ? is_block_quantizer<Q> : std::is_same_v<Q, no_quantizer>;
} // namespace detail

//! A trainer fake-quant policy.
//! Requirements: `static constexpr const char* name`; `static constexpr bool quantizes_weights`
//! and `quantizes_activations`; `using weight_quantizer` and `activation_quantizer`, each a
//! `block_quantizer<Format, Options>` when the matching flag is true and `no_quantizer` when it
//! is false; `using weight_gradient` and `activation_gradient`, each a
//! `straight_through_estimator`.
template <class P>
concept fake_quant_policy =
    detail::policy_has_name<P> && detail::policy_has_quantizes_weights<P> &&
    detail::policy_has_quantizes_activations<P> && detail::policy_has_weight_quantizer<P> &&
    detail::policy_has_activation_quantizer<P> && detail::policy_has_weight_gradient<P> &&
    detail::policy_has_activation_gradient<P> &&
    detail::quantizer_slot_ok<typename P::weight_quantizer, P::quantizes_weights> &&
    detail::quantizer_slot_ok<typename P::activation_quantizer, P::quantizes_activations> &&
    straight_through_estimator<typename P::weight_gradient> &&
    straight_through_estimator<typename P::activation_gradient>;

//! Names the first requirement of `fake_quant_policy` that `P` misses, as a readable error.
//! Use it as `static_assert(quads::check_fake_quant_policy<MyPolicy>());`.
template <class P>
consteval bool check_fake_quant_policy() {
  static_assert(detail::policy_has_name<P>,
                "quads: fake-quant policy lacks `static constexpr const char* name`");
  static_assert(detail::policy_has_quantizes_weights<P>,
                "quads: fake-quant policy lacks `static constexpr bool quantizes_weights`");
  static_assert(detail::policy_has_quantizes_activations<P>,
                "quads: fake-quant policy lacks `static constexpr bool quantizes_activations`");
  static_assert(detail::policy_has_weight_quantizer<P>,
                "quads: fake-quant policy lacks `using weight_quantizer = block_quantizer<F, O> "
                "or no_quantizer`");
  static_assert(detail::policy_has_activation_quantizer<P>,
                "quads: fake-quant policy lacks `using activation_quantizer = "
                "block_quantizer<F, O> or no_quantizer`");
  static_assert(detail::policy_has_weight_gradient<P>,
                "quads: fake-quant policy lacks `using weight_gradient = <STE rule>` "
                "(e.g. quads::ste::identity)");
  static_assert(detail::policy_has_activation_gradient<P>,
                "quads: fake-quant policy lacks `using activation_gradient = <STE rule>` "
                "(e.g. quads::ste::identity)");
  if constexpr (detail::policy_has_quantizes_weights<P> && detail::policy_has_weight_quantizer<P>) {
    static_assert(detail::quantizer_slot_ok<typename P::weight_quantizer, P::quantizes_weights>,
                  "quads: weight_quantizer must be block_quantizer<F, O> when quantizes_weights "
                  "is true, and no_quantizer when it is false");
  }
  if constexpr (detail::policy_has_quantizes_activations<P> &&
                detail::policy_has_activation_quantizer<P>) {
    static_assert(
        detail::quantizer_slot_ok<typename P::activation_quantizer, P::quantizes_activations>,
        "quads: activation_quantizer must be block_quantizer<F, O> when quantizes_activations "
        "is true, and no_quantizer when it is false");
  }
  if constexpr (detail::policy_has_weight_gradient<P>) {
    static_assert(straight_through_estimator<typename P::weight_gradient>,
                  "quads: weight_gradient is not a straight_through_estimator (needs name, "
                  "needs_multiplier, factor(x, multiplier))");
  }
  if constexpr (detail::policy_has_activation_gradient<P>) {
    static_assert(straight_through_estimator<typename P::activation_gradient>,
                  "quads: activation_gradient is not a straight_through_estimator (needs name, "
                  "needs_multiplier, factor(x, multiplier))");
  }
  return true;
}

static_assert(fake_quant_policy<no_fake_quant>);
static_assert(fake_quant_policy<weight_only<nvfp4>> && fake_quant_policy<w4a4<nvfp4>>);

} // namespace quads
