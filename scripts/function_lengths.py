#!/usr/bin/env python3
"""Lists the longest functions (top-level definitions: from a line at column 0 with a '(' up to
the next '}' alone at column 0) of the given C++ files; exits 1 when one is longer than --max lines.

  scripts/function_lengths.py [--max 150] FILE|DIR...   (a DIR: its *.cc files)
"""
import argparse
import pathlib
import sys


def functions(path):
    lines = open(path, errors="replace").read().split("\n")
    start = None
    for i, line in enumerate(lines):
        if start is None and line and not line[0].isspace() and "(" in line and not line.rstrip().endswith(";") \
                and not line.startswith(("namespace", "struct", "class", "enum", "extern", "#", "//", "}")):
            start = i
        elif start is not None and line.rstrip().endswith(";") and not lines[start].rstrip().endswith(("{", ",", "(")):
            start = None  # a declaration spread over lines
        elif start is not None and line.rstrip() in ("}", "};"):
            yield i - start + 1, f"{path}:{start + 1}", lines[start].strip()
            start = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=150)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    paths = []
    for p in map(pathlib.Path, a.files):
        paths += sorted(p.glob("*.cc")) if p.is_dir() else [p]
    found = sorted((f for p in paths for f in functions(str(p))), reverse=True)
    for n, where, head in found[:10]:
        print(f"{n:5d}  {where}  {head[:80]}")
    long = [f for f in found if f[0] > a.max]
    if long:
        print(f"function_lengths: {len(long)} functions over {a.max} lines")
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main())
