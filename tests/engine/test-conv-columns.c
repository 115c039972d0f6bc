/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-conv-columns.c — convolution columns in chunks of the batch (tdm-conv-columns.h),
 * on any machine: the chunk's samples; even chunks of a batch; the bytes the engine's
 * "im2col" candidate and the replica's own composition take, spelt out for
 * torchvision's 224-px stem and a ResNet's 3×3 layer; the memory plan's column
 * workspace on a GPU, the most any layer's column way takes (the 224-px and 32-px rows
 * of issue 31, each far below the whole batch's columns, which the CPU's plan keeps);
 * and a CPU replica told to build its columns in small chunks, whose training step
 * gives the whole batch's gradients within the rounding of the weight gradients' sums,
 * the same bits twice, in fp32 and bf16, its workspace grown to the chunks' bytes
 * alone; a GPU's bound by the run's precision, and TANDEM_CONV_CHUNK_MIB, the
 * benchmarks' bound for every precision. The CUDA side (every
 * candidate against the CPU, chunked) is tests/gpu/test-cuda-conv.c's. */
#include "resnet18-cifar.h"
#include "synthetic-idx.h"
#include "tdm-backend.h"
#include "tdm-config.h"
#include "tdm-conv-columns.h"
#include "tdm-dataset.h"
#include "tdm-network.h"
#include "tdm-replica-private.h"
#include "tdm-replica.h"

#include <math.h>
#include <string.h>

#define MIB ((size_t)1 << 20)

static void
test_chunk_samples(void)
{
  /* The whole batch where it fits, or where there is no bound. */
  g_assert_cmpint(tdm_conv_chunk_samples(128, MIB, 0), ==, 128);
  g_assert_cmpint(tdm_conv_chunk_samples(64, MIB, 64 * MIB), ==, 64);
  g_assert_cmpint(tdm_conv_chunk_samples(65, MIB, 64 * MIB), ==, 64);
  g_assert_cmpint(tdm_conv_chunk_samples(7, 0, 64 * MIB), ==, 7);
  /* One sample where a sample's columns are more than the bound. */
  g_assert_cmpint(tdm_conv_chunk_samples(3, 65 * MIB, 64 * MIB), ==, 1);
  g_assert_cmpint(tdm_conv_chunk_samples(1, 65 * MIB, 64 * MIB), ==, 1);
  g_assert_cmpint(tdm_conv_chunk_samples(0, MIB, 64 * MIB), ==, 1);
  /* A GPU's chunks by the run's precision: a bf16 run's 32 MiB, a float32 or tf32
   * run's 256 MiB; the CPU's whole batch in any. */
  g_assert_cmpuint(tdm_conv_columns_bound(TDM_BACKEND_CUDA, TDM_PRECISION_BF16), ==, 32 * MIB);
  g_assert_cmpuint(tdm_conv_columns_bound(TDM_BACKEND_CUDA, TDM_PRECISION_FP32), ==, 256 * MIB);
  g_assert_cmpuint(tdm_conv_columns_bound(TDM_BACKEND_CUDA, TDM_PRECISION_TF32), ==, 256 * MIB);
  for (TdmPrecision p = TDM_PRECISION_FP32; p <= TDM_PRECISION_BF16; p++) {
    g_assert_cmpuint(tdm_conv_columns_bound(TDM_BACKEND_CPU, p), ==, 0);
    g_assert_cmpuint(tdm_conv_columns_bound(TDM_BACKEND_CUDA, p), ==, tdm_conv_chunk_bytes(p));
  }
}

/* TANDEM_CONV_CHUNK_MIB sets a GPU chunk's bound in mebibytes, 1 to 4096, for every
 * precision (bf16, float32); anything else is named in a warning and each precision's
 * own kept (32 MiB, 256 MiB). The variable is read once a process: each value in a
 * subprocess of its own, which inherits it (and no G_DEBUG; its warnings not fatal) and
 * prints the bounds it reads; this process's own are put back after. */
static void
test_chunk_mib(void)
{
  if (g_test_subprocess()) {
    g_log_set_always_fatal(G_LOG_FATAL_MASK); /* the warning is what is tested */
    g_print("bounds %zu %zu\n", tdm_conv_columns_bound(TDM_BACKEND_CUDA, TDM_PRECISION_BF16),
            tdm_conv_columns_bound(TDM_BACKEND_CUDA, TDM_PRECISION_FP32));
    return;
  }
  const struct {
    const char *value;
    size_t bf16, fp32; /* mebibytes */
    gboolean warned;
  } cases[] = {{"16", 16, 16, FALSE},    {"1", 1, 1, FALSE},      {"4096", 4096, 4096, FALSE},
               {"256", 256, 256, FALSE}, {"0", 32, 256, TRUE},    {"4097", 32, 256, TRUE},
               {"16 MiB", 32, 256, TRUE}, {"", 32, 256, TRUE},    {"-8", 32, 256, TRUE}};
  g_autofree char *debug = g_strdup(g_getenv("G_DEBUG"));
  g_unsetenv("G_DEBUG");
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_setenv("TANDEM_CONV_CHUNK_MIB", cases[i].value, TRUE);
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
    g_autofree char *want =
        g_strdup_printf("*bounds %zu %zu*", cases[i].bf16 * MIB, cases[i].fp32 * MIB);
    g_test_trap_assert_stdout(want);
    if (cases[i].warned)
      g_test_trap_assert_stderr("*TANDEM_CONV_CHUNK_MIB*not a number of mebibytes*");
    else
      g_test_trap_assert_stderr_unmatched("*TANDEM_CONV_CHUNK_MIB*");
  }
  g_unsetenv("TANDEM_CONV_CHUNK_MIB");
  if (debug != NULL)
    g_setenv("G_DEBUG", debug, TRUE);
}

/* Even chunks (a cuDNN plan is built per batch size): the batch covered once, in order,
 * by chunks whose sizes differ by one at most, each within the bound (or one sample),
 * as few as tdm_conv_chunk_samples() allows; at most two sizes. Spelt out in a bf16
 * run's chunks of 32 MiB for the 128-px bn input of issue 31 (2 MiB a sample as bf16:
 * 8 chunks of 16), the 64-px one (1 MiB a sample: at most 32 a chunk) of an odd batch
 * (97: 25, 24, 24, 24) and of a short last batch (80: 27, 27, 26), and the whole batch
 * where it fits or there is no bound. */
static void
test_even_chunks(void)
{
  TdmConvChunks c = tdm_conv_even_chunks(128, 2 * MIB, 32 * MIB);
  g_assert_cmpint(c.count, ==, 8);
  g_assert_cmpint(c.size, ==, 16);
  g_assert_cmpint(c.large, ==, 8);
  c = tdm_conv_even_chunks(97, MIB, 32 * MIB);
  g_assert_cmpint(c.count, ==, 4);
  g_assert_cmpint(c.size, ==, 25);
  g_assert_cmpint(c.large, ==, 1);
  int m;
  g_assert_cmpint(tdm_conv_chunk_first(&c, 0, &m), ==, 0);
  g_assert_cmpint(m, ==, 25);
  g_assert_cmpint(tdm_conv_chunk_first(&c, 1, &m), ==, 25);
  g_assert_cmpint(m, ==, 24);
  g_assert_cmpint(tdm_conv_chunk_first(&c, 3, &m), ==, 73);
  g_assert_cmpint(m, ==, 24);
  c = tdm_conv_even_chunks(80, MIB, 32 * MIB);
  g_assert_cmpint(c.count, ==, 3);
  g_assert_cmpint(c.size, ==, 27);
  g_assert_cmpint(c.large, ==, 2);
  c = tdm_conv_even_chunks(16, 2 * MIB, 32 * MIB);
  g_assert_cmpint(c.count, ==, 1);
  g_assert_cmpint(c.size, ==, 16);
  c = tdm_conv_even_chunks(500, 2 * MIB, 0);
  g_assert_cmpint(c.count, ==, 1);
  g_assert_cmpint(c.size, ==, 500);
  c = tdm_conv_even_chunks(3, 33 * MIB, 32 * MIB);
  g_assert_cmpint(c.count, ==, 3);
  g_assert_cmpint(c.size, ==, 1);
  g_assert_cmpint(c.large, ==, 3);

  const size_t samples[] = {1, 1000, MIB, 2 * MIB + 3, 5 * MIB, 32 * MIB, 33 * MIB};
  for (size_t k = 0; k < G_N_ELEMENTS(samples); k++) {
    for (int n = 1; n <= 300; n++) {
      c = tdm_conv_even_chunks(n, samples[k], 32 * MIB);
      int most = tdm_conv_chunk_samples(n, samples[k], 32 * MIB);
      g_assert_cmpint(c.count, ==, (n + most - 1) / most);
      g_assert_cmpint(c.size, <=, most);
      g_assert_cmpint(c.large, >=, 1);
      g_assert_cmpint(c.large, <=, c.count);
      int next = 0;
      for (int i = 0; i < c.count; i++) {
        int first = tdm_conv_chunk_first(&c, i, &m);
        g_assert_cmpint(first, ==, next);
        g_assert_true(m == c.size || (m == c.size - 1 && i >= c.large));
        g_assert_cmpint(m, >=, 1);
        g_assert_true(m == 1 || (size_t)m * samples[k] <= 32 * MIB);
        next = first + m;
      }
      g_assert_cmpint(next, ==, n);
    }
  }
}

/* torchvision's stem at 224 px, batch 128: 112×112 output pixels of 147 taps, 3,687,936
 * bytes of bf16 columns a sample (472 MB the batch), so in a bf16 run's chunks of 32 MiB
 * (33,554,432 bytes) 9 samples a chunk (33,191,424 bytes). The engine's forward: the
 * weights' room (64 × 147 × 2 = 18,816 bytes, to 256) before them; its weight gradient:
 * the output gradient as bf16 first (128 × 12,544 × 64 × 2 = 205,520,896 bytes). A
 * float32 run's float32 columns, in its chunks of 256 MiB: 36 samples a chunk. The
 * replica's own composition: the chunk's columns after the output gradient; a bf16 run's
 * float32 stem columns in that run's chunks of 32 MiB. And a 3×3 layer at 56 px
 * (64 → 64): 3,612,672 bytes of bf16 columns a sample, 9 a chunk (float32: 7,225,344, 4
 * a chunk); a 1×1 conv of stride 1 at 56 px (64 → 256), 401,408 bytes of bf16 input a
 * sample, 83 a chunk; a sample larger than the bound (3×3, 64 channels at 256 × 256:
 * 75.5 MB) alone. */
static void
test_bytes(void)
{
  TdmConvShape stem = {128, 224, 224, 3, 64, 7, 3, 2};
  const TdmPrecision bf16 = TDM_PRECISION_BF16, fp32 = TDM_PRECISION_FP32;
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&stem, TDM_CONV_FORWARD, bf16, FALSE, FALSE),
                   ==, 18944 + 33191424);
  g_assert_cmpuint(9 * (size_t)3687936, ==, 33191424);
  g_assert_cmpuint(10 * (size_t)3687936, >, 32 * MIB);
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&stem, TDM_CONV_WGRAD, bf16, FALSE, FALSE), ==,
                   205539840 + 33191424);
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&stem, TDM_CONV_FORWARD, fp32, FALSE, FALSE),
                   ==, 36 * (size_t)12544 * 147 * 4);
  g_assert_cmpuint(36 * (size_t)7375872, <=, 256 * MIB);
  g_assert_cmpuint(37 * (size_t)7375872, >, 256 * MIB);
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&stem, TDM_CONV_FORWARD, TDM_PRECISION_TF32,
                                                FALSE, FALSE),
                   ==, 36 * (size_t)7375872);
  /* A float32 forward that writes bf16 stages the chunk's float32 product after the
   * columns: 25 samples of 7,375,872 + 3,211,264 bytes. */
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&stem, TDM_CONV_FORWARD, fp32, TRUE, FALSE),
                   ==, 25 * (size_t)7375872 + 25 * (size_t)3211264);
  /* A bf16 run's own composition of its stem from float32 columns, its bf16 output staged
   * (the 32-px stem's way, test_plan): in that run's chunks, 3 samples of 32 MiB at most
   * (10,587,136 bytes each: 31,761,408; 4 would pass it), though the columns are
   * float32. */
  TdmConvComposition staged = {.columns = TRUE, .params16 = TRUE, .y16 = TRUE};
  size_t bf16_bound = tdm_conv_columns_bound(TDM_BACKEND_CUDA, bf16);
  g_assert_cmpint(tdm_conv_staged_chunk(&stem, bf16_bound), ==, 3);
  g_assert_cmpuint(4 * (size_t)(7375872 + 3211264), >, 32 * MIB);
  g_assert_cmpuint(tdm_conv_replica_bytes(&stem, &staged, FALSE, FALSE, bf16_bound), ==,
                   3 * (size_t)7375872 + 3 * (size_t)3211264);
  TdmConvComposition how = {.columns = TRUE, .bf16 = TRUE, .bf16_dx = TRUE, .params16 = TRUE};
  g_assert_cmpuint(tdm_conv_replica_bytes(&stem, &how, FALSE, FALSE, bf16_bound), ==, 33191424);
  g_assert_cmpuint(tdm_conv_replica_bytes(&stem, &how, TRUE, FALSE, bf16_bound), ==,
                   205520896 + 33191424);
  /* The whole batch without a bound: the columns of before. */
  g_assert_cmpuint(tdm_conv_replica_bytes(&stem, &how, FALSE, FALSE, 0), ==,
                   (size_t)128 * 12544 * 147 * 2);

  TdmConvShape layer = {128, 56, 56, 64, 64, 3, 1, 1};
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&layer, TDM_CONV_DGRAD, bf16, FALSE, FALSE), ==,
                   51380224 + 73728 + 9 * (size_t)3612672);
  g_assert_cmpuint(10 * (size_t)3612672, >, 32 * MIB);
  /* Float32 columns for an input gradient that is not bf16's way: the larger of the two
   * layouts. */
  how.bf16_dx = FALSE;
  g_assert_cmpuint(5 * (size_t)7225344, >, 32 * MIB);
  g_assert_cmpuint(tdm_conv_replica_bytes(&layer, &how, TRUE, TRUE, bf16_bound), ==,
                   MAX(51380224 + 9 * (size_t)3612672, 4 * (size_t)7225344));
  /* A 1×1 conv of stride 1: the replica multiplies its input as it is, the engine
   * converts it to bf16 in chunks. */
  TdmConvShape direct = {128, 56, 56, 64, 256, 1, 0, 1};
  TdmConvComposition none = {.columns = FALSE};
  g_assert_cmpuint(tdm_conv_replica_bytes(&direct, &none, TRUE, TRUE, bf16_bound), ==, 0);
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&direct, TDM_CONV_FORWARD, bf16, FALSE, FALSE),
                   ==, 32768 + 83 * (size_t)401408);
  g_assert_cmpuint(84 * (size_t)401408, >, 32 * MIB);
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&direct, TDM_CONV_FORWARD, fp32, FALSE, FALSE),
                   ==, 0);
  TdmConvShape wide = {3, 256, 256, 64, 64, 3, 1, 1};
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&wide, TDM_CONV_FORWARD, bf16, FALSE, FALSE),
                   ==, 73728 + (size_t)65536 * 576 * 2);
}

/* The plan's column workspace on a GPU in bf16: the most of the engine's budgets of each
 * call's column way, which the call's least-needing candidate needs no more than: beyond
 * the call's reservations (its output gradient as bf16 in backward where it lies in the
 * workspace, the weights' room), twice what the column way takes, or that and the slack,
 * 64 MiB (more than a chunk's 32 MiB, so always that here). Every bn here writes its
 * conv's bf16 output gradient outside the workspace: over the conv's output
 * (bn_dx_over_input()), or in place in the gradient region (torchvision's stem,
 * bn_dx_in_place()), so a backward reserves only the weights' room. A layer's chunk is
 * as many samples' bf16 columns as 32 MiB (33,554,432 bytes) holds.
 * 224 px, batch 128 (evaluation chunks of 128): the stem's weight gradient reserves
 * 18,944 bytes, then 9 samples' columns (33,191,424: test_bytes): 18,944 + 33,191,424 +
 * 64 MiB = 100,319,232 with the budget (with its output gradient in the workspace,
 * 205,539,840 + 33,191,424 + 64 MiB = 305,840,128; 477,462,528 when the budget doubled
 * the reservations too). A layer1 3×3 conv's backward (56 × 56 × 64): the weights' room
 * (73,728), 9 samples' columns (56·56·576·2 = 3,612,672 each: 32,514,048) and 64 MiB:
 * 99,696,640 (151,076,864 with its output gradient, 51,380,224, in the workspace). A
 * layer3 3×3 conv's (14 × 14 × 256): the weights' room (256 × 2,304 × 2 = 1,179,648), 37
 * samples' columns (14·14·2,304·2 = 903,168 each: 33,417,216; 38 would pass 32 MiB) and
 * 64 MiB: 101,705,728. The most is layer4's (7 × 7 × 512): the weights' room (512 ×
 * 4,608 × 2 = 4,718,592), 74 samples' columns (7·7·4,608·2 = 451,584 each: 33,417,216;
 * 75 would pass 32 MiB) and 64 MiB: 105,244,672 (in chunks of 64 MiB it took the
 * batch's 128 samples, 129,630,208, and layer3's 135,122,944 was the most). The whole
 * batch's float32 columns at the larger capacity were 1,010,494,464 at chunks of 137.
 * 32 px, batch 512: the stem's weight gradient is composed from its bn's bf16 gradient
 * over its output computed again at grad_a (stem_output_recomputed(), 27 taps for 64
 * outputs, float32 columns): the weights' room (64 × 27 × 2, aligned to 256: 3,584) and
 * 90 samples' float32 columns and widened output gradient (90 × 1,024 × (27 + 64) × 4
 * = 33,546,240 bytes; 91 would pass 32 MiB); with its output gradient at the workspace's
 * start (512 × 32 × 32 × 64 × 2 = 67,108,864 more) it was the most, 167,763,968. The
 * most is now layer4's 3×3 conv's backward (4 × 4 × 512): the weights' room (4,718,592),
 * 227 samples' columns (4·4·4,608·2 = 147,456 each: 33,472,512; 228 would pass 32 MiB)
 * and 64 MiB: 105,299,968; a 3×3 layer of 64 channels at 32 × 32, the weights' room
 * (73,728) and 28 samples' columns (1,179,648 each, 33,030,144) and 64 MiB, 100,212,736.
 * The whole columns were 1,274,019,840 at chunks of 540. The CPU keeps the whole batch's
 * float32 columns. */
static void
test_plan(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) tv = tdm_network_new("resnet18", 224, 224, 3, 1000, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) cifar = tdm_network_new(resnet18, 32, 32, 3, 10, &error);
  g_assert_no_error(error);
  const TdmPrecision bf16 = TDM_PRECISION_BF16;
  TdmReplicaPlan gpu = tdm_replica_plan(tv, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, 128, 128);
  g_assert_cmpuint(gpu.columns, ==, 4718592 + 33417216 + 64 * MIB);
  g_assert_cmpuint(gpu.columns, ==, 105244672);
  TdmConvShape tv_layer4 = {128, 7, 7, 512, 512, 3, 1, 1};
  g_assert_cmpuint(tdm_conv_engine_reserved_bytes(&tv_layer4, TDM_CONV_WGRAD, TRUE, TRUE), ==,
                   4718592);
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&tv_layer4, TDM_CONV_WGRAD, bf16, FALSE, TRUE),
                   ==, 4718592 + 74 * (size_t)451584);
  g_assert_cmpuint(74 * (size_t)451584, ==, 33417216);
  g_assert_cmpuint(75 * (size_t)451584, >, 32 * MIB);
  g_assert_cmpuint(tdm_conv_budget_beyond(4718592 + 33417216, 4718592, bf16), ==,
                   4718592 + 33417216 + 64 * MIB);
  /* The layer3 conv's, below it. */
  TdmConvShape layer3 = {128, 14, 14, 256, 256, 3, 1, 1};
  g_assert_cmpuint(tdm_conv_engine_reserved_bytes(&layer3, TDM_CONV_WGRAD, TRUE, TRUE), ==,
                   1179648);
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&layer3, TDM_CONV_WGRAD, bf16, FALSE, TRUE), ==,
                   1179648 + 37 * (size_t)903168);
  g_assert_cmpuint(37 * (size_t)903168, ==, 33417216);
  g_assert_cmpuint(38 * (size_t)903168, >, 32 * MIB);
  g_assert_cmpuint(tdm_conv_budget_beyond(1179648 + 33417216, 1179648, bf16), ==, 101705728);
  /* The layer1 conv's, below it; with its output gradient in the workspace, above. */
  TdmConvShape layer1 = {128, 56, 56, 64, 64, 3, 1, 1};
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&layer1, TDM_CONV_WGRAD, bf16, FALSE, TRUE), ==,
                   73728 + 32514048);
  g_assert_cmpuint(tdm_conv_budget_beyond(73728 + 32514048, 73728, bf16), ==, 99696640);
  g_assert_cmpuint(51453952, ==, (128 * 56 * 56 * 64 * 2 + 64 * 576 * 2 + 255) / 256 * 256);
  g_assert_cmpuint(tdm_conv_budget_beyond(51453952 + 32514048, 51453952, bf16), ==,
                   151076864);
  g_assert_cmpuint(32514048, ==, 9 * 56 * 56 * 576 * 2);
  g_assert_cmpuint(205539840 + 33191424, ==, 238731264);
  g_assert_cmpuint(tdm_conv_budget_beyond(238731264, 205539840, bf16), ==, 305840128);
  TdmConvShape stem = {128, 224, 224, 3, 64, 7, 3, 2};
  g_assert_cmpuint(tdm_conv_engine_reserved_bytes(&stem, TDM_CONV_WGRAD, TRUE, TRUE), ==,
                   18944);
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&stem, TDM_CONV_WGRAD, bf16, FALSE, TRUE), ==,
                   18944 + 33191424);
  g_assert_cmpuint(tdm_conv_budget_beyond(18944 + 33191424, 18944, bf16), ==, 100319232);
  g_assert_cmpuint(tdm_conv_budget(238731264, bf16), ==, 477462528);
  TdmReplicaPlan cpu = tdm_replica_plan(tv, TDM_BACKEND_CPU, TDM_PRECISION_BF16, 128, 128);
  g_assert_cmpuint(cpu.columns, ==, (size_t)128 * 12544 * 147 * 4);
  g_assert_cmpuint(cpu.workspace - cpu.columns, ==, gpu.workspace - gpu.columns);
  /* The evaluation chunk costs the GPU's columns nothing more. */
  g_assert_cmpuint(tdm_replica_plan(tv, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, 128, 137).columns,
                   ==, gpu.columns);
  TdmReplicaPlan small =
      tdm_replica_plan(cifar, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, 512, 512);
  TdmConvShape cifar_stem = {512, 32, 32, 3, 64, 3, 1, 1};
  g_assert_cmpuint(tdm_conv_engine_reserved_bytes(&cifar_stem, TDM_CONV_WGRAD, TRUE, TRUE), ==,
                   3584);
  g_assert_cmpuint(tdm_conv_engine_reserved_bytes(&cifar_stem, TDM_CONV_WGRAD, TRUE, FALSE), ==,
                   (67108864 + 64 * 27 * 2 + 255) / 256 * 256);
  /* Its float32 columns in the bf16 run's chunks (32 MiB: 90 samples), and the bf16
   * run's slack: the run's precision decides, not the columns' type. */
  g_assert_cmpint(tdm_conv_staged_chunk(&cifar_stem, tdm_conv_columns_bound(TDM_BACKEND_CUDA,
                                                                            bf16)),
                  ==, 90);
  g_assert_cmpuint(91 * (size_t)1024 * (27 + 64) * 4, >, 32 * MIB);
  size_t stem_least = 67108864 + 90 * 1024 * (27 + 64) * 4;
  g_assert_cmpuint(tdm_conv_budget_beyond(stem_least, 67112448, bf16), ==, 167763968);
  /* layer4's, the most. */
  TdmConvShape layer4 = {512, 4, 4, 512, 512, 3, 1, 1};
  g_assert_cmpuint(tdm_conv_engine_im2col_bytes(&layer4, TDM_CONV_WGRAD, bf16, FALSE, TRUE), ==,
                   4718592 + 227 * (size_t)147456);
  g_assert_cmpuint(227 * (size_t)147456, ==, 33472512);
  g_assert_cmpuint(228 * (size_t)147456, >, 32 * MIB);
  g_assert_cmpuint(small.columns, ==, 4718592 + 33472512 + 64 * MIB);
  g_assert_cmpuint(small.columns, ==, 105299968);
  /* The widest 3×3 layer's, below it. */
  g_assert_cmpuint(28 * (size_t)1179648, ==, 33030144);
  g_assert_cmpuint(29 * (size_t)1179648, >, 32 * MIB);
  g_assert_cmpuint(73728 + 33030144 + 64 * MIB, ==, 100212736);
  g_test_message(
      "column workspace on a GPU, bf16: 224 px b128 %zu bytes (whole float32 "
      "columns %zu), 32 px b512 %zu bytes (%zu)",
      gpu.columns, cpu.columns, small.columns,
      tdm_replica_plan(cifar, TDM_BACKEND_CPU, TDM_PRECISION_BF16, 512, 512).columns);
  /* A float32 run: float32 columns in its chunks of 256 MiB, no reservations. The most at
   * 224 px: a layer1 3×3 conv, 37 samples of 56 × 56 × 576 × 4 = 7,225,344 bytes
   * (267,337,728; a layer2 3×3 conv of 128 channels, 74 of 3,612,672, as much; the
   * stem's 36 of 7,375,872 take 265,531,392); a chunk's 256 MiB more with the budget
   * (more than twice that). */
  TdmReplicaPlan fp32 = tdm_replica_plan(tv, TDM_BACKEND_CUDA, TDM_PRECISION_FP32, 128, 128);
  g_assert_cmpuint(fp32.columns, ==, 37 * (size_t)7225344 + 256 * MIB);
  g_assert_cmpuint(38 * (size_t)7225344, >, 256 * MIB);
  /* The small cnn in a float32 run at batch 1024: its second conv's float32 columns
   * (1024 × 14 × 14 × 288 × 4 = 231,211,008 bytes) whole, one chunk, and a chunk's
   * 256 MiB with the budget, within which the engine times them (test-conv-budget). */
  g_autoptr(TdmNetwork) cnn = tdm_network_new("cnn", 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  TdmReplicaPlan cnn32 =
      tdm_replica_plan(cnn, TDM_BACKEND_CUDA, TDM_PRECISION_FP32, 1024, 1024);
  g_assert_cmpuint(cnn32.columns, ==, (size_t)231211008 + 256 * MIB);
  g_assert_cmpuint(
      tdm_replica_plan(cnn, TDM_BACKEND_CUDA, TDM_PRECISION_TF32, 1024, 1024).columns, ==,
      cnn32.columns);
  /* The evaluation chunk of those rows: the training's shard, or fewer where its
   * inference buffers, which lie over the training's activations, would need more than
   * they hold: at 224 px, 983,420,928 bytes of activations (the stem's conv and pool
   * outputs bf16, its bn's none: 128 × 112×112×64 × 2 = 205,520,896 fewer than when the
   * bn's was stored bf16, and 121 samples then; the pool's argmax a byte, its window
   * position, not an int32: 128 × 56×56×64 × 3 = 77,070,336 fewer, and 101 samples then)
   * held 99 samples' inference buffers (3 × 112×112×64 floats, the pool's argmax,
   * 56×56×64 bytes, the logits: 9,838,496 bytes a sample); without the projections' conv
   * outputs (computed again for their bns' backward: 128 × (28×28×128 + 14×14×256 +
   * 7×7×512) × 2 = 44,957,696 fewer), 938,463,232 bytes held 95; with the eight block
   * ends' ReLU masks as bits (two ends a stage of 56×56×64, 28×28×128, 14×14×256 and
   * 7×7×512 elements: 128 × 2 × 376,320 / 8 = 12,042,240 bytes more), 950,505,472 hold
   * 96. All without the bn store (TANDEM_BN_STORE=0: the default stores some bn outputs
   * for their conv, which widens the training's activations and so the chunk;
   * test-bn-store.c). */
  g_assert_true(g_setenv("TANDEM_BN_STORE", "0", TRUE));
  const size_t tv_acts = 983420928 - 128 * (size_t)(100352 + 50176 + 25088) * 2 +
                         128 * 2 * (size_t)(200704 + 100352 + 50176 + 25088) / 8;
  g_assert_cmpint(tdm_replica_eval_capacity(tv, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, 128, 500),
                  ==, tv_acts / (3 * 3211264 + 200704 + 4000));
  g_assert_cmpint(tv_acts / (3 * 3211264 + 200704 + 4000), ==, 96);
  g_assert_cmpuint(983420928, ==, 1060491264 - 128 * 56 * 56 * 64 * 3);
  g_assert_cmpuint(
      tdm_replica_plan(tv, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, 128, 0).activations, ==,
      tv_acts);
  g_unsetenv("TANDEM_BN_STORE");
  g_assert_cmpint(
      tdm_replica_eval_capacity(cifar, TDM_BACKEND_CUDA, TDM_PRECISION_BF16, 512, 10000), ==,
      512);
}

/* A network with a 7×7 stem of stride 2, bns normalized as the next conv reads (bf16), a
 * block with a strided projection and a 1×1 conv of stride 1. */
static const char net_spec[] =
    "conv8k7s2p3,bn,relu,conv16k3p1,bn,relu,res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,"
    "conv24k1,relu,gap,fc10";
#define BATCH 16
/* Small enough that the convs' columns come in several chunks, some of them short:
 * the stem's one sample at a time in fp32 (14 × 14 pixels of 49 taps: 38,416 bytes of
 * float32 columns a sample), two in bf16; the block's 3×3 of stride 2 (7 × 7 of 144
 * taps) three bf16 samples at a time, the last chunk one; its projection's 14 float32
 * ones, then 2. */
#define SMALL_BOUND ((size_t)45000)

/* One training step of batch 16 on a CPU replica building its columns in chunks of at
 * most `bound` bytes (0: whole): the gradients, and the workspace grown from 256 bytes. */
static float *
step(TdmPrecision precision, size_t bound, const TdmDatasetPair *data, size_t *workspace,
     int *count)
{
  g_autoptr(GError) error = NULL;
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, precision, &error);
  g_assert_no_error(error);
  g_autoptr(TdmNetwork) net = tdm_network_new(net_spec, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_autofree float *params = g_new(float, net->parameter_count);
  tdm_network_init_parameters(net, 5, params);
  TdmReplica *r =
      tdm_replica_new_planned(b, net, BATCH, BATCH, 256, data->train, data->test, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(r->columns_bound, ==, 0);
  r->columns_bound = bound;
  tdm_backend_upload(b, r->params, params, net->parameter_count * sizeof(float));
  int32_t indices[BATCH];
  for (int i = 0; i < BATCH; i++)
    indices[i] = 3 * i + 1;
  tdm_replica_train_step(r, indices, BATCH, 1.0f / BATCH);
  float *grads = g_new(float, net->parameter_count);
  tdm_backend_download(b, grads, r->grads, net->parameter_count * sizeof(float));
  g_assert_true(tdm_backend_check(b, NULL));
  *workspace = r->columns_bytes;
  *count = net->parameter_count;
  tdm_replica_free(r);
  tdm_backend_free(b);
  return grads;
}

/* The workspace of the step spelt out from the layers: each conv with columns (a
 * projection's 1×1 of stride 2 among them) takes its chunk of columns (the whole batch's
 * where bound is 0), bf16 where its outputs are no more than its taps in bf16 (after the
 * whole output gradient as bf16, unless the bn after it wrote that over the conv's
 * output: bn_dx_over_input(), a projection's bn over its conv's output computed again,
 * projection_output_recomputed()), else float32; a 1×1 conv of no padding, bf16 chunks of
 * its input the same way; a conv the CPU runs whole (Winograd, in fp32) its scratch. */
static size_t
chunked_bytes(const TdmNetwork *net, TdmPrecision precision, size_t bound)
{
  gboolean stores16 = tdm_replica_stores_bf16(TDM_BACKEND_CPU, precision);
  size_t most = 0;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    TdmLayerBuffers buf = tdm_replica_layer_buffers(net, i, TDM_BACKEND_CPU, precision);
    most = MAX(most, buf.conv_work * sizeof(float));
    /* A 1×1 conv of no padding has no columns of its own; in bf16 its input goes as bf16
     * chunks, after its output gradient as bf16 in backward. */
    gboolean direct = precision == TDM_PRECISION_BF16 && l->kind == TDM_LAYER_CONV &&
                      l->kernel == 1 && l->pad == 0;
    if (buf.columns == 0 && !direct)
      continue;
    size_t taps = l->kind == TDM_LAYER_RES_END ? (size_t)net->layers[l->partner].in_c
                                               : (size_t)l->kernel * l->kernel * l->in_c;
    size_t out = (size_t)l->out_c, pixels = (size_t)l->out_h * l->out_w;
    gboolean bf16 = precision == TDM_PRECISION_BF16 && (out <= taps || direct);
    size_t size = bf16 ? 2 : 4;
    size_t chunk =
        bound == 0 ? BATCH : MIN((size_t)BATCH, MAX(bound / (pixels * taps * size), (size_t)1));
    size_t bytes = chunk * pixels * taps * size;
    gboolean outside = l->kind == TDM_LAYER_RES_END
                           ? projection_output_recomputed(net, i, stores16)
                           : i + 1 < net->layer_count &&
                                 bn_dx_over_input(net, i + 1, stores16, stores16);
    if (bf16 && !outside)
      bytes += (size_t)BATCH * pixels * out * 2;
    most = MAX(most, bytes);
  }
  return most;
}

static double
relative_distance(const float *a, const float *b, int count)
{
  double diff = 0, norm = 0;
  for (int i = 0; i < count; i++) {
    diff += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    norm += (double)b[i] * b[i];
  }
  return sqrt(diff / MAX(norm, 1e-30));
}

/* Chunks change only where each weight gradient's float32 sum over its rows (at most
 * 16 × 14 × 14 = 3,136 of them here) is rounded: within rows · 2⁻²⁴ of the whole
 * batch's, relative. Forward and input gradients are the same sums per sample. */
static void
test_replica_chunks(void)
{
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 64, 16);
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(net_spec, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  for (int prec = TDM_PRECISION_FP32; prec <= TDM_PRECISION_BF16; prec += 2) {
    size_t whole_bytes, chunked, again_bytes;
    int count;
    g_autofree float *whole = step(prec, 0, data, &whole_bytes, &count);
    g_autofree float *chunks = step(prec, SMALL_BOUND, data, &chunked, &count);
    g_autofree float *again = step(prec, SMALL_BOUND, data, &again_bytes, &count);
    double distance = relative_distance(chunks, whole, count);
    g_test_message("%s: gradients in chunks of %zu bytes %.3g from the whole batch's; "
                   "workspace %zu bytes (whole: %zu)",
                   tdm_precision_name(prec), SMALL_BOUND, distance, chunked, whole_bytes);
    g_assert_cmpfloat(distance, <=, 3136 * 0x1p-24);
    g_assert_cmpmem(chunks, count * sizeof(float), again, count * sizeof(float));
    g_assert_cmpuint(whole_bytes, ==, chunked_bytes(net, prec, 0));
    g_assert_cmpuint(chunked, ==, chunked_bytes(net, prec, SMALL_BOUND));
    /* In fp32 the CPU's Winograd scratch is the most either way. */
    if (prec == TDM_PRECISION_BF16)
      g_assert_cmpuint(chunked, <, whole_bytes);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/conv-columns/chunk-samples", test_chunk_samples);
  g_test_add_func("/conv-columns/chunk-mib", test_chunk_mib);
  g_test_add_func("/conv-columns/even-chunks", test_even_chunks);
  g_test_add_func("/conv-columns/bytes", test_bytes);
  g_test_add_func("/conv-columns/plan", test_plan);
  g_test_add_func("/conv-columns/replica-chunks", test_replica_chunks);
  return g_test_run();
}
