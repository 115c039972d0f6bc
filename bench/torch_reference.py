#!/usr/bin/env python3
"""PyTorch reference for bench-train: the same networks, data and optimizer, timed the
same way (one warm-up epoch, then the median of --repeat epochs, evaluation excluded).

With --to-accuracy A it instead trains the BN networks (resnet, the twin of Tandem's
preset, or myrtle, a ResNet-9-style net) with the preset's recipe (Nesterov SGD lr 0.2,
weight decay 5e-4 on weights only, 1 epoch of warm-up from lr/10 then linear decay,
label smoothing 0.1, crop 2 + flip drawn on the GPU) for --epochs epochs per seed of
--seeds, and prints the training seconds (evaluation excluded) until the test accuracy
first reached A, one line a seed: seed=S first=SECONDS|none final=ACC epochs=...

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
    if name == "resnet":
        # Tandem's preset: conv32k3p1,bn,relu, res(conv32,bn,relu,conv32,bn),relu,
        # res(conv64k3s2p1,…) and res(conv128k3s2p1,…) with 1×1 projections, gap, fc10.
        return nn.Sequential(cbr(1, 32), Res(32, 32, 1), Res(32, 64, 2), Res(64, 128, 2),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
    if name == "myrtle":
        # conv32; conv64, pool, residual(two conv64); conv128, pool; conv256, pool,
        # residual(two conv256); global max pool; fc10 (conv = conv3x3-bn-relu).
        return nn.Sequential(cbr(1, 32), cbr(32, 64), nn.MaxPool2d(2),
                             Plus(nn.Sequential(cbr(64, 64), cbr(64, 64))),
                             cbr(64, 128), nn.MaxPool2d(2), cbr(128, 256), nn.MaxPool2d(2),
                             Plus(nn.Sequential(cbr(256, 256), cbr(256, 256))),
                             nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(256, 10))
    sys.exit(f"torch_reference.py: network {name!r} has no PyTorch twin here")


def cbr(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU())


class Plus(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return x + self.body(x)


class Res(nn.Module):
    """res(conv k3 sS p1, bn, relu, conv k3 p1, bn) + input (1×1 conv + bn where the
    shape changes), then relu."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(cbr(cin, cout, stride),
                                  nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(cout))
        self.skip = (nn.Identity() if cin == cout and stride == 1 else
                     nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                   nn.BatchNorm2d(cout)))

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def to_accuracy(a, device):
    images, labels = load(a.dataset)
    folder = FASHION
    test_x = read_idx(os.path.join(folder, "t10k-images-idx3-ubyte.gz")).reshape(-1, 1, 28, 28)
    test_y = read_idx(os.path.join(folder, "t10k-labels-idx1-ubyte.gz"))
    x_all = torch.from_numpy(images.copy()).to(device)
    y_all = torch.from_numpy(labels.astype(np.int64)).to(device)
    tx = torch.from_numpy(test_x.copy()).to(device).float().div_(255.0)
    ty = torch.from_numpy(test_y.astype(np.int64)).to(device)
    n = x_all.shape[0]
    steps_per_epoch = (n + a.batch - 1) // a.batch
    pad = 2
    autocast = a.precision == "bf16"

    def augment(x):
        # Random crop of the image padded by 2, and a flip, per sample, on the GPU.
        b = x.shape[0]
        xp = torch.nn.functional.pad(x, (pad, pad, pad, pad))
        sy = torch.randint(0, 2 * pad + 1, (b,), device=device)
        sx = torch.randint(0, 2 * pad + 1, (b,), device=device)
        rows = (sy[:, None] + torch.arange(28, device=device)[None, :])
        cols = (sx[:, None] + torch.arange(28, device=device)[None, :])
        flip = torch.rand(b, device=device) < 0.5
        cols = torch.where(flip[:, None], cols.flip(1), cols)
        return xp[torch.arange(b, device=device)[:, None, None], 0, rows[:, :, None],
                  cols[:, None, :]].unsqueeze(1)

    for seed in a.seeds:
        torch.manual_seed(seed)
        model = network(a.network).to(device).to(memory_format=torch.channels_last)
        decay = [p for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))
                 for name, p in m.named_parameters(recurse=False) if name == "weight"]
        ids = {id(p) for p in decay}
        rest = [p for p in model.parameters() if id(p) not in ids]
        opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4},
                               {"params": rest, "weight_decay": 0.0}],
                              lr=a.lr, momentum=0.9, nesterov=True)
        loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)

        def lr_at(epoch):
            if epoch < 1:
                return a.lr * (0.1 + 0.9 * epoch)
            return a.lr * (1.0 - min(1.0, (epoch - 1) / (a.epochs - 1)))

        trained, first, accs = 0.0, None, []
        for epoch in range(a.epochs):
            model.train()
            order = torch.randperm(n, device=device)
            torch.cuda.synchronize()
            start = time.perf_counter()
            for i in range(steps_per_epoch):
                for g in opt.param_groups:
                    g["lr"] = lr_at(epoch + i / steps_per_epoch)
                idx = order[i * a.batch:(i + 1) * a.batch]
                x = augment(x_all[idx].float().div_(255.0))
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                    loss = loss_fn(model(x), y_all[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            torch.cuda.synchronize()
            trained += time.perf_counter() - start
            model.eval()
            correct = 0
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16,
                                                 enabled=autocast):
                for j in range(0, tx.shape[0], 1000):
                    correct += (model(tx[j:j + 1000]).argmax(1) == ty[j:j + 1000]).sum().item()
            acc = correct / tx.shape[0]
            accs.append(acc)
            if first is None and acc >= a.to_accuracy:
                first = trained
        print(f"seed={seed} first={first if first is not None else 'none'} "
              f"final={accs[-1]:.4f} trained={trained:.3f} "
              f"accs={' '.join(f'{x:.4f}' for x in accs)}", flush=True)


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
    p.add_argument("--to-accuracy", type=float, default=None)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--seeds", type=lambda t: [int(v) for v in t.split(",")],
                   default=[0, 1, 2])
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    device = torch.device(a.device)
    if a.to_accuracy is not None:
        to_accuracy(a, device)
        return
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
        with torch.autocast(device.type, dtype=torch.bfloat16,
                            enabled=a.precision == "bf16"):
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
