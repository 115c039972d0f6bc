/* SPDX-License-Identifier: GPL-3.0-or-later */
/* resnet18-cifar.h — the ResNet-18 in the CIFAR layout (BasicBlocks
 * 64-128-256-512, 1×1 projections), as the memory tests build it. */
#pragma once

static const char resnet18[] =
    "conv64k3p1,bn,relu,2*(res(conv64k3p1,bn,relu,conv64k3p1,bn),relu),"
    "res(conv128k3s2p1,bn,relu,conv128k3p1,bn),relu,res(conv128k3p1,bn,relu,conv128k3p1,bn),"
    "relu,res(conv256k3s2p1,bn,relu,conv256k3p1,bn),relu,"
    "res(conv256k3p1,bn,relu,conv256k3p1,bn),relu,res(conv512k3s2p1,bn,relu,conv512k3p1,bn),"
    "relu,res(conv512k3p1,bn,relu,conv512k3p1,bn),relu,gap,fc10";
