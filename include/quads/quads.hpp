// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Umbrella header: every host-safe part of quads (no `.cuh` headers).
#pragma once

#include <quads/config.hpp>

#include <quads/format/e2m1.hpp>
#include <quads/format/e4m3.hpp>
#include <quads/format/ue8m0.hpp>
#include <quads/interop/cuda_fp.hpp>
#include <quads/interop/modelopt.hpp>
#include <quads/layout/scale_layouts.hpp>
#include <quads/quant/block_quantizer.hpp>
#include <quads/quant/options.hpp>
#include <quads/quant/random_bits.hpp>
#include <quads/quant/tensor_scale.hpp>
#include <quads/reference/tensor.hpp>
#include <quads/scheme/schemes.hpp>
#include <quads/version.hpp>
