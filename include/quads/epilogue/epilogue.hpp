// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Umbrella header of the composable epilogue: fragments, the `epilogue_node` concept,
//!        `chain<Nodes...>` and the library's nodes (host-safe). See `docs/gemm.md`.
#pragma once

#include <quads/epilogue/chain.hpp>
#include <quads/epilogue/fragment.hpp>
#include <quads/epilogue/node.hpp>
#include <quads/epilogue/nodes.hpp>
