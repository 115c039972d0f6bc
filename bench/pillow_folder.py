#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""pillow_folder.py — the reference for bench-images: load a folder of class folders
the way a PyTorch ImageFolder pipeline does with Pillow, single process, into one
uint8 array: open, convert to L or RGB, centre-crop the square, resize with BOX
(area averaging, as Tandem does). With --draft, JPEGs are opened with Image.draft
first (Pillow's use of the DCT scaling). Prints one JSON line: files, seconds.

usage: pillow_folder.py FOLDER SIZE CHANNELS [--draft]
"""
import json
import os
import sys
import time

import numpy as np
from PIL import Image


def main():
    folder, size, channels = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    draft = "--draft" in sys.argv
    mode = "L" if channels == 1 else "RGB"
    paths = []
    for cls in sorted(os.listdir(folder)):
        d = os.path.join(folder, cls)
        for name in sorted(os.listdir(d)):
            paths.append(os.path.join(d, name))
    out = np.empty((len(paths), size, size, channels), dtype=np.uint8)
    start = time.perf_counter()
    cpu = time.process_time()
    for i, path in enumerate(paths):
        with Image.open(path) as im:
            if draft and im.format == "JPEG":
                im.draft(mode, (size, size))
            im = im.convert(mode)
            w, h = im.size
            side = min(w, h)
            x0, y0 = (w - side) // 2, (h - side) // 2
            im = im.resize((size, size), Image.BOX, box=(x0, y0, x0 + side, y0 + side))
            out[i] = np.asarray(im).reshape(size, size, channels)
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    print(json.dumps({"files": len(paths), "seconds": seconds, "cpu": cpu}))


if __name__ == "__main__":
    main()
