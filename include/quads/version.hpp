// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Library version.
#pragma once

#define QUADS_VERSION_MAJOR 0
#define QUADS_VERSION_MINOR 1
#define QUADS_VERSION_PATCH 0
