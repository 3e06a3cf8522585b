// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Example 01: quantize an LLM-like activation tensor to NVFP4 and MXFP4 on the host and
//! compare the error and the storage cost of each scheme and option set.
//!
//! Build and run (no GPU needed):
//!   meson setup build -Dcuda=disabled && meson compile -C build quads_demo_quantize
//!   ./build/examples/quads_demo_quantize [seed]      (or QUADS_SEED=<seed>)
#include <quads/quads.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

constexpr int tokens = 256;
constexpr int channels = 4096;  // K: blocks of 16 (nvfp4) or 32 (mxfp4) run along it

struct activations {
  std::vector<float> x;       //!< [tokens, channels], row-major
  std::vector<bool> outlier;  //!< per channel
};

// Per-channel lognormal magnitudes, a few channels 20-100x larger (the outlier features of LLM
// activations) and rare tokens whose whole row is 8x larger.
activations make_activations(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::lognormal_distribution<float> channel_scale(0.0f, 0.5f);
  std::uniform_real_distribution<float> outlier_gain(20.0f, 100.0f);
  std::uniform_int_distribution<int> pick(0, channels - 1);
  std::bernoulli_distribution spike(1.0 / 64);
  activations a{std::vector<float>(std::size_t{tokens} * channels), std::vector<bool>(channels)};
  std::vector<float> scale(channels);
  for (float& s : scale) s = channel_scale(rng);
  for (int i = 0; i < 8; ++i) {
    const int c = pick(rng);
    a.outlier[c] = true;
    scale[c] *= outlier_gain(rng);
  }
  for (int t = 0; t < tokens; ++t) {
    const float gain = spike(rng) ? 8.0f : 1.0f;
    float* x_row = a.x.data() + std::size_t(t) * channels;
    for (int c = 0; c < channels; ++c) x_row[c] = gain * scale[c] * normal(rng);
  }
  return a;
}

struct stats {
  double rel_rms, max_abs, sqnr_db, bytes_per_value;
  double rel_group[3];  //!< relative RMS error: outlier channels, their block-mates, the rest
};

template <class Format, quads::quant_options Options>
stats measure(const activations& a) {
  const auto q = quads::reference::quantize<Format, Options>(a.x, tokens, channels);
  const std::vector<float> y = quads::reference::dequantize<Format, Options>(q);
  constexpr int B = Format::block_size;
  std::vector<bool> shared(channels / B);  // the block holds an outlier channel
  for (int c = 0; c < channels; ++c) shared[c / B] = shared[c / B] || a.outlier[c];
  double err[3] = {}, ref[3] = {}, max_abs = 0.0;
  for (std::size_t i = 0; i < a.x.size(); ++i) {
    const std::size_t c = i % channels;
    const int k = a.outlier[c] ? 0 : shared[c / B] ? 1 : 2;
    const double d = double{a.x[i]} - double{y[i]};
    err[k] += d * d;
    ref[k] += double{a.x[i]} * a.x[i];
    max_abs = std::max(max_abs, std::abs(d));
  }
  // Storage actually held: packed codes + block scale bytes + fp32 tensor (or row) scales.
  const std::size_t tensor_scale_bytes = Format::has_tensor_scale ? 4 * q.tensor_scales.size() : 0;
  const double bytes = double(q.data.size() + q.scales.size() + tensor_scale_bytes);
  const double rel = std::sqrt((err[0] + err[1] + err[2]) / (ref[0] + ref[1] + ref[2]));
  return {rel, max_abs, -20.0 * std::log10(rel), bytes / double(a.x.size()),
          {std::sqrt(err[0] / ref[0]), std::sqrt(err[1] / ref[1]), std::sqrt(err[2] / ref[2])}};
}

struct row {
  const char* scheme;
  const char* options;
  stats s;
};

std::uint64_t pick_seed(int argc, char** argv) {
  if (argc > 1) return std::strtoull(argv[1], nullptr, 10);
  if (const char* env = std::getenv("QUADS_SEED")) return std::strtoull(env, nullptr, 10);
  return static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
}

} // namespace

int main(int argc, char** argv) {
  using namespace quads;
  const std::uint64_t seed = pick_seed(argc, argv);
  std::printf("seed %llu (rerun with QUADS_SEED=%llu)\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  const activations a = make_activations(seed);
  std::printf("activations %d x %d, %d outlier channels\n\n", tokens, channels,
              static_cast<int>(std::count(a.outlier.begin(), a.outlier.end(), true)));

  constexpr quant_options te_exact{};  // per-tensor scale, TransformerEngine's recipe
  constexpr quant_options per_row{.global = global_scale::per_row};
  constexpr quant_options four_six{.block_rule = block_scale_rule::four_over_six};
  constexpr quant_options mx_floor{.mx_rounding = ue8m0_rounding::floor};
  const row rows[] = {
      {"nvfp4", "default (TE-exact)", measure<nvfp4, te_exact>(a)},
      {"nvfp4", "per_row scale", measure<nvfp4, per_row>(a)},
      {"nvfp4", "four_over_six", measure<nvfp4, four_six>(a)},
      {"mxfp4", "round_up (RCEIL)", measure<mxfp4, quant_options{}>(a)},
      {"mxfp4", "floor (OCP)", measure<mxfp4, mx_floor>(a)},
  };

  std::printf("%-6s %-19s %7s %8s %7s | %8s %8s %8s | %8s %6s\n", "scheme", "options", "rel.RMS",
              "max|err|", "SQNR dB", "outliers", "mates", "rest", "B/value", "bits");
  bool ok = true;
  for (const row& r : rows) {
    const stats& s = r.s;
    std::printf("%-6s %-19s %7.4f %8.2f %7.2f | %8.4f %8.4f %8.4f | %8.6f %6.4f\n", r.scheme,
                r.options, s.rel_rms, s.max_abs, s.sqnr_db, s.rel_group[0], s.rel_group[1],
                s.rel_group[2], s.bytes_per_value, 8.0 * s.bytes_per_value);
    ok = ok && std::isfinite(s.sqnr_db) && s.rel_rms < 0.25;
  }

  // Exact storage: nvfp4 = 4 + 0.5 bits per value plus 4 bytes per tensor (or per row);
  // mxfp4 = 4 + 0.25 bits per value.
  const double n = double{tokens} * channels;
  ok = ok && rows[0].s.bytes_per_value == (n / 2 + n / 16 + 4) / n &&
       rows[1].s.bytes_per_value == (n / 2 + n / 16 + 4.0 * tokens) / n &&
       rows[3].s.bytes_per_value == (n / 2 + n / 32) / n;

  const stats& nv = rows[0].s;
  const stats& mx = rows[3].s;
  ok = ok && nv.sqnr_db > mx.sqnr_db && nv.rel_group[1] > nv.rel_group[2];
  std::printf("\ntakeaway: nvfp4 is %.1f dB above mxfp4 (RCEIL) for %.2f more bits per value; "
              "values sharing a block with an outlier channel lose %.0f%% (nvfp4), "
              "the rest %.0f%%.\n",
              nv.sqnr_db - mx.sqnr_db, 8.0 * (nv.bytes_per_value - mx.bytes_per_value),
              100.0 * nv.rel_group[1], 100.0 * nv.rel_group[2]);
  if (!ok) std::puts("FAILED: a result is outside what this example expects");
  return ok ? 0 : 1;
}
