/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-train.h — what test-cuda-train.c and its parts share: each part's
 * registration of its tests. */
#pragma once

/* Registers test-cuda-train-workspace.c's tests. */
void test_cuda_train_workspace_add (void);
