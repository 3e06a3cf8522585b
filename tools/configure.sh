#!/usr/bin/env bash
# Configures the build folder `build` once (CUDA targets too when nvcc is present). Quiet.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  cuda=disabled
  command -v nvcc >/dev/null 2>&1 && cuda=enabled
  log=$(mktemp)
  if ! meson setup build -Dcuda="$cuda" -Dbuildtype=release --wrap-mode=nofallback >"$log" 2>&1; then
    cat "$log" >&2; exit 1
  fi
  rm -f "$log"
fi
