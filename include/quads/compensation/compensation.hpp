// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Umbrella header of the rollout side's residual activation compensation (host-safe parts;
//!        the GPU kernels are in `quads/compensation/rac.cuh`). See `docs/rac.md`.
#pragma once

#include <quads/compensation/calibration.hpp>
#include <quads/compensation/reference.hpp>
#include <quads/compensation/residual.hpp>
#include <quads/compensation/selection.hpp>
