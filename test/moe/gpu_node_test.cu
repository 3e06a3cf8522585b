// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief The gate_up quantize node the GPU layer runs (`quantize_expert_output_gpu`: turbo path,
//!        multipliers computed per block) against the host node (core functors) byte for byte:
//!        adversarial blocks (NaN, Inf, zeros, subnormals, fp32 extremes, E2M1 ties) and random
//!        ones, blocks in and out of each expert's RAC set, and per-expert tensor scales that the
//!        turbo path admits or refuses for some scale bytes (the core functors then run).
#include <doctest/doctest.h>

#include "gpu_helpers.cuh"

#include <quads/moe/layer.cuh>

#include <test_support/generators.hpp>
#include <test_support/seed.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace qm = quads::moe;
using moe_test::dbuf;

namespace {

using node_gpu = qm::quantize_expert_output_gpu;
using node_host = qm::quantize_expert_output<qm::activation_quantizer>;
constexpr int W = 32; // two blocks per fragment, as one thread of the gate_up epilogue holds

__global__ void apply_node(const float* v, int rows, int cols, node_gpu::params p) {
  const int frag = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int per_row = cols / W;
  if (frag >= rows * per_row) return;
  quads::epilogue::fragment<W> f{};
  f.row = frag / per_row;
  f.col = (frag % per_row) * W;
  f.count = W;
  for (int i = 0; i < W; ++i)
    f.v[i] = v[static_cast<std::size_t>(f.row) * cols + f.col + i];
  node_gpu::apply<W>(f, p);
}

//! The group form: 16 lanes per block, one column each (as the streaming GEMM epilogue runs it).
__global__ void apply_node_lanes(const float* v, int rows, int cols, node_gpu::params p) {
  constexpr int G = qm::block;
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int blk = t / G, rank = t % G, per_row = cols / G;
  if (blk >= rows * per_row) return; // whole groups leave together
  quads::epilogue::fragment<1> f{};
  f.row = blk / per_row;
  f.col = (blk % per_row) * G + rank;
  f.count = 1;
  f.v[0] = v[static_cast<std::size_t>(f.row) * cols + f.col];
  node_gpu::apply_group<1, G>(f, p, quads::epilogue::lane_group<G>::of_lane(threadIdx.x % 32));
}

static_assert(quads::epilogue::lane_group_size<qm::gate_up_fp4_epilogue_gpu> == qm::block,
              "the GPU gate_up chain runs its blocks on lane groups");
static_assert(quads::epilogue::lane_group_size<qm::gate_up_fp4_epilogue> == 1,
              "the host chain has no group form");

} // namespace

TEST_SUITE("moe.node.gpu") {
  TEST_CASE("the GPU gate_up quantize node equals the host node byte for byte") {
    const std::uint64_t seed = quads_test::derived_seed("moe.gpu.node");
    std::printf("  moe node seed 0x%016llx\n", static_cast<unsigned long long>(seed));
    std::mt19937_64 g(seed);
    constexpr int B = 16;
    const int E = 4, rows = 96, cols = 512, nkb = cols / B, nsel = nkb / 2;
    std::vector<float> v(static_cast<std::size_t>(rows) * cols);
    const auto adv = quads_test::adversarial_blocks<B>();
    const std::size_t blocks = v.size() / B;
    for (std::size_t b = 0; b < blocks; ++b) {
      const auto x = b < adv.size() ? adv[b] : quads_test::random_block<B>(g);
      for (int i = 0; i < B; ++i)
        v[b * B + i] = x[i];
    }
    // per expert: the scale of the finite data, a tiny and a huge decode factor (products with
    // large scale bytes overflow: the turbo path refuses those blocks), and the scale of 1.0
    float amax = 0.0f;
    for (const float x : v)
      if (std::isfinite(x)) amax = std::fmax(amax, std::fabs(x));
    const std::vector<quads::tensor_scale> ts = {
        quads::make_tensor_scale<quads::nvfp4>(amax), quads::tensor_scale_from_decode(1e-30f),
        quads::tensor_scale_from_decode(1e36f), quads::make_tensor_scale<quads::nvfp4>(1.0f)};
    std::vector<int> eor(rows), slot(static_cast<std::size_t>(E) * nkb, -1);
    for (int r = 0; r < rows; ++r)
      eor[r] = static_cast<int>((r * 7 + 3) % E);
    for (int e = 0; e < E; ++e) // expert e selects every other block, starting at e % 2
      for (int kb = e % 2, j = 0; kb < nkb; kb += 2)
        slot[static_cast<std::size_t>(e) * nkb + kb] = j++;
    const std::size_t row_bytes = static_cast<std::size_t>(cols + nsel * B) / 2;
    const std::size_t scale_cols = static_cast<std::size_t>(nkb + nsel);
    std::vector<std::uint8_t> want(rows * row_bytes, 0), want_s(rows * scale_cols, 0);
    node_host::params hp{want.data(), want_s.data(),
                         ts.data(),   quads::epilogue::scale_source::expert,
                         eor.data(),  slot.data(),
                         nsel * B,    rows,
                         cols,        0};
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; c += W) {
        quads::epilogue::fragment<W> f{};
        f.row = r;
        f.col = c;
        f.count = W;
        for (int i = 0; i < W; ++i)
          f.v[i] = v[static_cast<std::size_t>(r) * cols + c + i];
        node_host::apply<W>(f, hp);
      }
    dbuf dv = moe_test::upload(v), dts = moe_test::upload(ts), deor = moe_test::upload(eor),
         dslot = moe_test::upload(slot), dd(want.size()), dds(want_s.size());
    const node_gpu::params dp{dd.get<std::uint8_t>(),
                              dds.get<std::uint8_t>(),
                              dts.get<quads::tensor_scale>(),
                              quads::epilogue::scale_source::expert,
                              deor.get<int>(),
                              dslot.get<int>(),
                              nsel * B,
                              rows,
                              cols,
                              0};
    // one thread per fragment (`apply`), then 16 lanes per block (`apply_group`)
    for (const bool lanes : {false, true}) {
      CAPTURE(lanes);
      MOE_CUDA_OK(cudaMemset(dd.get(), 0, want.size()));
      MOE_CUDA_OK(cudaMemset(dds.get(), 0, want_s.size()));
      if (lanes) {
        const int threads = rows * cols; // one per column
        apply_node_lanes<<<(threads + 127) / 128, 128>>>(dv.get<float>(), rows, cols, dp);
      } else {
        const int frags = rows * (cols / W);
        apply_node<<<(frags + 127) / 128, 128>>>(dv.get<float>(), rows, cols, dp);
      }
      MOE_CUDA_OK(cudaGetLastError());
      MOE_CUDA_OK(cudaDeviceSynchronize());
      const auto got = moe_test::download<std::uint8_t>(dd.get(), want.size());
      const auto got_s = moe_test::download<std::uint8_t>(dds.get(), want_s.size());
      int bad = 0;
      for (std::size_t i = 0; i < want.size(); ++i)
        if (got[i] != want[i] && bad++ < 4)
          std::printf("  %s: code byte %zu (row %zu): got 0x%02x want 0x%02x\n",
                      lanes ? "lanes" : "thread", i, i / row_bytes, got[i], want[i]);
      for (std::size_t i = 0; i < want_s.size(); ++i)
        if (got_s[i] != want_s[i] && bad++ < 8)
          std::printf("  %s: scale byte %zu (row %zu): got 0x%02x want 0x%02x\n",
                      lanes ? "lanes" : "thread", i, i / scale_cols, got_s[i], want_s[i]);
      CHECK(bad == 0);
    }
    CHECK(adv.size() < blocks); // the adversarial set fits, random blocks follow
  }
}
