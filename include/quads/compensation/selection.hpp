// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief RAC channel selection: statistics, the `channel_selector` concept, three selectors,
//!        the selected-count rule and the optional channel permutation (host-only).
//!
//! Overview: residual activation compensation (RAC) quantizes the residual `x - QDQ(x)` of a set
//! `S` of activation channels a second time. This header decides `S` from calibration statistics:
//! - a selector scores each channel (`by_quant_error`: sum of squared QDQ errors, the default;
//!   `by_max_abs`: max |x|, ARCQuant's choice; `random_channels`: a seeded control);
//! - `select_channels` keeps `selected_count(ratio, K)` channels, laid out so that `S` is a union
//! of
//!   whole quantization blocks of the (possibly permuted) K axis. That is what lets both RAC
//!   compositions reuse whole weight blocks (see `docs/rac.md`):
//!   - `permutation::none`: no reordering; the selector scores blocks, and the top blocks are kept;
//!   - `permutation::selected_to_end`: the top channels move to the end of K (the others keep their
//!     order); applied to the weight's columns offline and to the activations online;
//!   - `permutation::sorted`: every channel sorted by ascending score (ARCQuant's reorder), so the
//!     selected channels are the last ones and blocks group channels of similar score.
//! Ties in a ranking are broken by the lower channel (or block) index; a NaN score ranks as +Inf.
#pragma once

#include <quads/config.hpp>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace quads::compensation {

// ---------------------------------------------------------------------------------------------
// Selected count
// ---------------------------------------------------------------------------------------------

//! Number of compensated channels for `ratio` of `channels` in blocks of `block_size`:
//! `ratio * channels / block_size` rounded to the nearest integer (halves away from zero), at
//! least one block when `ratio > 0`, at most all blocks; times `block_size`.
//! Throws `std::invalid_argument` unless `channels % block_size == 0`, `block_size > 0` and
//! `0 <= ratio <= 1`.
inline int selected_count(double ratio, int channels, int block_size = 16) {
  if (block_size <= 0 || channels < 0 || channels % block_size != 0)
    throw std::invalid_argument("quads: RAC needs K (" + std::to_string(channels) +
                                ") to be a non-negative multiple of the block size " +
                                std::to_string(block_size));
  if (!(ratio >= 0.0 && ratio <= 1.0))
    throw std::invalid_argument("quads: RAC ratio must lie in [0, 1]");
  const long blocks = channels / block_size;
  long n = std::lround(ratio * static_cast<double>(channels) / block_size);
  if (ratio > 0.0 && n < 1) n = 1;
  n = std::min(n, blocks);
  return static_cast<int>(n * block_size);
}

// ---------------------------------------------------------------------------------------------
// Statistics and selectors
// ---------------------------------------------------------------------------------------------

//! Per-channel calibration statistics (of the unpermuted K axis), as `calibrator` accumulates them.
struct channel_statistics {
  std::vector<double> sq_error; //!< sum over tokens of (x - QDQ(x))^2, per channel
  std::vector<double> max_abs;  //!< max |x| per channel (NaN ignored)
  double tokens = 0.0;          //!< rows observed (decayed like the sums)

  channel_statistics() = default;
  explicit channel_statistics(int channels)
      : sq_error(static_cast<std::size_t>(channels), 0.0),
        max_abs(static_cast<std::size_t>(channels), 0.0) {}
  int channels() const noexcept { return static_cast<int>(sq_error.size()); }
};

//! A channel selection policy.
//! Requirements: `channel_scores(stats)` returns one score per channel (higher = more in need of
//! compensation); `block_score(scores_of_one_block)` folds the scores of one block's channels into
//! the block's score (used when channels are not permuted); `name` is a string.
template <class S>
concept channel_selector = requires(const S& s, const channel_statistics& st,
                                    std::span<const double> block) {
  { s.channel_scores(st) } -> std::same_as<std::vector<double>>;
  { s.block_score(block) } -> std::convertible_to<double>;
  { S::name } -> std::convertible_to<const char*>;
};

//! Names the first missing requirement of `channel_selector` in a `static_assert`.
template <class S>
constexpr bool check_channel_selector() {
  static_assert(
      requires(const S& s, const channel_statistics& st) {
        { s.channel_scores(st) } -> std::same_as<std::vector<double>>;
      },
      "quads: a channel_selector needs `std::vector<double> channel_scores(const "
      "channel_statistics&) const`");
  static_assert(
      requires(const S& s, std::span<const double> b) {
        { s.block_score(b) } -> std::convertible_to<double>;
      },
      "quads: a channel_selector needs `double block_score(std::span<const double>) const`");
  static_assert(
      requires {
        { S::name } -> std::convertible_to<const char*>;
      },
      "quads: a channel_selector needs `static constexpr const char* name`");
  return true;
}

//! Default: rank by calibration quantization error, sum over tokens of (x - QDQ(x))^2. A block's
//! score is the sum over its channels (its total squared error, additive).
struct by_quant_error {
  static constexpr const char* name = "quant_error";
  std::vector<double> channel_scores(const channel_statistics& st) const { return st.sq_error; }
  double block_score(std::span<const double> s) const {
    return std::accumulate(s.begin(), s.end(), 0.0);
  }
};

//! ARCQuant's rule: rank by calibration max |x|. A block's score is its largest channel score.
struct by_max_abs {
  static constexpr const char* name = "max_abs";
  std::vector<double> channel_scores(const channel_statistics& st) const { return st.max_abs; }
  double block_score(std::span<const double> s) const {
    double m = 0.0;
    for (double v : s)
      m = std::fmax(m, v);
    return m;
  }
};

//! Control: uniform random scores from `seed` (SplitMix64 of seed and channel index), so the
//! same seed selects the same channels on every machine.
struct random_channels {
  static constexpr const char* name = "random";
  std::uint64_t seed = 0;
  std::vector<double> channel_scores(const channel_statistics& st) const {
    std::vector<double> s(static_cast<std::size_t>(st.channels()));
    for (std::size_t k = 0; k < s.size(); ++k) {
      std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (k + 1);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      s[k] = static_cast<double>(z >> 11) * 0x1.0p-53;
    }
    return s;
  }
  double block_score(std::span<const double> s) const {
    return std::accumulate(s.begin(), s.end(), 0.0);
  }
};

static_assert(check_channel_selector<by_quant_error>() && channel_selector<by_quant_error>);
static_assert(channel_selector<by_max_abs> && channel_selector<random_channels>);

// ---------------------------------------------------------------------------------------------
// Selection
// ---------------------------------------------------------------------------------------------

//! How the K axis is laid out around the selected channels (see the file comment).
enum class permutation : std::uint8_t { none, selected_to_end, sorted };

inline const char* to_string(permutation p) noexcept {
  switch (p) {
  case permutation::none:
    return "none";
  case permutation::selected_to_end:
    return "selected_to_end";
  case permutation::sorted:
    return "sorted";
  }
  return "?";
}

//! The outcome of selection: a K-axis order and the selected blocks of that axis.
//! `order[k']` is the original channel at position `k'` of the permuted axis (the identity for
//! `permutation::none`). `blocks` lists the selected blocks of the permuted axis in ascending
//! order; residual block `j` of the augmented operand compensates block `blocks[j]`.
struct channel_selection {
  int channels = 0;    //!< K
  int block_size = 16; //!< B
  int selected = 0;    //!< |S|, a multiple of B
  permutation perm = permutation::none;
  std::vector<int> order;
  std::vector<int> blocks;

  int blocks_per_row() const noexcept { return channels / block_size; }
  int selected_blocks() const noexcept { return selected / block_size; }
  //! K' = K + |S|, the reduction length of the augmented operands.
  int augmented_channels() const noexcept { return channels + selected; }
  bool permuted() const noexcept { return perm != permutation::none; }

  //! Per block of the permuted axis: its residual block index `j`, or -1 if not selected.
  std::vector<int> slot_table() const {
    std::vector<int> slot(static_cast<std::size_t>(blocks_per_row()), -1);
    for (std::size_t j = 0; j < blocks.size(); ++j)
      slot[static_cast<std::size_t>(blocks[j])] = static_cast<int>(j);
    return slot;
  }
  //! The selected original channels, in residual order (residual column `K + i` holds
  //! channel `selected_channels()[i]`).
  std::vector<int> selected_channels() const {
    std::vector<int> s;
    s.reserve(static_cast<std::size_t>(selected));
    for (int b : blocks)
      for (int i = 0; i < block_size; ++i)
        s.push_back(order[static_cast<std::size_t>(b * block_size + i)]);
    return s;
  }

  //! Checks the invariants (throws `std::invalid_argument` naming the broken one).
  void validate() const {
    if (block_size <= 0 || channels < 0 || channels % block_size != 0)
      throw std::invalid_argument(
          "quads: channel_selection: K must be a multiple of the block size");
    if (order.size() != static_cast<std::size_t>(channels))
      throw std::invalid_argument("quads: channel_selection: order must have K entries");
    std::vector<char> seen(order.size(), 0);
    for (int c : order) {
      if (c < 0 || c >= channels || seen[static_cast<std::size_t>(c)])
        throw std::invalid_argument(
            "quads: channel_selection: order is not a permutation of 0..K-1");
      seen[static_cast<std::size_t>(c)] = 1;
    }
    if (!permuted())
      for (int k = 0; k < channels; ++k)
        if (order[static_cast<std::size_t>(k)] != k)
          throw std::invalid_argument(
              "quads: channel_selection: permutation::none needs the identity order");
    if (selected != static_cast<int>(blocks.size()) * block_size)
      throw std::invalid_argument("quads: channel_selection: selected must equal |blocks| * B");
    for (std::size_t j = 0; j < blocks.size(); ++j) {
      if (blocks[j] < 0 || blocks[j] >= blocks_per_row() || (j > 0 && blocks[j] <= blocks[j - 1]))
        throw std::invalid_argument(
            "quads: channel_selection: blocks must be ascending block indices");
    }
  }
};

namespace detail {

//! Indices sorted by descending score, ties by ascending index, NaN as +Inf (a strict weak order).
inline std::vector<int> rank_descending(const std::vector<double>& score) {
  std::vector<int> idx(score.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto key = [&](int i) {
    const double s = score[static_cast<std::size_t>(i)];
    return std::isnan(s) ? std::numeric_limits<double>::infinity() : s;
  };
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return key(a) > key(b); });
  return idx;
}

} // namespace detail

//! Selects `selected_count(ratio, K, block_size)` channels from `stats` with `selector`, laid out
//! as `perm` says. Throws `std::invalid_argument` on a bad ratio or K, or when the selector returns
//! the wrong number of scores.
template <channel_selector Selector>
channel_selection select_channels(const Selector& selector, const channel_statistics& stats,
                                  double ratio, permutation perm = permutation::none,
                                  int block_size = 16) {
  const int K = stats.channels();
  channel_selection sel;
  sel.channels = K;
  sel.block_size = block_size;
  sel.perm = perm;
  sel.selected = selected_count(ratio, K, block_size);
  const std::vector<double> score = selector.channel_scores(stats);
  if (score.size() != static_cast<std::size_t>(K))
    throw std::invalid_argument("quads: channel_selector returned " + std::to_string(score.size()) +
                                " scores for " + std::to_string(K) + " channels");
  const int nkb = K / block_size;
  const int nsel = sel.selected / block_size;
  sel.order.resize(static_cast<std::size_t>(K));
  switch (perm) {
  case permutation::none: {
    std::iota(sel.order.begin(), sel.order.end(), 0);
    std::vector<double> bscore(static_cast<std::size_t>(nkb));
    for (int b = 0; b < nkb; ++b)
      bscore[static_cast<std::size_t>(b)] =
          static_cast<double>(selector.block_score(std::span<const double>(score).subspan(
              static_cast<std::size_t>(b) * block_size, static_cast<std::size_t>(block_size))));
    const std::vector<int> rank = detail::rank_descending(bscore);
    sel.blocks.assign(rank.begin(), rank.begin() + nsel);
    std::sort(sel.blocks.begin(), sel.blocks.end());
    break;
  }
  case permutation::selected_to_end: {
    const std::vector<int> rank = detail::rank_descending(score);
    std::vector<char> chosen(static_cast<std::size_t>(K), 0);
    for (int i = 0; i < sel.selected; ++i)
      chosen[static_cast<std::size_t>(rank[static_cast<std::size_t>(i)])] = 1;
    std::size_t p = 0;
    for (int k = 0; k < K; ++k)
      if (!chosen[static_cast<std::size_t>(k)]) sel.order[p++] = k;
    for (int k = 0; k < K; ++k)
      if (chosen[static_cast<std::size_t>(k)]) sel.order[p++] = k;
    break;
  }
  case permutation::sorted: {
    const std::vector<int> rank = detail::rank_descending(score);
    std::reverse_copy(rank.begin(), rank.end(), sel.order.begin());
    break;
  }
  }
  if (perm != permutation::none)
    for (int j = 0; j < nsel; ++j)
      sel.blocks.push_back(nkb - nsel + j);
  return sel;
}

//! A selection of the given blocks of the unpermuted axis (a fixed, user-chosen set).
inline channel_selection select_blocks(int channels, std::vector<int> blocks, int block_size = 16) {
  channel_selection sel;
  sel.channels = channels;
  sel.block_size = block_size;
  sel.order.resize(static_cast<std::size_t>(channels > 0 ? channels : 0));
  std::iota(sel.order.begin(), sel.order.end(), 0);
  std::sort(blocks.begin(), blocks.end());
  sel.blocks = std::move(blocks);
  sel.selected = static_cast<int>(sel.blocks.size()) * block_size;
  sel.validate();
  return sel;
}

} // namespace quads::compensation
