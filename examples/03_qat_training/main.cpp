// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Example 03: quantization-aware training of a small MoE expert MLP under each trainer
//! fake-quant policy, on the CPU (and, when built with CUDA and a GPU is present, again through
//! the GPU trainer path), and the trainer-rollout output mismatch each one leaves.
//!
//! The model, the rollout engine and the training loop are in `common.hpp`. Printed per policy:
//! the loss curve, the trainer's and rollout's final loss, how many weights differ between what
//! the trainer computed with and what the rollout decodes, and the relative L2 mismatch of the
//! two outputs on held-out tokens. Without a GPU (or without CUDA) only the CPU table is printed.
#include "common.hpp"

#ifdef QUADS_EXAMPLE_HAS_GPU
#  include "gpu_path.hpp"
#endif

#include <array>
#include <chrono>

int main() {
  using namespace ex03;
  const auto t0 = std::chrono::steady_clock::now();
  std::mt19937_64 g(2026);
  setup s;
  s.teacher = random_moe(g, 1.0f);
  // Start from a perturbed teacher, as RL fine-tuning starts from a pretrained model.
  const moe noise = random_moe(g, 0.5f);
  s.init = s.teacher;
  for (std::size_t i = 0; i < s.init.w1.size(); ++i)
    s.init.w1[i] += noise.w1[i];
  for (std::size_t i = 0; i < s.init.w2.size(); ++i)
    s.init.w2[i] += noise.w2[i];
  std::normal_distribution<float> n(0.0f, 1.0f);
  s.router.resize(static_cast<std::size_t>(experts) * d);
  for (float& v : s.router)
    v = n(g) / std::sqrt(static_cast<float>(d));
  const int eval_tokens = 256;
  s.eval_x.resize(static_cast<std::size_t>(eval_tokens) * d);
  for (float& v : s.eval_x)
    v = n(g);
  s.eval_y = teacher_out(s, s.eval_x, eval_tokens);

  std::printf(
      "QAT of a top-%d MoE with %d SwiGLU experts (d=%d, I=%d), %d steps of %d tokens, Adam.\n",
      top_k, experts, d, inter, steps, batch);
  std::printf(
      "Rollout engine: W4A4 (packed weights from sync_weights, per-row activation scales,\n"
      "bf16 inputs/intermediates). Loss = MSE to the teacher; eval on %d held-out tokens.\n\n",
      eval_tokens);
  print_table_header();
  std::array<train_result, policy_count> cpu{};
  int i = 0;
  for_each_policy([&]<class P, class RolloutFormat>(const char* label) {
    auto pass = [&](const moe& m, const std::vector<float>& x, int tokens,
                    const std::vector<float>* target) {
      return run_trainer<P>(m, x, tokens, s.router, target);
    };
    auto weights = [](const moe& m, std::vector<float>& w1, std::vector<float>& w2) {
      w1 = ref::fake_quant_weights<P>(m.w1, experts, 2 * inter, d).values;
      w2 = ref::fake_quant_weights<P>(m.w2, experts, d, inter).values;
    };
    cpu[static_cast<std::size_t>(i++)] = train<P, RolloutFormat>(label, s, pass, weights);
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "\n'w diff': weights whose fp32 bits differ between the trainer's forward and the rollout's\n"
      "decoded packed weights (0 = aligned). 'out mismatch': relative L2 of trainer vs rollout "
      "output.\n"
      "%.1f s\n",
      secs);
#ifdef QUADS_EXAMPLE_HAS_GPU
  // Returns 0 without printing anything when no GPU is present at run time.
  return run_gpu_path(s, cpu);
#else
  return 0;
#endif
}
