// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Example 06: an MoE expert layer with the four numeric policies, on the host reference
//!        (quads/moe/reference.hpp): routing, NVFP4 expert stacks, calibrated activation scales,
//!        per-layer / per-expert RAC channel sets, and the error of each policy against bf16.
//!
//! The GPU layer (quads/moe/layer.cuh, `plan_layer` + `forward`) takes the same inputs in device
//! memory and is checked against these host stages by test/moe/gpu_layer_test.cu.
#include <quads/compensation/selection.hpp>
#include <quads/gemm/weight_layout.hpp>
#include <quads/moe/reference.hpp>
#include <quads/quant/tensor_scale.hpp>
#include <quads/reference/tensor.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

namespace qm = quads::moe;
namespace qr = quads::moe::reference;

namespace {

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

//! `count` whole 16-blocks of K with the largest calibration amax (a simple selector).
quads::compensation::channel_selection top_blocks(const std::vector<float>& x, int rows, int K,
                                                  int selected) {
  std::vector<float> amax(static_cast<std::size_t>(K / 16), 0.0f);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < K; ++k)
      amax[k / 16] = std::max(amax[k / 16], std::fabs(x[static_cast<std::size_t>(r) * K + k]));
  std::vector<int> b(amax.size());
  std::iota(b.begin(), b.end(), 0);
  std::sort(b.begin(), b.end(), [&](int i, int j) { return amax[i] > amax[j]; });
  b.resize(static_cast<std::size_t>(selected / 16));
  return quads::compensation::select_blocks(K, b);
}

} // namespace

int main() {
  const qm::layer_shape s{16, 4, 512, 256}; // E, k, H, I
  const int T = 32;
  std::mt19937_64 g(2026);
  std::normal_distribution<float> nd;

  // activations with a few outlier channels, router logits, expert weights [E, 2I, H] / [E, H, I]
  std::vector<float> x(static_cast<std::size_t>(T) * s.hidden),
      logits(static_cast<std::size_t>(T) * s.experts);
  std::vector<float> chan(static_cast<std::size_t>(s.hidden), 1.0f);
  for (int i = 0; i < 6; ++i)
    chan[g() % s.hidden] = 40.0f;
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = qr::round_bf16(nd(g) * chan[i % s.hidden]);
  for (auto& l : logits)
    l = 2.0f * nd(g);
  auto stack = [&](int rows, int cols) {
    std::vector<float> w(static_cast<std::size_t>(s.experts) * rows * cols);
    for (auto& v : w)
      v = qr::round_bf16(nd(g) / std::sqrt(static_cast<float>(cols)));
    return w;
  };
  const std::vector<float> gu = stack(2 * s.intermediate, s.hidden),
                           dn = stack(s.hidden, s.intermediate);

  qr::layer_weights w;
  w.shape = s;
  // NVFP4 per-expert stacks (one tensor scale per expert); gate/up rows interleaved for SwiGLU
  w.gate_up = quads::gemm::interleave_gate_up(quads::reference::quantize<quads::nvfp4>(
      gu, 2 * s.intermediate, s.hidden, {s.experts, {}, 0}));
  w.down =
      quads::reference::quantize<quads::nvfp4>(dn, s.hidden, s.intermediate, {s.experts, {}, 0});
  w.gate_up_bf16.resize(gu.size());
  for (int e = 0; e < s.experts; ++e) // the same interleaving for the bf16 copy
    for (int r = 0; r < 2 * s.intermediate; ++r) {
      const int src = r % 2 == 0 ? r / 2 : s.intermediate + r / 2;
      std::copy_n(gu.begin() + (static_cast<std::size_t>(e) * 2 * s.intermediate + src) * s.hidden,
                  s.hidden,
                  w.gate_up_bf16.begin() +
                      (static_cast<std::size_t>(e) * 2 * s.intermediate + r) * s.hidden);
    }
  w.down_bf16 = dn;

  const qm::routing_config rc{s.experts, s.top_k, qm::scoring::softmax, true, 1.0f};
  const auto routing = qm::route(logits, T, rc);
  int active = 0;
  for (int e = 0; e < s.experts; ++e)
    active += routing.offsets[e + 1] > routing.offsets[e];
  std::printf("T=%d tokens, E=%d experts, top-%d: %d active experts, rows per expert:", T,
              s.experts, s.top_k, active);
  for (int e = 0; e < s.experts; ++e)
    std::printf(" %d", routing.offsets[e + 1] - routing.offsets[e]);
  std::printf("\n");

  // calibration: x's tensor scale from its amax, h's per expert from the W4A16 SwiGLU output;
  // RAC sets (50%): gate_up one set per layer from x, down one set per expert from its h rows
  qr::layer_numerics num;
  num.x_scale = quads::make_tensor_scale<quads::nvfp4>(quads::reference::amax(x));
  num.h_scales.assign(1, quads::tensor_scale{});
  const auto h16 = qr::gate_up(
      qm::layer_policy::w4a16,
      qr::gather(qr::quantize_input(qm::layer_policy::w4a16, x, T, s.hidden, num), routing),
      routing, w, num);
  const int I = s.intermediate;
  num.h_scales.clear();
  num.gate_up_sel = top_blocks(x, T, s.hidden, qm::rac_selected_channels(0.5, s.hidden));
  for (int e = 0; e < s.experts; ++e) {
    const int r0 = routing.offsets[e], r1 = routing.offsets[e + 1];
    std::vector<float> rows(h16.h_pre.begin() + static_cast<std::ptrdiff_t>(r0) * I,
                            h16.h_pre.begin() + static_cast<std::ptrdiff_t>(r1) * I);
    num.h_scales.push_back(quads::make_tensor_scale<quads::nvfp4>(quads::reference::amax(rows)));
    num.down_sel.push_back(top_blocks(rows, r1 - r0, I, qm::rac_selected_channels(0.5, I)));
  }

  const auto ref = qr::forward(qm::layer_policy::bf16, x, logits, T, rc, w, num);
  std::printf("\n%-12s %s\n", "policy", "rel. error of the layer output vs the bf16 layer");
  for (auto p :
       {qm::layer_policy::w4a16, qm::layer_policy::naive_w4a4, qm::layer_policy::quads_rac}) {
    const auto out = qr::forward(p, x, logits, T, rc, w, num);
    std::printf("%-12s %.4f\n", qm::to_string(p), rel_err(out.out, ref.out));
  }
  return 0;
}
