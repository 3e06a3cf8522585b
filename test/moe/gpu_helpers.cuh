// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Device buffers and uploads for the MoE GPU tests.
#pragma once

#include "moe_fixtures.hpp"

#include <quads/compensation/rac.cuh>
#include <quads/moe/layer.cuh>

#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace moe_test {

#define MOE_CUDA_OK(expr)                                                                          \
  do {                                                                                             \
    const cudaError_t e_ = (expr);                                                                 \
    INFO(#expr << ": " << std::string(cudaGetErrorString(e_)) << " / "                             \
               << std::string(quads::kernels::last_error_message()));                              \
    REQUIRE(e_ == cudaSuccess);                                                                    \
  } while (0)

//! Owns device memory (move-only).
class dbuf {
public:
  dbuf() = default;
  explicit dbuf(std::size_t bytes) {
    REQUIRE(cudaMalloc(&p_, bytes > 0 ? bytes : 1) == cudaSuccess);
  }
  dbuf(const dbuf&) = delete;
  dbuf& operator=(const dbuf&) = delete;
  dbuf(dbuf&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  dbuf& operator=(dbuf&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~dbuf() {
    if (p_ != nullptr) cudaFree(p_);
  }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }

private:
  void* p_ = nullptr;
};

template <class T>
dbuf upload(const std::vector<T>& v) {
  dbuf b(v.size() * sizeof(T));
  if (!v.empty())
    REQUIRE(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice) ==
            cudaSuccess);
  return b;
}

template <class T>
std::vector<T> download(const void* p, std::size_t n) {
  std::vector<T> v(n);
  if (n > 0) REQUIRE(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return v;
}

inline std::vector<std::uint16_t> to_bf16_bits(const std::vector<float>& v) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out[i] = quads::detail::float_to_bf16_bits(v[i]);
  return out;
}

//! A problem's tensors on the device, and the views the layer takes.
struct device_problem {
  dbuf x, logits, gu, gus, gut, dn, dns, dnt, gub, dnb, xs, hs, gslot, gblocks, dslots;
  quads::moe::layer_weights_view w{};
  quads::moe::layer_numerics_view num{};

  explicit device_problem(const problem& p) {
    x = upload(to_bf16_bits(p.x));
    logits = upload(p.logits);
    gu = upload(p.w.gate_up.data);
    gus = upload(p.w.gate_up.scales);
    gut = upload(p.w.gate_up.tensor_scales);
    dn = upload(p.w.down.data);
    dns = upload(p.w.down.scales);
    dnt = upload(p.w.down.tensor_scales);
    gub = upload(to_bf16_bits(p.w.gate_up_bf16));
    dnb = upload(to_bf16_bits(p.w.down_bf16));
    xs = upload(std::vector<quads::tensor_scale>{p.num.x_scale});
    hs = upload(p.num.h_scales);
    const auto t = quads::compensation::kernels::make_selection_tables(p.num.gate_up_sel);
    gslot = upload(t.slot);
    gblocks = upload(t.blocks);
    dslots = upload(quads::moe::reference::down_slot_tables(p.num, p.shape.intermediate));
    w.gate_up = gu.get<std::uint8_t>();
    w.gate_up_scales = gus.get<std::uint8_t>();
    w.gate_up_ts = gut.get<quads::tensor_scale>();
    w.down = dn.get<std::uint8_t>();
    w.down_scales = dns.get<std::uint8_t>();
    w.down_ts = dnt.get<quads::tensor_scale>();
    w.gate_up_bf16 = gub.get<__nv_bfloat16>();
    w.down_bf16 = dnb.get<__nv_bfloat16>();
    num.x_scale = xs.get<quads::tensor_scale>();
    num.h_scales = hs.get<quads::tensor_scale>();
    num.h_mode = p.num.h_mode();
    num.gate_up_sel.channels = p.num.gate_up_sel.channels;
    num.gate_up_sel.selected_blocks = p.num.gate_up_sel.selected_blocks();
    num.gate_up_sel.slot = gslot.get<int>();
    num.gate_up_sel.blocks = gblocks.get<int>();
    num.down_slots = dslots.get<int>();
  }
  const __nv_bfloat16* x_bf16() const { return x.get<__nv_bfloat16>(); }
};

} // namespace moe_test
