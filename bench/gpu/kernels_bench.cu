// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Registration helper of the kernel benchmarks: per-slot buffers, random inputs, timing.

#include "kernel_registry.cuh"
#include "suites.hpp"

#include <utility>

namespace quads::bench {

namespace {

cudaError_t initialise(device_buffer& b, const buffer_spec& spec, std::uint64_t seed) {
  if (b.error() != cudaSuccess) return b.error();
  cudaStream_t s = stream();
  switch (spec.how) {
  case init::none:
    // Poison, not zeros: a kernel that skips outputs must not look correct or fast by accident.
    return cudaMemsetAsync(b.get(), 0xa5, b.size(), s);
  case init::random_bf16:
    return fill_random(b.get<__nv_bfloat16>(), b.size() / 2, seed, s);
  case init::random_fp16:
    return fill_random(b.get<__half>(), b.size() / 2, seed, s);
  case init::random_fp32:
    return fill_random(b.get<float>(), b.size() / 4, seed, s);
  case init::given_scales: {
    const std::vector<tensor_scale> host(static_cast<std::size_t>(spec.count), given_scale());
    return cudaMemcpy(b.get(), host.data(), host.size() * sizeof(tensor_scale),
                      cudaMemcpyHostToDevice);
  }
  }
  return cudaErrorInvalidValue;
}

} // namespace

void register_kernel(const std::string& name, double bytes, std::vector<buffer_spec> per_slot,
                     std::vector<buffer_spec> shared, launch_fn launch) {
  const cache policy = policy_for(static_cast<std::size_t>(bytes)).first;
  auto* b = benchmark::RegisterBenchmark(
      name.c_str(), [=, per_slot = std::move(per_slot), shared = std::move(shared)](
                        benchmark::State& state) {
        std::size_t slot_bytes = 0;
        for (const auto& spec : per_slot) slot_bytes += spec.bytes;
        const int slots = policy == cache::ring ? ring_slots(slot_bytes) : 1;
        std::vector<std::vector<device_buffer>> ring(static_cast<std::size_t>(slots));
        std::vector<device_buffer> common;
        std::uint64_t seed = 0x5eed;
        for (auto& bufs : ring)
          for (const auto& spec : per_slot) {
            bufs.emplace_back(spec.bytes);
            QUADS_BENCH_TRY(state, initialise(bufs.back(), spec, ++seed));
          }
        for (const auto& spec : shared) {
          common.emplace_back(spec.bytes);
          QUADS_BENCH_TRY(state, initialise(common.back(), spec, ++seed));
        }
        QUADS_BENCH_TRY(state, cudaStreamSynchronize(stream()));
        measure(state, policy, slots, bytes, [&](int slot, cudaStream_t s) {
          return launch(launch_buffers{ring[static_cast<std::size_t>(slot)], common}, s);
        });
      });
  configure(b, policy);
}

void register_kernels() {
  register_quantize_suite();
  register_other_suite();
}

} // namespace quads::bench
