#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""make-corpus.py [FUZZ_CHECKPOINT] — writes the seed corpus of the fuzz harnesses
into corpus/ beside this script: small valid inputs of each format and a few near
misses, in the layout fuzz-common.h describes. With the path of a built
fuzz-checkpoint harness it also makes the checkpoint seed (a real one-epoch run's
file). Run again after changing a format; the files are committed."""
import gzip
import json
import os
import struct
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))


def write(name, data):
    path = os.path.join(here, "corpus", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def pack(mask, files):
    """A mask byte, then each file as a 4-byte little-endian length and its bytes."""
    out = bytes([mask])
    for data in files:
        out += struct.pack("<I", len(data)) + data
    return out


def idx_images(n, h, w):
    return struct.pack(">IIII", 0x803, n, h, w) + bytes((i * 7) % 256 for i in range(n * h * w))


def idx_labels(n, classes):
    return struct.pack(">II", 0x801, n) + bytes(i % classes for i in range(n))


def gz(data, members=1):
    if members == 1:
        return gzip.compress(data, mtime=0)
    cut = len(data) // members
    parts = [data[i * cut:(i + 1) * cut if i < members - 1 else len(data)] for i in range(members)]
    return b"".join(gzip.compress(p, mtime=0) for p in parts)


# IDX: mask bits 0-3 say which files are present, bits 4-7 which get a .gz name.
train = [idx_images(6, 3, 3), idx_labels(6, 3)]
test = [idx_images(3, 3, 3), idx_labels(3, 3)]
write("idx/raw", pack(0x0F, train + test))
write("idx/gzip", pack(0xFF, [gz(x) for x in train + test]))
write("idx/gzip-members", pack(0xFF, [gz(x, 3) for x in train + test]))
write("idx/mixed", pack(0x5F, [gz(train[0]), train[1], gz(test[0]), test[1]]))
write("idx/missing-test", pack(0x03, train))
write("idx/label-gap", pack(0x0F, [train[0], struct.pack(">II", 0x801, 6) + bytes([0, 1, 2, 0, 200, 1])] + test))
write("idx/lying-gzip", pack(0xFF, [gz(struct.pack(">IIII", 0x803, 38000000, 28, 28)) + bytes(64),
                                    gz(idx_labels(6, 3)), gz(test[0]), gz(test[1])]))

# CIFAR-10: six batch files, records of 1 label byte and 3072 pixel bytes.
def cifar(records, first_label=0):
    return b"".join(bytes([(first_label + r) % 10]) + bytes((r * 13 + i) % 256 for i in range(3072))
                    for r in range(records))


write("cifar/one-record-each", pack(0x3F, [cifar(1, i) for i in range(6)]))
write("cifar/two-records", pack(0x3F, [cifar(2, i) for i in range(6)]))
write("cifar/short-last", pack(0x3F, [cifar(1, i) for i in range(5)] + [cifar(1)[:-5]]))

# Network specs: four shape bytes (height, width, channels, classes, each taken
# modulo its range by the harness), then the spec.
def spec(h, w, c, classes, text):
    return bytes([h - 1, w - 1, c - 1, classes - 1]) + text.encode()


write("network/mlp", spec(28, 28, 1, 10, "mlp"))
write("network/cnn", spec(28, 28, 1, 10, "cnn"))
write("network/cnn-rgb", spec(32, 32, 3, 10, "cnn"))
write("network/fc", spec(4, 4, 1, 3, "fc100,relu,fc3"))
write("network/conv", spec(8, 8, 2, 5, "conv4k3p1,relu,pool2,flatten,fc5"))
write("network/bad", spec(8, 8, 1, 5, "conv0k9p-1,,fc"))
write("network/resnet", spec(32, 32, 3, 10, "resnet"))
write("network/res-block", spec(16, 16, 3, 10, "conv8k3p1,bn,relu,2*(res(conv8k3p1,bn,relu,conv8k3p1,bn),relu),gap,fc10"))
write("network/stride-proj", spec(16, 16, 3, 7, "conv8k3s2p1,res(conv16k3s2p1,bn),avg2,drop0.25,fc7"))
# Nesting beyond the parser's limit (16 levels of groups or blocks): 60,000 groups,
# repeats nested 20 deep, and 16 groups, which still parse.
write("network/deep-groups", spec(28, 28, 1, 10, "(" * 60000 + "fc10" + ")" * 60000))
write("network/deep-repeats", spec(8, 8, 1, 4, "2*(" * 20 + "relu" + ")" * 20 + ",fc4"))
write("network/groups-16", spec(8, 8, 1, 4, "(" * 16 + "fc4" + ")" * 16))


def safetensors(header):
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header


# A checkpoint header nesting 100,000 arrays (json-glib recurses once a level).
write("checkpoint/deep-header", safetensors(b'{"w":' + b"[" * 100000 + b"1" + b"]" * 100000 + b"}"))

# Run history files: corpus/history/run is a real one (tandem-train --record, 30
# steps of fc10 on the synthetic set); the others are made from it.
run_path = os.path.join(here, "corpus", "history", "run")
if os.path.exists(run_path):
    with open(run_path, "rb") as f:
        run = f.read()
    lines = run.split(b"\n")
    write("history/deep-line", lines[0] + b"\n" + b"[" * 100000 + b"]" * 100000 + b"\n")
    write("history/deep-config", b'{"type":"settings","config":' + b"{\"a\":" * 30000 + b"1" +
          b"}" * 30000 + b"}\n")
    write("history/truncated", run[: len(run) - 25])
    write("history/renamed", run + b'{"type":"name","name":"renamed"}\n')
    # Long lines: device and phase lines listing far more devices than the run has
    # (the reader keeps one entry per device), and a step line padded to ~120 KB.
    many = b",".join(b'{"compute_ms":1,"comm_ms":2,"wait_ms":3}' for _ in range(2500))
    phases = b",".join(b"[1,2,3,4,5,6,7]" for _ in range(3000))
    write("history/long-lines", lines[0] + b"\n" + b'{"type":"devices","step":1,"devices":[' +
          many + b"]}\n" + b'{"type":"phases","step":1,"devices":[' + phases + b"]}\n" +
          b'{"type":"step","step":2,"pad":"' + b"x" * 120000 + b'"}\n')

    # --config files (fuzz-config): a configuration as --print-config writes it, a run
    # file, one nested deep, one with an unknown key, and a checkpoint (below).
    settings = json.loads(lines[0])
    config = json.dumps(settings["config"], separators=(",", ":")).encode()
    write("config/print-config", config + b"\n")
    write("config/run-file", run)
    write("config/deep", b'{"type":"settings","config":{"x":' + b"[" * 100000 + b"1" +
          b"]" * 100000 + b"}}\n")
    write("config/unknown-key", b'{"bacth":3,' + config[1:] + b"\n")
    # An unknown key with a newline in it: the message quoting it stays one line.
    write("config/unknown-key-newline", b'{"gam_\nsteps":3,' + config[1:] + b"\n")
    write("config/long-line", lines[0] + b"\n" + b'{"type":"step","pad":"' + b"y" * 200000 +
          b'"}\n')
    seed = os.path.join(here, "corpus", "checkpoint", "one-epoch.safetensors")
    if os.path.exists(seed):
        with open(seed, "rb") as f:
            write("config/checkpoint", f.read())

# PyTorch .pth files (torch.save's zip of a pickle and raw storages), built by hand so
# that no torch is needed: the state_dict of fuzz-pth's network (conv2k3p1,bn,relu,fc3
# on 4×4 grey) and variants.
import zipfile


class PickleWriter:
    """Just the opcodes torch.save's pickles use."""

    def __init__(self, protocol=2):
        self.out = bytearray(b"\x80" + bytes([protocol]))
        self.protocol = protocol

    def op(self, code):
        self.out += code

    def string(self, s):
        data = s.encode()
        if self.protocol >= 4 and len(data) < 256:
            self.out += b"\x8c" + bytes([len(data)]) + data + b"\x94"
        else:
            self.out += b"X" + struct.pack("<I", len(data)) + data

    def int(self, v):
        self.out += b"K" + bytes([v]) if v < 256 else b"J" + struct.pack("<i", v)

    def glob(self, module, name):
        self.out += b"c" + module.encode() + b"\n" + name.encode() + b"\n"

    def tensor(self, storage_class, key, shape):
        numel = 1
        for d in shape:
            numel *= d
        strides, step = [], 1
        for d in reversed(shape):
            strides.insert(0, step)
            step *= d
        self.glob("torch._utils", "_rebuild_tensor_v2")
        self.op(b"((")
        self.string("storage")
        self.glob("torch", storage_class)
        self.string(key)
        self.string("cpu")
        self.int(numel)
        self.op(b"tQ")
        self.int(0)
        self.op(b"(")
        for d in shape:
            self.int(d)
        self.op(b"t(")
        for s in strides:
            self.int(s)
        self.op(b"t\x89")
        self.glob("collections", "OrderedDict")
        self.op(b")Rt" + b"R")


FUZZ_PTH_TENSORS = [("conv1.weight", [2, 1, 3, 3]), ("bn1.weight", [2]), ("bn1.bias", [2]),
                    ("bn1.running_mean", [2]), ("bn1.running_var", [2]),
                    ("bn1.num_batches_tracked", []), ("fc.weight", [3, 32]), ("fc.bias", [3])]


def pth(protocol=2, half=False, compression=zipfile.ZIP_STORED, extra=b"", pickle_only=False):
    p = PickleWriter(protocol)
    p.glob("collections", "OrderedDict")
    p.op(b")R(")
    storages = []
    for key, (name, shape) in enumerate(FUZZ_PTH_TENSORS):
        counter = name.endswith("num_batches_tracked")
        numel = 1
        for d in shape:
            numel *= d
        if counter:
            blob, cls = struct.pack("<q", 7), "LongStorage"
        elif half:
            blob, cls = struct.pack("<%de" % numel, *[0.25 * (i % 7 - 3) for i in range(numel)]), "HalfStorage"
        else:
            blob, cls = struct.pack("<%df" % numel, *[0.25 * (i % 7 - 3) for i in range(numel)]), "FloatStorage"
        p.string(name)
        p.tensor(cls, str(key), shape)
        storages.append(blob)
    p.op(extra + b"u.")
    if pickle_only:
        return b"\0" + bytes(p.out)
    import io
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as z:
        z.writestr("archive/data.pkl", bytes(p.out))
        for key, blob in enumerate(storages):
            z.writestr("archive/data/%d" % key, blob)
        z.writestr("archive/version", b"3\n")
    return buffer.getvalue()


write("pth/float32", pth())
write("pth/float16-protocol4", pth(protocol=4, half=True))
write("pth/deflated", pth(compression=zipfile.ZIP_DEFLATED))
write("pth/global", pth(extra=b"cposix\nsystem\n"))
write("pth/deep", pth(extra=b"(" * 100))
write("pth/truncated", pth()[:-30])
# A first byte of 0: the pickle alone (fuzz-pth.c says why).
write("pth/pickle-protocol2", pth(pickle_only=True))
write("pth/pickle-protocol4", pth(protocol=4, half=True, pickle_only=True))
write("pth/pickle-global", pth(extra=b"cbuiltins\neval\n", pickle_only=True))

# Image folders: six files in two class folders (cat: png, jpg, png; dog: png, jpg,
# jpeg). PNGs are written here; JPEGs come from ImageMagick's convert when present.
import shutil
import tempfile
import zlib


def png(w, h, colour, seed):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    channels = 3 if colour else 1
    rows = b"".join(b"\0" + bytes((seed + x * 17 + y * 29 + c * 7) % 256
                                   for x in range(w) for c in range(channels)) for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2 if colour else 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def jpeg(w, h, seed):
    convert = shutil.which("convert")
    if convert is None:
        return png(w, h, True, seed)
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "a.png"), os.path.join(tmp, "a.jpg")
        with open(src, "wb") as f:
            f.write(png(w, h, True, seed))
        subprocess.run([convert, src, "-quality", "50", dst], check=True)
        with open(dst, "rb") as f:
            return f.read()


write("image-folder/mixed", pack(0x3F, [png(4, 4, False, 1), jpeg(6, 5, 2), png(5, 3, True, 3),
                                        png(4, 4, True, 4), jpeg(4, 4, 5), jpeg(3, 7, 6)]))
write("image-folder/png-only", pack(0x09, [png(8, 8, True, 7), png(8, 8, False, 8)]))
write("image-folder/one-class", pack(0x07, [png(4, 4, False, 9), jpeg(4, 4, 10), png(2, 2, True, 11)]))

if len(sys.argv) > 1:
    path = os.path.join(here, "corpus", "checkpoint", "one-epoch.safetensors")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    env = dict(os.environ, FUZZ_CHECKPOINT_SEED=path)
    subprocess.run([sys.argv[1], "-runs=0"], env=env, check=True)
    with open(path, "rb") as f:
        good = f.read()
    # Near misses: cut short, and a header whose length is one too long.
    write("checkpoint/truncated", good[: len(good) - 10])
    n = struct.unpack("<Q", good[:8])[0]
    write("checkpoint/long-header", struct.pack("<Q", n + 1) + good[8:])
    # The saved configuration, JSON inside a metadata string, nesting 30,000 deep (within -max_len).

    header = json.loads(good[8:8 + n])
    header["__metadata__"]["config"] = '{"a":' * 30000 + "1" + "}" * 30000
    write("checkpoint/deep-config", safetensors(json.dumps(header).encode()) + good[8 + n:])
