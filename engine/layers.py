#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
# layers.py — which folder of the engine may include which: the one place the layering
# is written down (docs/ARCHITECTURE.md explains it). The build asks it what each
# folder's library sees on its include path (--include-dirs PART, from meson.build
# beside it), so an include the wrong way across a boundary does not compile;
# tests/engine/test-engine-layers.py checks the finer rules against it. A new folder
# must be placed in it.   usage: layers.py --include-dirs PART
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
    "experiments": ["training", "model", "communication", "compute", "compute/devices",
                    "data", "core"],
    "history": ["experiments", "core"],
}
# What kernels/ may include of the engine: the rules it shares with the CPU backend.
KERNELS_MAY_INCLUDE = ["shared"]
# Headers only some folders of the engine may include, whatever LAYERS allows: the
# backends' table, which everything else reaches through the front door's functions.
PRIVATE = {
    "tdm-backend-ops.h": ["compute", "compute/cpu", "compute/cuda"],
}


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


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--include-dirs":
        sys.exit("usage: layers.py --include-dirs PART")
    print("\n".join(include_dirs(sys.argv[2])))
