// SPDX-FileCopyrightText: 2026 The quads authors
// SPDX-License-Identifier: Apache-2.0
//! @file
//! @brief Main of the header self-containment checks. The work happens at build time: one TU
//! per header, all linked together (so a non-inline definition in a header fails to link).
#include <cstdio>

int main() {
  std::printf("%d headers compile on their own and link together (%s)\n", QUADS_HEADER_COUNT,
              QUADS_HEADER_VARIANT);
  return 0;
}
