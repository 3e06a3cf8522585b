// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Host benchmark of the reference quantizer (the spec in code, not a fast path): how long
//!        tests that compare GPU output against it spend on the host side.

#include <quads/reference/tensor.hpp>
#include <quads/scheme/schemes.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

std::vector<float> random_input(std::size_t n) {
  std::mt19937_64 gen(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(gen);
  return x;
}

template <class Format, quads::quant_options Options, class Layout>
void bm_quantize(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0));
  const int cols = static_cast<int>(state.range(1));
  const auto x = random_input(static_cast<std::size_t>(rows) * cols);
  for (auto _ : state) {
    auto q = quads::reference::quantize<Format, Options, Layout>(x, rows, cols);
    benchmark::DoNotOptimize(q.data.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(rows) * cols);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(rows) * cols * 4);
}

template <class Format, quads::quant_options Options>
void bm_qdq(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0));
  const int cols = static_cast<int>(state.range(1));
  const auto x = random_input(static_cast<std::size_t>(rows) * cols);
  for (auto _ : state) {
    auto y = quads::reference::qdq<Format, Options>(x, rows, cols);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(rows) * cols);
}

constexpr quads::quant_options defaults{};
constexpr quads::quant_options nvfp4_four_six{.block_rule = quads::block_scale_rule::four_over_six};
constexpr quads::quant_options nvfp4_stochastic{.round = quads::rounding::stochastic};

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({1, 4096})->Args({64, 4096})->Args({1024, 4096})->Unit(benchmark::kMicrosecond);
}

} // namespace

BENCHMARK(bm_quantize<quads::nvfp4, defaults, quads::linear_scales>)->Apply(shapes);
BENCHMARK(bm_quantize<quads::nvfp4, defaults, quads::swizzled_128x4>)->Apply(shapes);
BENCHMARK(bm_quantize<quads::nvfp4, nvfp4_four_six, quads::linear_scales>)->Apply(shapes);
BENCHMARK(bm_quantize<quads::nvfp4, nvfp4_stochastic, quads::linear_scales>)->Apply(shapes);
BENCHMARK(bm_quantize<quads::mxfp4, defaults, quads::linear_scales>)->Apply(shapes);
BENCHMARK(bm_qdq<quads::nvfp4, defaults>)->Apply(shapes);

BENCHMARK_MAIN();
