#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The quads authors
# SPDX-License-Identifier: Apache-2.0
"""Consumer tests: build a tiny Meson project against quads the two ways users get it.

  run_consumer.py subproject --meson M --source-root REPO [--cccl DIR]
      copies test/consumer/subproject into a temp dir, links REPO as subprojects/quads,
      configures (forcing the subproject), builds, runs; checks quads built nothing itself.
  run_consumer.py install --meson M --pkg-config P --build-root B --version V [--cccl DIR]
      `meson install --destdir` of the main build B, then `pkg-config --cflags/--modversion
      quads` with PKG_CONFIG_PATH, then builds and runs test/consumer/pkgconfig against it.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def run(cmd, env=None, quiet=False):
    print("+", " ".join(str(c) for c in cmd), flush=True)
    p = subprocess.run([str(c) for c in cmd], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE if quiet else subprocess.STDOUT, text=True)
    if not quiet or p.returncode != 0:
        print(p.stdout, end="", flush=True)
        print(p.stderr or "", end="", flush=True)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: exit status {p.returncode}")
    return p.stdout


def clean_env():
    # Nested Meson runs must not inherit the outer test's Meson variables.
    return {k: v for k, v in os.environ.items() if not k.startswith("MESON")}


def make_project(tmp, name):
    src = tmp / "src"
    src.mkdir()
    for f in (HERE / name).iterdir():
        shutil.copy(f, src / f.name)
    shutil.copy(HERE / "main.cpp", src / "main.cpp")
    return src


def subproject(args, tmp):
    src = make_project(tmp, "subproject")
    (src / "subprojects").mkdir()
    (src / "subprojects" / "quads").symlink_to(pathlib.Path(args.source_root).resolve(),
                                                target_is_directory=True)
    build = tmp / "build"
    # the local folder, even where a quads is installed on the system
    setup = [args.meson, "setup", build, src, "--force-fallback-for=quads"]
    if args.cccl:
        setup.append(f"-Dquads:cccl_include={args.cccl}")
    env = clean_env()
    out = run(setup, env=env)
    if "Subproject quads" not in out and "subproject quads" not in out.lower():
        raise SystemExit("FAIL: quads was not configured as a subproject")
    run([args.meson, "compile", "-C", build], env=env)
    targets = json.loads(run([args.meson, "introspect", "--targets", build], env=env, quiet=True))
    names = sorted(t["name"] for t in targets)
    if names != ["consumer"]:
        raise SystemExit(f"FAIL: the subproject built targets of its own: {names}")
    run([build / "consumer"], env=env)


def install(args, tmp):
    env = clean_env()
    destdir = tmp / "destdir"
    run([args.meson, "install", "-C", args.build_root, "--no-rebuild", "--destdir", destdir], env=env)
    pcs = list(destdir.rglob("pkgconfig/quads.pc"))
    if len(pcs) != 1:
        raise SystemExit(f"FAIL: expected one installed quads.pc, found {pcs}")
    pc = pcs[0]
    prefix = next(line.split("=", 1)[1].strip() for line in pc.read_text().splitlines()
                  if line.startswith("prefix="))
    staged = pathlib.Path(str(destdir) + prefix)  # the prefix, inside the destdir

    env_pc = dict(env, PKG_CONFIG_PATH=str(pc.parent))
    version = run([args.pkg_config, "--modversion", "quads"], env=env_pc).strip()
    if version != args.version:
        raise SystemExit(f"FAIL: pkg-config says version {version}, the project is {args.version}")
    cflags = run([args.pkg_config, "--cflags", f"--define-variable=prefix={staged}", "quads"],
                 env=env_pc).split()
    incs = [pathlib.Path(f[2:]) for f in cflags if f.startswith("-I")]
    if not any((i / "quads" / "quads.hpp").is_file() for i in incs):
        raise SystemExit(f"FAIL: no -I in {cflags} leads to an installed quads/quads.hpp")
    print(f"pkg-config --cflags quads (relocated to the destdir): {' '.join(cflags)}")

    # A relocated copy of the .pc for the consumer build (a .pc cannot follow a destdir).
    pcdir = tmp / "pc"
    pcdir.mkdir()
    (pcdir / "quads.pc").write_text("".join(
        f"prefix={staged}\n" if line.startswith("prefix=") else line + "\n"
        for line in pc.read_text().splitlines()))
    src = make_project(tmp, "pkgconfig")
    build = tmp / "build"
    setup = [args.meson, "setup", build, src, f"-Dpkg_config_path={pcdir}"]
    if args.cccl:
        setup.append(f"-Dcccl_include={args.cccl}")
    run(setup, env=dict(env, PKG_CONFIG_PATH=str(pcdir)))
    run([args.meson, "compile", "-C", build], env=env)
    run([build / "consumer"], env=env)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["subproject", "install"])
    ap.add_argument("--meson", required=True)
    ap.add_argument("--source-root")
    ap.add_argument("--build-root")
    ap.add_argument("--pkg-config")
    ap.add_argument("--version")
    ap.add_argument("--cccl", default="")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix=f"quads-consumer-{args.mode}-") as t:
        (subproject if args.mode == "subproject" else install)(args, pathlib.Path(t))
    print(f"ok: consumer via {args.mode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
