#!/usr/bin/env python3
"""PyTorch reference for bench-train: the same networks, data and optimizer, timed the
same way (one warm-up epoch, then the median of --repeat epochs, evaluation excluded).

The data sits where the model runs (GPU memory for --device cuda), gathered and
normalized per batch as Tandem does, so the comparison is of the training step alone.
Prints one line: samples_per_second=N.
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn

FASHION = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(dataset):
    if dataset in ("fashion-mnist", "mnist"):
        folder = FASHION if dataset == "fashion-mnist" else os.environ.get(
            "TANDEM_MNIST_DIR", "/usr/share/datasets/mnist")
        images = read_idx(os.path.join(folder, "train-images-idx3-ubyte.gz"))
        labels = read_idx(os.path.join(folder, "train-labels-idx1-ubyte.gz"))
        return images.reshape(-1, 1, 28, 28), labels
    # Synthetic stand-in of the same shape: throughput does not depend on content.
    rng = np.random.default_rng(0)
    return (rng.integers(0, 256, (60000, 1, 28, 28), dtype=np.uint8),
            rng.integers(0, 10, 60000, dtype=np.uint8))


def network(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 1000), nn.ReLU(),
                             nn.Linear(1000, 1000), nn.ReLU(), nn.Linear(1000, 10))
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(7 * 7 * 64, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    sys.exit(f"torch_reference.py: network {name!r} has no PyTorch twin here")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default="fashion-mnist")
    p.add_argument("--network", default="mlp")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--precision", default="fp32")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--compile", action="store_true",
                   help="torch.compile(mode='reduce-overhead')")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    device = torch.device(a.device)
    images, labels = load(a.dataset)
    x_all = torch.from_numpy(images.copy()).to(device)
    y_all = torch.from_numpy(labels.astype(np.int64)).to(device)
    model = network(a.network).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step(idx):
        x = x_all[idx].float().div_(255.0)
        y = y_all[idx]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if a.compile:
        step = torch.compile(step, mode="reduce-overhead")
    n = x_all.shape[0]
    gen = torch.Generator(device="cpu").manual_seed(0)

    def epoch():
        order = torch.randperm(n, generator=gen).to(device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for i in range(0, n, a.batch):
            step(order[i:i + a.batch])
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    epoch()
    times = sorted(epoch() for _ in range(a.repeat))
    print(f"samples_per_second={n / times[len(times) // 2]:.1f}")
    print(f"seconds_per_epoch={times[len(times) // 2]:.4f}")


if __name__ == "__main__":
    main()
