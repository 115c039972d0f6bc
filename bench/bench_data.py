#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Random-pixel datasets for the GPU benchmarks of real networks (throughput does not
depend on content): at 32 px the CIFAR-10 binary layout (data_batch_1..5.bin,
test_batch.bin: a label byte and 3,072 pixel bytes a record), at any other size a
folder of 24-bit PNG files (stored, not compressed: random pixels do not compress),
train/classC/ and test/classC/ with ten classes. Each size gets batch × 12 training
images (twelve steps an epoch) and a small test set, in ROOT/SIDE-BATCH; a folder
that exists is kept as it is.

    bench_data.py ROOT "32:512 64:256 128:128"     (SIDE:BATCH items)
    bench_data.write(root, side, batch) -> the folder

Used by bench/bench-real-networks.py and bench/bench-resnet18-gpu.sh.
"""
import os
import random
import struct
import sys
import zlib

STEPS_PER_EPOCH = 12


def _png(path, side, rng):
    raw = b"".join(b"\0" + rng.randbytes(side * 3) for _ in range(side))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data)))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" +
                chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b""))


def write(root, side, batch, test=None):
    """ROOT/SIDE-BATCH with batch × 12 training images (and `test` test images: 1,000
    at 32 px, 500 otherwise); returns the folder."""
    folder = os.path.join(root, f"{side}-{batch}")
    if os.path.isdir(folder):
        return folder
    rng = random.Random(side)
    train = batch * STEPS_PER_EPOCH
    tmp = folder + ".partial"
    if side == 32:
        os.makedirs(tmp, exist_ok=True)
        parts = [(f"data_batch_{i}.bin", train // 5 + (i <= train % 5)) for i in range(1, 6)]
        for name, count in parts + [("test_batch.bin", test or 1000)]:
            with open(os.path.join(tmp, name), "wb") as f:
                for _ in range(count):
                    f.write(bytes([rng.randrange(10)]) + rng.randbytes(3072))
    else:
        for split, count in (("train", train), ("test", test or 500)):
            for c in range(10):
                os.makedirs(os.path.join(tmp, split, f"class{c}"), exist_ok=True)
            for i in range(count):
                _png(os.path.join(tmp, split, f"class{i % 10}", f"{i}.png"), side, rng)
    os.rename(tmp, folder)  # only whole folders under their final name
    return folder


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: bench_data.py ROOT "SIDE:BATCH ..."')
    for item in sys.argv[2].split():
        side, batch = map(int, item.split(":"))
        write(sys.argv[1], side, batch)


if __name__ == "__main__":
    main()
