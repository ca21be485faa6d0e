#!/usr/bin/env python3
"""Checks that includes point down the layer table of docs/architecture.md.

Every `#include "<layer>/..."` in src/<layer>/, tools/ and python/ must name a layer that the
including layer may depend on (LAYERS below, the same table as the docs). Known violations are
listed in scripts/layer_exceptions.txt ("<file> -> <layer>" per line): the check fails on any
violation not listed there, and on a listed one that no longer exists (so the list only shrinks).

  scripts/check_layers.py [--root DIR] [--update]   (--update rewrites the exceptions file)
"""
import argparse
import pathlib
import re
import sys

# layer -> the layers its files may include directly (DESIGN.md / docs/architecture.md).
LAYERS = {
    "core": set(),
    "ir": {"core"},
    "tir": {"core"},
    "te": {"core", "tir"},
    "codegen": {"core", "tir"},
    "target": {"core"},
    "kernels": {"core", "target"},
    "ops": {"core", "ir", "te", "tir"},
    "frontend": {"core", "ir", "ops"},
    "pass": {"core", "ir", "ops"},
    "runtime": {"core", "ir", "ops", "target", "kernels"},
    # External backends see only the extension API (include/kiln/extension.h).
    "external": set(),
    "driver": {"core", "ir", "ops", "te", "tir", "codegen", "target", "kernels", "frontend", "pass", "runtime",
               "external"},
    "capi": {"core", "ir", "ops", "target", "kernels", "frontend", "pass", "runtime", "driver", "tune"},
    "serve": {"core", "ir", "ops", "target", "kernels", "frontend", "pass", "runtime", "driver"},
    "tune": {"core", "ir", "ops", "target", "kernels", "frontend", "pass", "runtime", "driver"},
    # Entry points sit on the driver (and what it exposes below it).
    "tools": {"core", "ir", "ops", "te", "tir", "codegen", "target", "kernels", "frontend", "pass", "runtime", "driver",
              "capi", "serve", "tune"},
    "python": {"core", "ir", "ops", "te", "tir", "codegen", "target", "kernels", "frontend", "pass", "runtime", "driver",
               "capi", "tune"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def layer_of(rel: pathlib.PurePath):
    parts = rel.parts
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    if parts[0] in ("tools", "python"):
        return parts[0]
    return None


def violations(root: pathlib.Path):
    found = set()
    for path in sorted(list(root.glob("src/**/*")) + list(root.glob("tools/**/*")) + list(root.glob("python/**/*"))):
        if path.suffix not in (".cc", ".h", ".c", ".cpp") or not path.is_file():
            continue
        rel = path.relative_to(root)
        layer = layer_of(rel)
        if layer not in LAYERS:
            continue
        for line in path.read_text(errors="replace").splitlines():
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            if target in LAYERS and target != layer and target not in LAYERS[layer]:
                found.add(f"{rel.as_posix()} -> {target}")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=pathlib.Path(__file__).resolve().parent.parent, type=pathlib.Path)
    ap.add_argument("--update", action="store_true")
    args = ap.parse_args()
    exceptions_file = args.root / "scripts" / "layer_exceptions.txt"
    found = violations(args.root)
    if args.update:
        header = [l for l in exceptions_file.read_text().splitlines() if l.startswith("#")] if exceptions_file.exists() else []
        exceptions_file.write_text("\n".join(header + sorted(found)) + "\n")
        print(f"check_layers: wrote {len(found)} known violations to {exceptions_file}")
        return 0
    known = set()
    if exceptions_file.exists():
        known = {l.strip() for l in exceptions_file.read_text().splitlines() if l.strip() and not l.startswith("#")}
    new, gone = sorted(found - known), sorted(known - found)
    for v in new:
        print(f"check_layers: {v}: this include points up or across the layer table (docs/architecture.md)")
    for v in gone:
        print(f"check_layers: {v}: listed in scripts/layer_exceptions.txt but no longer there; remove the line")
    print(f"check_layers: {len(found)} known violations, {len(new)} new, {len(gone)} stale")
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
