#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
"""SASS evidence for the GEMM kernels: per binary, how many mainloop kernels hold HMMA and which
use local memory (LDL / STL), and whether any local access lies inside an HMMA run (the chunk
loop) rather than in the prologue, between n-tile passes or in the epilogue.

    python3 tools/sass_survey.py <binary>... [--list]

Needs `cuobjdump` (and `nvdisasm`) on PATH or in $CUDA_BIN; off the CUDA Toolkit they come from
the PyPI wheels `nvidia-cuda-cuobjdump` and `nvidia-cuda-nvdisasm`. `--list` names every kernel
that uses local memory, demangled.
"""
import collections
import os
import re
import shutil
import subprocess
import sys

INSTR = re.compile(r"\s+/\*[0-9a-f]+\*/\s+(.*?);")
FUNC = re.compile(r"Function : (\S+)")
PASS_GAP = 300  # instructions without HMMA that separate two n-tile passes' chunk loops


def tool(name):
    path = shutil.which(name, path=os.environ.get("CUDA_BIN", "") + os.pathsep + os.environ["PATH"])
    if path is None:
        sys.exit(f"sass_survey: {name} not found (PATH, $CUDA_BIN)")
    return path


def kernels(binary):
    """{mangled name: [opcode, ...]} of every kernel in `binary`."""
    out = subprocess.run([tool("cuobjdump"), "-sass", binary], capture_output=True, text=True,
                         check=True).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = FUNC.search(line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = INSTR.match(line)
        if m and cur is not None:
            cur.append(re.sub(r"^@!?U?P\w+\s+", "", m.group(1)).split()[0])
    return funcs


def demangle(name):
    cxxfilt = shutil.which("c++filt")
    if cxxfilt is None:
        return name
    return subprocess.run([cxxfilt], input=name, capture_output=True, text=True).stdout.strip()


def kind(mangled, readable):
    if "stream_mainloop" not in mangled:
        return "other mainloop"
    # the last two template arguments of stream_mainloop are MultiN, ResidualColumns
    head = readable.split(">(quads::gemm::detail::decode_params")[0]
    return "streaming, MultiN" if head.rsplit(", ", 2)[1] == "true" else "streaming"


def hmma_runs(ops):
    """(first, last) index of each run of HMMA separated by more than PASS_GAP instructions."""
    idx = [i for i, op in enumerate(ops) if op.startswith("HMMA")]
    runs = []
    for i in idx:
        if runs and i - runs[-1][1] <= PASS_GAP:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return runs


def main(argv):
    listing = "--list" in argv
    for binary in [a for a in argv if a != "--list"]:
        stats = collections.defaultdict(collections.Counter)
        spilling = []
        for mangled, ops in kernels(binary).items():
            if "mainloop" not in mangled:
                continue
            readable = demangle(mangled)
            k = kind(mangled, readable)
            local = [i for i, op in enumerate(ops) if op.startswith(("LDL", "STL"))]
            runs = hmma_runs(ops)
            in_loop = [i for i in local if any(a < i < b for a, b in runs)]
            s = stats[k]
            s["kernels"] += 1
            s["with HMMA"] += bool(runs)
            s["with LDL/STL"] += bool(local)
            s["LDL/STL inside an HMMA run"] += bool(in_loop)
            s["most LDL+STL in one kernel"] = max(s["most LDL+STL in one kernel"], len(local))
            if local:
                spilling.append((len(local), len(in_loop), readable))
        print(os.path.basename(binary))
        for k, s in sorted(stats.items()):
            print(f"  {k:18s} " + ", ".join(f"{n} {v}" for n, v in s.items()))
        if listing:
            for n, inside, readable in sorted(spilling, reverse=True):
                print(f"    {n:4d} LDL/STL ({inside} inside HMMA runs)  {readable[:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
