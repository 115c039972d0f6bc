#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""PyTorch reference for bench-train: the same networks, data and optimizer, timed the
same way (one warm-up epoch, then the median of --repeat epochs, evaluation excluded).

The data sits where the model runs (GPU memory for --device cuda), gathered and
normalized per batch as Tandem does, so the comparison is of the training step alone.
Prints one line: samples_per_second=N.

--network resnet is Tandem's `resnet` preset, a ResNet-9-style net, as a PyTorch module
(its state_dict has the names and shapes of Tandem's checkpoints) trained with the
preset's recipe (RECIPE below, each an option): SGD with Nesterov momentum 0.9, lr
0.6, weight decay 5e-4 on conv and fc weights only, label smoothing 0.1, random
horizontal flips done on the device (no crops: --crop 0), test-time flips.
--network basic is the preset before it (three strided basic blocks, gap; the spec
in bench/bench-resnet-gpu.sh), same recipe.
--steps N times N steps instead of an epoch (CPUs are slow at it); --precision bf16
runs under torch.autocast on CUDA. --time-to-accuracy trains the preset's 5 epochs
(1 of warm-up, then linear decay) and prints the training seconds until the test
accuracy first reaches --target; with --prewarm it first runs, off the clock, a step of
each batch shape (full and the epoch's short last one) and an evaluation, then puts
the model (BN statistics too), the optimizer and the augmentation generator back, as
tandem-train's --prewarm does, so both are timed without first-call costs.
"""
import argparse
import copy
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

FASHION = "/usr/share/datasets/fashion-mnist"

# The `resnet` preset's recipe (tdm_config_apply_preset in engine/core/tdm-config.c);
# each is an option here too.
RECIPE = dict(epochs=5, lr=0.6, momentum=0.9, weight_decay=5e-4, warmup=1.0,
              label_smoothing=0.1, crop=0, test_flip=True, test_shift=0)


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(dataset, split="train"):
    if dataset in ("fashion-mnist", "mnist"):
        folder = FASHION if dataset == "fashion-mnist" else os.environ.get(
            "TANDEM_MNIST_DIR", "/usr/share/datasets/mnist")
        prefix = "train" if split == "train" else "t10k"
        images = read_idx(os.path.join(folder, f"{prefix}-images-idx3-ubyte.gz"))
        labels = read_idx(os.path.join(folder, f"{prefix}-labels-idx1-ubyte.gz"))
        return images.reshape(-1, 1, 28, 28), labels
    # Synthetic stand-in of the same shape: throughput does not depend on content.
    rng = np.random.default_rng(0)
    return (rng.integers(0, 256, (60000, 1, 28, 28), dtype=np.uint8),
            rng.integers(0, 10, 60000, dtype=np.uint8))


class Block(nn.Module):
    """A basic residual block: Tandem's res(convCk3sSp1,bn,relu,convCk3p1,bn),relu."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class Residual(nn.Module):
    """res(convCk3p1,bn,relu,convCk3p1,bn,relu): the input plus two conv-bn-relu."""

    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        return x + F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class ResNet9(nn.Module):
    """Tandem's `resnet` preset (TDM_NETWORK_RESNET in engine/model/tdm-network.h),
    with its checkpoint names: conv1-4/bn1-4 at the top, the two blocks layer1.0 and
    layer1.1, fc1 without bias, the logits scaled by 1/8."""

    def __init__(self, channels=1, classes=10):
        super().__init__()
        widths = [(channels, 32), (32, 64), (64, 128), (128, 256)]
        for i, (cin, cout) in enumerate(widths, 1):
            setattr(self, f"conv{i}", nn.Conv2d(cin, cout, 3, 1, 1, bias=False))
            setattr(self, f"bn{i}", nn.BatchNorm2d(cout))
        self.layer1 = nn.ModuleList([Residual(64), Residual(256)])
        self.fc1 = nn.Linear(256, classes, bias=False)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = self.layer1[0](x)
        x = F.max_pool2d(F.relu(self.bn3(self.conv3(x))), 2)
        x = F.max_pool2d(F.relu(self.bn4(self.conv4(x))), 2)
        x = self.layer1[1](x)
        return self.fc1(x.amax((2, 3))) * 0.125


class ResNet(nn.Module):
    """The `resnet` preset before the ResNet-9-style one: three basic blocks."""

    def __init__(self, channels=1, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 32, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.layer1 = nn.Sequential(Block(32, 32, 1))
        self.layer2 = nn.Sequential(Block(32, 64, 2))
        self.layer3 = nn.Sequential(Block(64, 128, 2))
        self.fc1 = nn.Linear(128, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc1(x.mean((2, 3)))


def augment(x, pad, gen):
    """Random crop (zero padding) and horizontal flip of a uint8-derived batch, on its
    device."""
    n, _, h, w = x.shape
    padded = F.pad(x, (pad, pad, pad, pad))
    dy = torch.randint(0, 2 * pad + 1, (n,), device=x.device, generator=gen)
    dx = torch.randint(0, 2 * pad + 1, (n,), device=x.device, generator=gen)
    rows = (dy.view(n, 1) + torch.arange(h, device=x.device)).view(n, 1, h, 1)
    cols = (dx.view(n, 1) + torch.arange(w, device=x.device)).view(n, 1, 1, w)
    flip = torch.rand(n, device=x.device, generator=gen) < 0.5
    cols = torch.where(flip.view(n, 1, 1, 1), cols.flip(3), cols)
    c = x.shape[1]
    idx_n = torch.arange(n, device=x.device).view(n, 1, 1, 1)
    idx_c = torch.arange(c, device=x.device).view(1, c, 1, 1)
    return padded[idx_n, idx_c, rows, cols]


def network(name):
    if name == "resnet":
        return ResNet9()
    if name == "basic":
        return ResNet()
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
    p.add_argument("--steps", type=int, default=0, help="time N steps, not an epoch")
    p.add_argument("--time-to-accuracy", action="store_true")
    p.add_argument("--target", type=float, default=0.94)
    p.add_argument("--prewarm", action="store_true",
                   help="--time-to-accuracy: one untimed step of each batch shape and an "
                        "evaluation first, then undone")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=RECIPE["epochs"])
    p.add_argument("--lr", type=float, default=RECIPE["lr"])
    p.add_argument("--momentum", type=float, default=RECIPE["momentum"])
    p.add_argument("--weight-decay", type=float, default=RECIPE["weight_decay"])
    p.add_argument("--warmup", type=float, default=RECIPE["warmup"])
    p.add_argument("--label-smoothing", type=float, default=RECIPE["label_smoothing"])
    p.add_argument("--crop", type=int, default=RECIPE["crop"])
    p.add_argument("--test-flip", action=argparse.BooleanOptionalAction,
                   default=RECIPE["test_flip"],
                   help="evaluate each test image and its mirror, average the logits")
    p.add_argument("--test-shift", type=int, default=RECIPE["test_shift"],
                   help="also evaluate each test image shifted P pixels up, down, left "
                        "and right (zero filled; mirrored too with --test-flip), as "
                        "Tandem's --test-shift")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    device = torch.device(a.device)
    images, labels = load(a.dataset)
    x_all = torch.from_numpy(images.copy()).to(device)
    y_all = torch.from_numpy(labels.astype(np.int64)).to(device)
    torch.manual_seed(a.seed)
    model = network(a.network).to(device).to(memory_format=torch.channels_last)
    recipe = a.network in ("resnet", "basic")
    if recipe:
        decay = [p for n_, p in model.named_parameters() if p.dim() > 1]
        rest = [p for n_, p in model.named_parameters() if p.dim() <= 1]
        opt = torch.optim.SGD([{"params": decay, "weight_decay": a.weight_decay},
                               {"params": rest, "weight_decay": 0.0}],
                              lr=a.lr, momentum=a.momentum, nesterov=True)
        loss_fn = nn.CrossEntropyLoss(label_smoothing=a.label_smoothing)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
    aug_gen = torch.Generator(device=device).manual_seed(a.seed)
    autocast = a.precision == "bf16" and device.type == "cuda"

    def step(idx):
        x = x_all[idx].float().div_(255.0)
        if recipe:
            x = augment(x, a.crop, aug_gen)
        x = x.contiguous(memory_format=torch.channels_last)
        y = y_all[idx]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if a.compile:
        step = torch.compile(step, mode="reduce-overhead")
    n = x_all.shape[0]
    gen = torch.Generator(device="cpu").manual_seed(a.seed)
    if a.time_to_accuracy:
        time_to_accuracy(a, model, opt, step, x_all, n, gen, device, aug_gen)
        return
    limit = a.steps * a.batch if a.steps > 0 else n

    def epoch():
        order = torch.randperm(n, generator=gen).to(device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(0, limit, a.batch):
            step(order[i:i + a.batch])
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start, time.process_time() - cpu

    epoch()
    runs = [epoch() for _ in range(a.repeat)]
    times = sorted(r[0] for r in runs)
    cpus = sorted(r[1] for r in runs)
    print(f"samples_per_second={limit / times[len(times) // 2]:.1f}")
    print(f"seconds_per_epoch={times[len(times) // 2]:.4f}")
    # Every thread's CPU seconds (bench-train compares them on a shared machine).
    print(f"cpu_seconds_per_epoch={cpus[len(cpus) // 2]:.4f}")


def time_to_accuracy(a, model, opt, step, x_all, n, gen, device, aug_gen):
    """The preset's schedule (--epochs, the first --warmup of them a linear warm-up from
    lr/10, then linear decay to 0), training time only, test accuracy after each epoch
    (with --test-flip the mean of the logits of each image and its mirror, with
    --test-shift P also of its copies shifted P pixels each way, as Tandem's)."""
    images, labels = load(a.dataset, "test")
    x_test = torch.from_numpy(images.copy()).to(device).float().div_(255.0)
    x_test = x_test.contiguous(memory_format=torch.channels_last)
    y_test = torch.from_numpy(labels.astype(np.int64)).to(device)
    epochs, warm, base = a.epochs, a.warmup, a.lr
    steps_per_epoch = (n + a.batch - 1) // a.batch
    autocast = a.precision == "bf16" and device.type == "cuda"

    def evaluate():
        model.eval()
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16,
                                             enabled=autocast):
            def views(x):
                yield x
                s = a.test_shift
                if s > 0:
                    padded = F.pad(x, (s, s, s, s))
                    h, w = x.shape[2], x.shape[3]
                    for dy, dx in ((-s, 0), (s, 0), (0, -s), (0, s)):
                        # v[r, q] = x[r + dy, q + dx], 0 outside: Tandem's convention.
                        yield padded[:, :, s + dy:s + dy + h, s + dx:s + dx + w] \
                            .contiguous(memory_format=torch.channels_last)

            def logits(x):
                out = 0
                for v in views(x):
                    out = out + model(v).float()
                    if a.test_flip:
                        out = out + model(v.flip(3)).float()
                return out
            correct = sum((logits(x_test[j:j + 1000]).argmax(1) == y_test[j:j + 1000])
                          .sum().item() for j in range(0, x_test.shape[0], 1000))
        model.train()
        return correct / x_test.shape[0]

    if a.prewarm:
        start = time.perf_counter()
        saved_model = copy.deepcopy(model.state_dict())
        saved_opt = copy.deepcopy(opt.state_dict())
        saved_gen = aug_gen.get_state()
        first = torch.arange(a.batch, device=device)
        for size in sorted({a.batch, n % a.batch} - {0}, reverse=True):
            step(first[:size])
        evaluate()
        model.load_state_dict(saved_model)
        opt.load_state_dict(saved_opt)
        aug_gen.set_state(saved_gen)
        if device.type == "cuda":
            torch.cuda.synchronize()
        print(f"prewarm_seconds={time.perf_counter() - start:.3f}")
    trained, reached = 0.0, None
    for e in range(epochs):
        order = torch.randperm(n, generator=gen).to(device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for k, i in enumerate(range(0, n, a.batch)):
            t = e + k / steps_per_epoch
            lr = base * (0.1 + 0.9 * t / warm) if t < warm else \
                base * (1 - min(1.0, (t - warm) / max(epochs - warm, 1e-9)))
            for g in opt.param_groups:
                g["lr"] = lr
            step(order[i:i + a.batch])
        if device.type == "cuda":
            torch.cuda.synchronize()
        trained += time.perf_counter() - start
        accuracy = evaluate()
        print(f"epoch={e + 1} accuracy={accuracy:.4f} trained_seconds={trained:.3f}")
        if reached is None and accuracy >= a.target:
            reached = trained
    print(f"time_to_accuracy={reached if reached is not None else float('nan'):.3f}")


if __name__ == "__main__":
    main()
