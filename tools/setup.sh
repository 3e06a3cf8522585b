#!/usr/bin/env bash
# Installs what building and testing quads needs on a fresh Debian machine with the CUDA Toolkit:
# meson, ninja, numpy and ml_dtypes from PyPI, doctest from Debian. Idempotent; quiet on success.
set -euo pipefail

need_pip=()
command -v meson >/dev/null 2>&1 || need_pip+=(meson)
command -v ninja >/dev/null 2>&1 || need_pip+=(ninja)
python3 -c 'import numpy' >/dev/null 2>&1 || need_pip+=(numpy)
python3 -c 'import ml_dtypes' >/dev/null 2>&1 || need_pip+=(ml_dtypes)
if [ ${#need_pip[@]} -gt 0 ]; then
  log=$(mktemp)
  if ! python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
      "${need_pip[@]}" >"$log" 2>&1; then
    cat "$log" >&2; echo "setup: pip install ${need_pip[*]} failed" >&2; exit 1
  fi
  rm -f "$log"
  hash -r
  # pyenv installs console scripts behind shims that need a rehash
  command -v pyenv >/dev/null 2>&1 && pyenv rehash >/dev/null 2>&1 || true
fi

need_apt=()
[ -f /usr/include/doctest/doctest.h ] || need_apt+=(doctest-dev)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
dpkg -s libbenchmark-dev >/dev/null 2>&1 || need_apt+=(libbenchmark-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  log=$(mktemp)
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
      "${need_apt[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2; echo "setup: apt-get install ${need_apt[*]} failed" >&2; exit 1
  fi
  rm -f "$log"
fi

for tool in meson ninja; do
  command -v "$tool" >/dev/null 2>&1 || { echo "setup: $tool is not on PATH after install" >&2; exit 1; }
done
