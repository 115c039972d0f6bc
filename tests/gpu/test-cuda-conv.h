/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cuda-conv.h — what test-cuda-conv.c's family shares: the registration of
 * test-cuda-conv-small.c's tests (the backends are test-cuda-layers.h's, set up by
 * test-cuda-conv.c's main()). Only with TDM_HAVE_CUDA. */
#pragma once

/* Registers test-cuda-conv-small.c's tests (the few-channel candidates). */
void test_cuda_conv_add_small (void);
