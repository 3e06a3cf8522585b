// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief RAC calibration statistics: the per-block accumulation step (host + device) and the host
//!        `calibrator` that accumulates per-channel statistics over batches.
//!
//! Statistics of a batch `x` (`[rows, K]`, unpermuted) under `Quantizer` (always with
//! round-to-nearest-even, see `nearest_twin`), in an order fixed so that the GPU launcher
//! (`compensation/rac.cuh`) produces the same doubles bit for bit:
//! 1. tensor scale as the quantizer's options say: `per_tensor` from the batch amax, `per_row`
//!    from each row's amax, `given` from the caller;
//! 2. rows are cut into chunks of `calibration_chunk_rows` (64); per chunk and channel an fp32
//!    partial sum of `(x - QDQ(x))^2` over the chunk's rows in row order (explicitly rounded
//!    multiply and add, no FMA) and an fp32 max of |x| (NaN ignored);
//! 3. per channel, the chunk partials are added to the running fp64 sums in chunk order; max_abs
//!    takes the fp64 max (NaN ignored); `tokens += rows`.
//! `decay(d)` multiplies every sum, every max and `tokens` by `d` in fp64 (an exponential
//! forgetting for refreshing the selection during RL: `d = 0` is a reset, `d = 1` keeps all).
//! Non-finite inputs make that channel's error non-finite; selection ranks NaN as +Inf.
#pragma once

#include <quads/config.hpp>

#include <quads/compensation/residual.hpp>
#include <quads/compensation/selection.hpp>
#include <quads/detail/float_bits.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/options.hpp>
#include <quads/quant/tensor_scale.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace quads::compensation {

//! Rows per chunk of the fixed-order fp32 partial sums (see the file comment).
inline constexpr int calibration_chunk_rows = 64;

//! Adds one block's squared QDQ errors to `err` and its |x| to `mx` (step 2 of the file comment).
template <class Quantizer>
QUADS_API constexpr void accumulate_block_statistics(const float (&x)[Quantizer::block_size],
                                                     tensor_scale ts,
                                                     float (&err)[Quantizer::block_size],
                                                     float (&mx)[Quantizer::block_size]) noexcept {
  using Q = nearest_twin<Quantizer>;
  constexpr int B = Quantizer::block_size;
  const auto q = Q::quantize(x, ts);
  for (int i = 0; i < B; ++i) {
    const float d = ::quads::detail::add_rn(x[i], -Q::decode(Q::code_at(q, i), q.scale, ts));
    err[i] = ::quads::detail::add_rn(err[i], ::quads::detail::mul_rn(d, d));
    mx[i] = ::quads::detail::max_num(mx[i], ::quads::detail::abs_bits(x[i]));
  }
}

//! Host calibrator: accumulates `channel_statistics` over calibration batches.
//! Example:
//! @code
//!   quads::compensation::calibrator<quads::block_quantizer<quads::nvfp4>> cal(K);
//!   for (auto& batch : batches) cal.observe(batch, rows);
//!   auto sel = quads::compensation::select_channels(quads::compensation::by_quant_error{},
//!                                                   cal.statistics(), 0.5);
//! @endcode
template <class Quantizer>
class calibrator {
public:
  using quantizer = Quantizer;
  using format = typename Quantizer::format;
  static constexpr int block_size = Quantizer::block_size;

  //! Throws `std::invalid_argument` unless `channels` is a positive multiple of the block size.
  explicit calibrator(int channels) : stats_(channels) {
    if (channels <= 0 || channels % block_size != 0)
      throw std::invalid_argument("quads: calibrator needs K to be a positive multiple of " +
                                  std::to_string(block_size));
  }

  //! Accumulates a batch `x` (`[rows, K]` row-major, unpermuted). `given` supplies the tensor
  //! scale when the options say `global_scale::given` (ignored otherwise). Throws on a bad shape.
  void observe(std::span<const float> x, int rows, tensor_scale given = {}) {
    const int K = stats_.channels();
    if (rows < 0 || x.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(K))
      throw std::invalid_argument("quads: calibrator::observe: x must hold rows * K values");
    constexpr quant_options O = Quantizer::options;
    tensor_scale ts = given;
    if constexpr (format::has_tensor_scale && O.global == global_scale::per_tensor)
      ts = make_tensor_scale<format, O>(
          block_quantizer<format, O>::amax(x.data(), static_cast<int>(x.size())));
    else if constexpr (!format::has_tensor_scale)
      ts = tensor_scale{};
    constexpr int B = block_size;
    const int nkb = K / B;
    std::vector<float> err(static_cast<std::size_t>(K)), mx(static_cast<std::size_t>(K));
    for (int c0 = 0; c0 < rows; c0 += calibration_chunk_rows) {
      std::fill(err.begin(), err.end(), 0.0f);
      std::fill(mx.begin(), mx.end(), 0.0f);
      const int c1 = std::min(rows, c0 + calibration_chunk_rows);
      for (int r = c0; r < c1; ++r) {
        const float* row = x.data() + static_cast<std::size_t>(r) * K;
        tensor_scale tr = ts;
        if constexpr (format::has_tensor_scale && O.global == global_scale::per_row)
          tr = make_tensor_scale<format, O>(block_quantizer<format, O>::amax(row, K));
        for (int kb = 0; kb < nkb; ++kb) {
          float v[B], e[B], m[B];
          for (int i = 0; i < B; ++i) {
            v[i] = row[kb * B + i];
            e[i] = err[static_cast<std::size_t>(kb * B + i)];
            m[i] = mx[static_cast<std::size_t>(kb * B + i)];
          }
          accumulate_block_statistics<Quantizer>(v, tr, e, m);
          for (int i = 0; i < B; ++i) {
            err[static_cast<std::size_t>(kb * B + i)] = e[i];
            mx[static_cast<std::size_t>(kb * B + i)] = m[i];
          }
        }
      }
      for (int k = 0; k < K; ++k) {
        stats_.sq_error[static_cast<std::size_t>(k)] +=
            static_cast<double>(err[static_cast<std::size_t>(k)]);
        stats_.max_abs[static_cast<std::size_t>(k)] =
            std::fmax(stats_.max_abs[static_cast<std::size_t>(k)],
                      static_cast<double>(mx[static_cast<std::size_t>(k)]));
      }
    }
    stats_.tokens += rows;
  }

  //! Multiplies every statistic by `factor` (see the file comment). Throws unless 0 <= factor <= 1.
  void decay(double factor) {
    if (!(factor >= 0.0 && factor <= 1.0))
      throw std::invalid_argument("quads: calibrator::decay factor must lie in [0, 1]");
    for (double& v : stats_.sq_error)
      v *= factor;
    for (double& v : stats_.max_abs)
      v *= factor;
    stats_.tokens *= factor;
  }

  void reset() { stats_ = channel_statistics(stats_.channels()); }

  const channel_statistics& statistics() const noexcept { return stats_; }
  //! Replaces the statistics (e.g. with a copy of the GPU's), keeping K. Throws on a K mismatch.
  void load(channel_statistics s) {
    if (s.channels() != stats_.channels() || s.max_abs.size() != s.sq_error.size())
      throw std::invalid_argument("quads: calibrator::load: statistics have a different K");
    stats_ = std::move(s);
  }

private:
  channel_statistics stats_;
};

} // namespace quads::compensation
