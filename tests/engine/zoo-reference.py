#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""PyTorch's side of test-zoo: reference numbers from torch and torchvision (Debian's
python3-torch and python3-torchvision), and PyTorch's reading of Tandem's checkpoints.
Exits 77 (skip) when they are not installed.

  zoo-reference.py torchvision DIR   torchvision's resnet18(num_classes=10) and resnet50
                                     with seeded weights and BN statistics gathered on
                                     random images then perturbed, as safetensors and
                                     as torch.save writes them (.pth); two
                                     224×224 images (uint8 NHWC), their eval-mode logits
                                     (ImageNet normalization; save_logits says how);
                                     one SGD step of resnet18 (lr 0.01, train mode) on
                                     two 112×112 images: its update in float64, and how
                                     far from it a float32 step may land, per tensor
                                     (step_refs says how);
                                     inputs, output gradients and PyTorch's max and
                                     average pools (padded, strided) forward and backward
  zoo-reference.py logits CKPT IMAGES N OUT [CKPT IMAGES N OUT …]
                                     each Tandem checkpoint as tools/torch_module.py builds
                                     it (nn.Flatten order), eval-mode logits of N uint8
                                     images of its input shape (as save_logits writes
                                     them); with a resnet18 spec, also loaded strictly
                                     into torchvision's resnet18
"""
import copy
import os
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import torchvision
except ImportError as e:
    print("skip: PyTorch or torchvision is not installed (%s)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import torch_module as tm  # noqa: E402

# One thread: the suite runs two tests at a time, and a second thread here mostly
# waits on the first (three times the CPU seconds, measured).
torch.set_num_threads(1)
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def to_input(images, normalize=True):
    x = torch.from_numpy(images).float().permute(0, 3, 1, 2) / 255.0
    return (x - MEAN) / STD if normalize else x


def seeded(name, classes, seed):
    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(num_classes=classes)
    # BN statistics of real activations (random images), then moved a little, and
    # affine parameters away from 1 and 0: nothing in the comparison is trivial.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None
    model.train()
    with torch.no_grad():
        model(torch.randn(4, 3, 224, 224))
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.momentum = 0.1
                m.running_mean.add_(0.05 * torch.randn_like(m.running_mean))
                m.running_var.mul_(torch.empty_like(m.running_var).uniform_(0.8, 1.25))
                m.weight.copy_(torch.empty_like(m.weight).uniform_(0.5, 1.5))
                m.bias.copy_(0.1 * torch.randn_like(m.bias))
    return model


def save_logits(model, x, out):
    """Eval-mode logits of x computed in float64 (as float32) to out, and in out.gap
    how far PyTorch's float32 logits are from them: the largest difference over the
    largest logit, the worst image. Returns the float32 logits."""
    model.eval()
    with torch.no_grad():
        single = model(x)
        double = copy.deepcopy(model).double()(x.double())
    gap = max(((s.double() - d).abs().max() / d.abs().max()).item()
              for s, d in zip(single, double))
    double.numpy().astype("<f4").tofile(out)
    with open(out + ".gap", "w") as f:
        f.write("%.6e\n" % gap)
    return single


def torchvision_refs(out):
    rng = np.random.default_rng(22)
    images = rng.integers(0, 256, size=(2, 224, 224, 3), dtype=np.uint8)
    labels = np.array([3, 7], dtype=np.uint8)
    images.tofile(os.path.join(out, "images.bin"))
    labels.tofile(os.path.join(out, "labels.bin"))
    for name, classes, seed in (("resnet18", 10, 18), ("resnet50", 1000, 50)):
        model = seeded(name, classes, seed)
        tm.save_safetensors(model.state_dict(), os.path.join(out, name + ".safetensors"))
        # The same weights as torchvision publishes them: torch.save of the state_dict.
        torch.save(model.state_dict(), os.path.join(out, name + ".pth"))
        save_logits(model, to_input(images), os.path.join(out, name + "-logits.bin"))
        if name == "resnet18":
            step_refs(model, labels, out)
    pool_refs(out)


class TieFlippingReLU(torch.nn.Module):
    """ReLU whose decision goes the other way wherever the input is within eps of the
    layer's RMS from 0: where float32 rounding may decide unlike float64."""

    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        rms = x.detach().pow(2).mean().sqrt()
        return x * ((x > 0) ^ (x.abs() < self.eps * rms))


class TieFlippingMaxPool(torch.nn.Module):
    """Max pool that takes the second largest input wherever it is within eps of the
    layer's RMS from the largest."""

    def __init__(self, pool, eps):
        super().__init__()
        self.kernel_size, self.stride, self.padding = pool.kernel_size, pool.stride, pool.padding
        self.eps = eps

    def forward(self, x):
        args = (self.kernel_size, self.stride, self.padding)
        first, at_first = F.max_pool2d(x.detach(), *args, return_indices=True)
        rest = x.detach().flatten(2).scatter(2, at_first.flatten(2), float("-inf"))
        second, at_second = F.max_pool2d(rest.view_as(x), *args, return_indices=True)
        rms = x.detach().pow(2).mean().sqrt()
        at = torch.where(first - second < self.eps * rms, at_second, at_first)
        return x.flatten(2).gather(2, at.flatten(2)).view_as(first)


def with_ties_flipped(model, eps):
    model = copy.deepcopy(model)
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, torch.nn.ReLU):
                setattr(module, name, TieFlippingReLU(eps))
            elif isinstance(child, torch.nn.MaxPool2d):
                setattr(module, name, TieFlippingMaxPool(child, eps))
    return model


def sgd_step(model, images, labels, dtype):
    """The state after one SGD step from a copy of model, computed in dtype."""
    model = copy.deepcopy(model).to(dtype)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss = F.cross_entropy(model(to_input(images).to(dtype)), torch.from_numpy(labels).long())
    opt.zero_grad()
    loss.backward()
    opt.step()
    return {k: v.detach().double() for k, v in model.state_dict().items()
            if not k.endswith("num_batches_tracked")}


def step_refs(model, labels, out):
    """One SGD step on two 112×112 images (uint8 NHWC: step-images.bin) in float64 (its
    update, after − before, as float32: resnet18-update.safetensors) and, per tensor,
    how far from it float32 may land, in weights and in updates
    (resnet18-step-gaps.txt): the larger of PyTorch's own float32 steps' distance (two
    summation orders: oneDNN's convolutions and PyTorch's own) and the distance of a
    float64 step whose ReLU and max-pool decisions go the other way wherever they are
    within 1e-4 of the layer's RMS of a tie. Float32 rounding of a pre-activation
    reaches 1e-6 to 1e-4 of its RMS here, so which of those decisions flip depends on
    the summation order, and each flip moves the update of every layer below it (by
    1e-3 to 1e-2 at batch 2): a float32 step is as good as the decisions near a tie let
    it be."""
    images = np.random.default_rng(23).integers(0, 256, size=(2, 112, 112, 3), dtype=np.uint8)
    images.tofile(os.path.join(out, "step-images.bin"))
    before = {k: v.detach().double() for k, v in model.state_dict().items()}
    exact = sgd_step(model, images, labels, torch.float64)
    runs = [sgd_step(with_ties_flipped(model, 1e-4), images, labels, torch.float64)]
    for mkldnn in (True, False):
        torch.backends.mkldnn.enabled = mkldnn
        runs.append(sgd_step(model, images, labels, torch.float32))
    torch.backends.mkldnn.enabled = True
    update = {k: exact[k] - before[k] for k in exact}
    tm.save_safetensors(update, os.path.join(out, "resnet18-update.safetensors"))

    def distances(k, steps):
        scale, step = exact[k].norm().item(), max(update[k].norm().item(), 1e-300)
        weights = max((r[k] - exact[k]).norm().item() for r in steps) / scale
        updates = max(((r[k] - before[k]) - update[k]).norm().item() for r in steps) / step
        return weights, updates

    # name, then weights and update: PyTorch's float32 steps, then the ties flipped.
    with open(os.path.join(out, "resnet18-step-gaps.txt"), "w") as f:
        for k in exact:
            f.write("%s %.6e %.6e %.6e %.6e\n" % ((k,) + distances(k, runs[1:]) +
                                                  distances(k, runs[:1])))


def pool_refs(out):
    torch.manual_seed(7)
    cases = [("max", 3, 2, 1, 9, 9), ("max", 3, 2, 1, 8, 8), ("avg", 3, 1, 1, 7, 6),
             ("avg", 3, 2, 1, 8, 9), ("max", 2, 1, 1, 5, 5)]
    lines = []
    for i, (kind, k, s, p, h, w) in enumerate(cases):
        x = torch.randn(2, 3, h, w, requires_grad=True)
        if kind == "max":
            y = F.max_pool2d(x, k, s, p)
        else:
            y = F.avg_pool2d(x, k, s, p, count_include_pad=True)
        dy = torch.randn_like(y)
        y.backward(dy)
        for tag, t in (("x", x), ("y", y), ("dy", dy), ("dx", x.grad)):
            # NHWC, as Tandem holds activations.
            t.detach().permute(0, 2, 3, 1).contiguous().numpy().astype("<f4").tofile(
                os.path.join(out, "pool%d-%s.bin" % (i, tag)))
        lines.append("%s %d %d %d %d %d %d %d %d" % (kind, 2, h, w, 3, k, s, p, 0))
    with open(os.path.join(out, "pool-cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def checkpoint_logits(ckpt, images_path, n, out):
    """One checkpoint's logits (the logits command takes any number of them at once,
    so the test starts Python once)."""
    model = tm.from_checkpoint(ckpt)
    tensors, meta = tm.read_safetensors(ckpt)
    h, w, c = (int(v) for v in meta["input_shape"].split(","))
    images = np.fromfile(images_path, dtype=np.uint8)[:n * h * w * c].reshape(n, h, w, c)
    x = torch.from_numpy(images).float().permute(0, 3, 1, 2) / 255.0
    if "normalize" in meta:
        mean, std = meta["normalize"].split("/")
        mean = torch.tensor([float(v) for v in mean.split(",")]).view(1, c, 1, 1)
        std = torch.tensor([float(v) for v in std.split(",")]).view(1, c, 1, 1)
        x = (x - mean) / std
    logits = save_logits(model, x, out)
    if meta["network"].startswith("conv64k7s2p3,bn,relu,pool3s2p1,res(conv64k3p1"):
        # A resnet18: torchvision's own module takes the same state_dict, strictly.
        classes = logits.shape[1]
        tv = torchvision.models.resnet18(num_classes=classes)
        state = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
        for k, v in tv.state_dict().items():
            if k.endswith("num_batches_tracked"):
                state[k] = state[k].to(torch.int64).reshape(v.shape)
        tv.load_state_dict(state, strict=True)
        tv.eval()
        with torch.no_grad():
            assert torch.allclose(tv(x), logits, rtol=1e-5, atol=1e-5)


def main():
    if sys.argv[1] == "torchvision":
        torchvision_refs(sys.argv[2])
    elif sys.argv[1] == "logits" and len(sys.argv) > 2 and (len(sys.argv) - 2) % 4 == 0:
        for i in range(2, len(sys.argv), 4):
            checkpoint_logits(sys.argv[i], sys.argv[i + 1], int(sys.argv[i + 2]), sys.argv[i + 3])
    else:
        sys.exit("unknown command " + sys.argv[1])


if __name__ == "__main__":
    main()
