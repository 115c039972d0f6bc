#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
# test-engine-layers.py — the engine's folders against their layering: every
# #include "…" in engine/ (and the engine headers kernels/ includes) must go to the
# file's own folder or to one that LAYERS lets it include. A new cycle, or an include
# the wrong way across a boundary, fails here with the file and the line. The table
# is the one place the layering is written down (docs/ARCHITECTURE.md explains it);
# a new folder must be placed in it.   usage: test-engine-layers.py SOURCE_ROOT
# (or --include-dirs PART: the folders engine/meson.build gives PART's library).
import os
import re
import sys

# Folder (relative to engine/) -> the other folders its files may include.
# "kernels" is kernels/ (the CUDA kernels' launchers, tdm-kernels.h).
LAYERS = {
    "core": [],
    "shared": [],
    "data": ["core"],
    "compute": ["core", "shared"],
    "compute/cpu": ["compute", "core", "shared"],
    "compute/cuda": ["compute", "core", "shared", "kernels"],
    "compute/devices": ["compute", "core"],
    "model": ["compute", "data", "core", "shared"],
    "communication": ["compute", "compute/cuda", "core", "kernels"],
    "training": ["model", "communication", "compute", "compute/devices", "data", "core",
                 "shared"],
    "export": ["training", "model", "core"],
    "drivers": ["training", "model", "communication", "compute", "compute/devices", "data",
                "core"],
    "history": ["drivers", "core"],
}
# What kernels/ may include of the engine: the rules it shares with the CPU backend.
KERNELS_MAY_INCLUDE = ["shared"]
# Headers only some folders of the engine may include, whatever LAYERS allows: the
# backends' table, which everything else reaches through the front door's functions.
PRIVATE = {
    "tdm-backend-ops.h": ["compute", "compute/cpu", "compute/cuda"],
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(top):
    for d, _, files in os.walk(top):
        for f in sorted(files):
            if f.endswith((".c", ".h", ".cu", ".cuh")):
                yield d, f


def include_dirs(part):
    """The folders a part's files (a top folder of engine/ and every folder under it)
    may see on their include path: their own, and everything LAYERS lets them reach,
    directly or through a header they include. engine/meson.build builds each part
    with only these, so an include the wrong way across a boundary fails to compile."""
    own = [f for f in LAYERS if f == part or f.startswith(part + "/")]
    seen = set(own)
    pending = list(own)
    while pending:
        for b in LAYERS.get(pending.pop(), []):
            if b not in seen:
                seen.add(b)
                pending.append(b)
    return sorted(seen)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--include-dirs":
        print("\n".join(include_dirs(sys.argv[2])))
        return 0
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    engine = os.path.join(root, "engine")
    kernels = os.path.join(root, "kernels")
    problems = []

    # The table itself must be a layering: no folder reaches itself through it.
    def reaches(a, seen):
        for b in LAYERS.get(a, []):
            if b not in seen:
                seen.add(b)
                reaches(b, seen)
        return seen
    for a in LAYERS:
        if a in reaches(a, set()):
            problems.append(f"LAYERS: {a} reaches itself (a cycle in the table)")

    # Which folder holds each header, by name (includes name headers without a path).
    where = {}
    for d, f in sources(engine):
        if f.endswith((".h", ".cuh")):
            where.setdefault(f, []).append(os.path.relpath(d, engine).replace(os.sep, "/"))
    for d, f in sources(kernels):
        if f.endswith((".h", ".cuh")):
            where.setdefault(f, []).append("kernels")
    for name, folders in sorted(where.items()):
        if len(folders) > 1:
            problems.append(f"{name}: in {', '.join(folders)}: header names must be unique")

    def check(path, part, allowed):
        text = open(path, encoding="utf-8", errors="replace").read()
        for m in INCLUDE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            for target in where.get(os.path.basename(m.group(1)), []):
                if target != part and target not in allowed:
                    problems.append(f"{os.path.relpath(path, root)}:{line}: {part}/ includes "
                                    f"{m.group(1)} ({target}/), which it may not")
            readers = PRIVATE.get(os.path.basename(m.group(1)))
            if readers is not None and part not in readers:
                problems.append(f"{os.path.relpath(path, root)}:{line}: {part}/ includes "
                                f"{m.group(1)}, which only {', '.join(readers)} may")

    for d, f in sources(engine):
        part = os.path.relpath(d, engine).replace(os.sep, "/")
        if part not in LAYERS:
            problems.append(f"engine/{part}/{f}: folder {part}/ is not in LAYERS "
                            f"({os.path.basename(__file__)}); place it there")
            continue
        check(os.path.join(d, f), part, LAYERS[part])
    for d, f in sources(kernels):
        check(os.path.join(d, f), "kernels", KERNELS_MAY_INCLUDE)

    print("1..1")
    for p in problems:
        print("# " + p)
    print(("not ok" if problems else "ok") + " 1 engine folders include only what LAYERS allows")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
