// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Example 02: quantize a weight to NVFP4, export it as ModelOpt / Hugging Face checkpoint
//! tensors, import it back, and check that the dequantized weight is bit-identical.
//!
//! This is the trainer/rollout contract in miniature: the trainer's fake-quantized weight and the
//! weight the rollout engine dequantizes from the checkpoint must be the same floats.
//!   ./build/examples/quads_demo_checkpoint [seed]      (or QUADS_SEED=<seed>)
#include <quads/quads.hpp>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

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

  // A Linear weight [out, in]: small Gaussian values, one all-zero block (a pruned group).
  constexpr int out_features = 512, in_features = 1024;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(std::size_t{out_features} * in_features);
  for (float& v : w) v = normal(rng);
  for (int k = 0; k < 16; ++k) w[std::size_t{7} * in_features + 32 + k] = 0.0f;  // row 7, block 2

  // Quantize with the default (TE-exact, per-tensor) recipe and export. `input_scale` is the static
  // activation decode scale a calibration pass would record: amax_act / (6 * 448).
  const auto q = reference::quantize<nvfp4>(w, out_features, in_features);
  const float input_scale = make_tensor_scale<nvfp4>(12.5f).decode;
  const interop::modelopt_nvfp4_linear ckpt = interop::export_modelopt(q, input_scale);

  const auto row = [](const char* name, const char* dtype, int rows, int cols, std::size_t bytes) {
    char shape[32] = "[]";  // scalars
    if (rows > 0) std::snprintf(shape, sizeof shape, "[%d, %d]", rows, cols);
    std::printf("%-15s %-14s %-11s %8zu\n", name, dtype, shape, bytes);
  };
  std::printf("\n%-15s %-14s %-11s %8s\n", "tensor", "dtype", "shape", "bytes");
  row("weight", "uint8", ckpt.out_features, ckpt.in_features / 2, ckpt.weight.size());
  row("weight_scale", "float8_e4m3fn", ckpt.out_features, ckpt.in_features / 16,
      ckpt.weight_scale.size());
  row("weight_scale_2", "float32", 0, 0, 4);
  row("input_scale", "float32", 0, 0, 4);
  std::printf("weight_scale_2 = %a, input_scale = %a\n", ckpt.weight_scale_2, ckpt.input_scale);

  // Import (as a rollout engine loading the checkpoint would) and dequantize both sides.
  tensor_scale act{};
  const auto back = interop::import_modelopt(ckpt, &act);
  const std::vector<float> trainer = reference::dequantize<nvfp4>(q);
  const std::vector<float> rollout = reference::dequantize<nvfp4>(back);
  const bool identical = trainer.size() == rollout.size() &&
                         std::memcmp(trainer.data(), rollout.data(), trainer.size() * 4) == 0;
  std::printf("\ndequantized weights bit-identical after export/import: %s\n",
              identical ? "yes" : "NO");

  // The checkpoint stores only the decode scale; the encode scale comes back as 1 / decode, which
  // may differ from the original by one ulp. That matters only when re-quantizing.
  const float enc_before = q.tensor_scales[0].encode, enc_after = back.tensor_scales[0].encode;
  std::printf("encode scale: quantized with %a, recovered %a (%s)\n", enc_before, enc_after,
              enc_before == enc_after ? "equal" : "1 ulp apart");

  // All-zero block: quads (like TransformerEngine) writes scale byte 0x00; ModelOpt's own exporter
  // writes 0x38 (1.0). Both dequantize to zeros.
  const std::uint8_t zero_block_byte = ckpt.weight_scale[std::size_t{7} * (in_features / 16) + 2];
  std::printf("scale byte of the all-zero block: 0x%02x\n", zero_block_byte);

  double err = 0.0, ref = 0.0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    err += (double{w[i]} - trainer[i]) * (double{w[i]} - trainer[i]);
    ref += double{w[i]} * w[i];
  }
  std::printf("weight relative RMS error: %.4f\n", std::sqrt(err / ref));

  const std::int32_t ulps =
      std::bit_cast<std::int32_t>(enc_after) - std::bit_cast<std::int32_t>(enc_before);
  const bool ok = identical && zero_block_byte == 0x00 && act.decode == input_scale &&
                  ulps >= -1 && ulps <= 1;
  if (!ok) std::puts("FAILED: the round trip changed something it must not");
  return ok ? 0 : 1;
}
