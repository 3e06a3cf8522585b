#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, runs every test (GPU tests skip without a
# GPU), and ends with one line "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/configure.sh
meson compile -C build -j "$(nproc)" >build/compile.log 2>&1 || { tail -60 build/compile.log >&2; echo "0 passed, 1 failed"; exit 1; }
status=0
meson test -C build --print-errorlogs --num-processes 1 "$@" || status=$?
python3 - build/meson-logs/testlog.json <<'PY'
import json, sys
passed = failed = skipped = 0
for line in open(sys.argv[1]):
    r = json.loads(line)["result"]
    if r in ("OK", "EXPECTEDFAIL"): passed += 1
    elif r == "SKIP": skipped += 1
    else: failed += 1
if skipped: print(f"({skipped} skipped: GPU suites without a GPU)")
print(f"{passed} passed, {failed} failed")
PY
exit $status
