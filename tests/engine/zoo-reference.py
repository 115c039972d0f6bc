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
                                     (ImageNet normalization), and resnet18 after one SGD
                                     step on them (lr 0.01, train mode)
  zoo-reference.py pool DIR          inputs, output gradients and PyTorch's max and
                                     average pools (padded, strided) forward and backward
  zoo-reference.py logits CKPT IMAGES N OUT
                                     the Tandem checkpoint as tools/torch_module.py builds
                                     it (nn.Flatten order), eval-mode logits of N uint8
                                     images of its input shape; with a resnet18 spec, also
                                     loaded strictly into torchvision's resnet18
"""
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

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
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
        model.eval()
        with torch.no_grad():
            logits = model(to_input(images))
        logits.numpy().astype("<f4").tofile(os.path.join(out, name + "-logits.bin"))
        if name == "resnet18":
            model.train()
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            loss = F.cross_entropy(model(to_input(images)), torch.from_numpy(labels).long())
            opt.zero_grad()
            loss.backward()
            opt.step()
            tm.save_safetensors(model.state_dict(), os.path.join(out, name + "-step.safetensors"))


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
    model.eval()
    with torch.no_grad():
        logits = model(x)
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
    logits.numpy().astype("<f4").tofile(out)


def main():
    if sys.argv[1] == "torchvision":
        torchvision_refs(sys.argv[2])
    elif sys.argv[1] == "pool":
        pool_refs(sys.argv[2])
    elif sys.argv[1] == "logits":
        checkpoint_logits(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit("unknown command " + sys.argv[1])


if __name__ == "__main__":
    main()
