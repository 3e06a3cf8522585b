#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
"""Compile-fail check: SNIPPET must compile as is (its positive twin) and must fail with
-DQUADS_COMPILE_FAIL, with every `// expect: <text>` line of the snippet in the diagnostics.

usage: check_compile_fail.py SNIPPET -- COMPILER [ARGS...]
"""
import os
import subprocess
import sys


def run(cmd):
    env = dict(os.environ, LC_ALL="C", LANG="C")  # plain ASCII quotes in GCC's messages
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    return p.returncode, p.stdout


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    snippet, compiler = argv[1], argv[3:]
    with open(snippet, encoding="utf-8") as f:
        expects = [line.split("// expect:", 1)[1].strip() for line in f if line.startswith("// expect:")]
    if not expects:
        print(f"{snippet}: no '// expect:' line", file=sys.stderr)
        return 2
    base = compiler + ["-fsyntax-only", "-fdiagnostics-color=never", snippet]

    rc, out = run(base)
    if rc != 0:
        print(f"FAIL: the positive twin of {snippet} does not compile:\n{out}")
        return 1
    rc, out = run(base + ["-DQUADS_COMPILE_FAIL"])
    if rc == 0:
        print(f"FAIL: {snippet} compiled with -DQUADS_COMPILE_FAIL but must not")
        return 1
    missing = [e for e in expects if e not in out]
    if missing:
        print(f"FAIL: the diagnostics of {snippet} do not name the missing requirement; "
              f"not found: {missing}\n--- compiler output ---\n{out}")
        return 1
    print(f"ok: {os.path.basename(snippet)}: positive twin compiles; negative fails naming {expects}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
