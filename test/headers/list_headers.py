#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
"""Prints the public headers under INCLUDE_DIR/quads with suffix SUFFIX (e.g. .hpp), one per
line, relative to INCLUDE_DIR and sorted, for the header self-containment checks."""
import pathlib
import sys

root, suffix = pathlib.Path(sys.argv[1]), sys.argv[2]
for p in sorted((root / "quads").rglob("*" + suffix)):
    print(p.relative_to(root).as_posix())
