/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-bf16.c — --precision bf16 on CPU workers, end to end: the convolutions take the
 * bf16 path (the parameters move otherwise than in float32, by what bf16's rounding
 * of the operands explains); N workers train as one does within bf16's rounding; and
 * exact mode keeps its promise in bf16 too, the parameters bit-identical on 1 and 3
 * workers; a conv's output stored as bf16 for the bn after it, and a residual block's
 * input and output stored as bf16, move a step by what that one more rounding
 * explains, and N workers still train as one; a replica keeps the storage it was made
 * with; a block's start that makes the bn's sums trains to the two passes' bits. The
 * operations
 * themselves are test-backend-cpu-bf16.c's. */
#include "replica-step.h"
#include "tdm-trainer.h"
#include "tdm-backend.h"
#include "tdm-dataset.h"
#include "tdm-error.h"
#include "tdm-network.h"
#include "tdm-replica.h"
#include "tdm-replica-private.h"
#include "relative-difference.h"
#include "replica-shares.h"
#include "synthetic-idx.h"

#include <math.h>
#include <string.h>

#define U16 (1.0 / 256.0) /* bfloat16's unit roundoff, 2⁻⁸ */

/* The runs' dataset: the synthetic set's images, 1,000 to train on (more than any run
 * here reads) and 200 to test, as IDX files; "synthetic" by name would make 70,000
 * in every run and evaluate 10,000 at its end. */
static char *dataset;

typedef struct {
  const char *network, *devices;
  TdmPrecision precision;
  TdmOptimizerKind optimizer;
  int batch, steps;
  gboolean exact;
  const char *const *freeze; /* module-name prefixes kept fixed, or NULL */
} Run;

static float *
train(const Run *run, size_t *count)
{
  g_autoptr(TdmConfig) cfg = tdm_config_new();
  g_autoptr(GError) error = NULL;
  g_free(cfg->dataset);
  cfg->dataset = g_strdup(dataset);
  g_free(cfg->network);
  cfg->network = g_strdup(run->network);
  g_assert_true(tdm_config_set_devices(cfg, run->devices, &error));
  cfg->precision = run->precision;
  cfg->optimizer = run->optimizer;
  cfg->lr = run->optimizer == TDM_OPTIMIZER_ADAM ? 1e-3 : 0.05;
  cfg->batch = run->batch;
  cfg->max_steps = run->steps;
  cfg->exact = run->exact;
  cfg->seed = 7;
  if (run->freeze != NULL)
    cfg->freeze = g_strdupv((char **)run->freeze);
  g_autoptr(TdmTrainer) trainer = tdm_trainer_new(cfg, NULL, NULL);
  g_assert_true(tdm_trainer_run(trainer, NULL, &error));
  g_assert_no_error(error);
  const float *params = tdm_trainer_get_parameters(trainer, count);
  g_assert_nonnull(params);
  return g_memdup2(params, *count * sizeof(float));
}

/* Whether a bf16 run of net routes gradients by argmax after values it rounded: a bf16
 * max pool (tdm-replica-private.h's pool_bf16()) or a global max pool. */
static gboolean
routes_by_argmax(const char *net)
{
  g_autoptr(TdmNetwork) probe = tdm_network_new(net, 28, 28, 1, 10, NULL);
  gboolean routed = FALSE;
  for (int i = 0; i < probe->layer_count; i++)
    routed |= probe->layers[i].kind == TDM_LAYER_GLOBAL_MAX ||
              (probe->layers[i].kind == TDM_LAYER_POOL &&
               tdm_replica_layer_buffers(probe, i, TDM_BACKEND_CPU, TDM_PRECISION_BF16)
                       .output_type == TDM_DTYPE_BF16);
  return routed;
}

/* One SGD step from the same weights, bf16 against float32: the steps differ (the
 * convolutions read bf16 operands), by about what rounding each operand to 2⁻⁸
 * explains: a product's relative error is at most 2·2⁻⁸, and a gradient sums products
 * of one sign mostly, so its relative error stays a small multiple of that. 1/16 (eight
 * times the per-product bound) would catch a wrong operation, never the rounding. */
static void
path_case(const char *net)
{
  Run run = {net, "cpu", TDM_PRECISION_FP32, TDM_OPTIMIZER_SGD, 64, 1, FALSE};
  size_t n = 0, n16 = 0;
  g_autofree float *p32 = train(&run, &n);
  run.precision = TDM_PRECISION_BF16;
  g_autofree float *p16 = train(&run, &n16);
  g_assert_cmpuint(n, ==, n16);

  g_autoptr(TdmNetwork) network = tdm_network_new(net, 28, 28, 1, 10, NULL);
  g_autofree float *initial = g_new(float, network->parameter_count);
  tdm_network_init_parameters(network, 7, initial);
  g_autofree float *step32 = g_new(float, n), *step16 = g_new(float, n);
  size_t differ = 0;
  for (size_t i = 0; i < n; i++) {
    step32[i] = p32[i] - initial[i];
    step16[i] = p16[i] - initial[i];
    differ += memcmp(&p32[i], &p16[i], sizeof(float)) != 0;
  }
  double rel = relative_difference(step16, step32, n);
  g_test_message("one SGD step in bf16: %zu of %zu parameters differ from float32's, the "
                 "step by %.3g relative", differ, n, rel);
  g_assert_cmpuint(differ, >, n / 2);
  g_assert_cmpfloat(rel, >, 0);
  g_assert_cmpfloat(rel, <=, 1.0 / 16);
}

static void
test_path(void)
{
  path_case("conv8k3p1,relu,pool2,conv16k3p1,relu,pool2,fc10");
  /* 1×1 convs of no padding, of stride 1 (their input their columns, read as it is) and
   * 2, of more outputs than inputs and fewer: bf16 operands both ways too. */
  path_case("conv8k3p1,relu,pool2,conv24k1,relu,conv8k1,relu,conv16k1s2,relu,fc10");
}

/* N workers train as one within bf16's rounding: the shards' gradients are summed in
 * another order (float32), and a value an ulp of float32 apart may round to the
 * neighbouring bfloat16, 2⁻⁸ away, in the next step's operands. */
static void
test_replicas(void)
{
  Run run = {"conv6k3p1,relu,pool2,conv8k3p1,relu,fc24,relu,fc10", "cpu", TDM_PRECISION_BF16,
             TDM_OPTIMIZER_ADAM, 48, 10, FALSE};
  size_t n = 0;
  g_autofree float *one = train(&run, &n);
  const char *devices[] = {"cpu:2", "cpu:3"};
  for (int k = 0; k < 2; k++) {
    run.devices = devices[k];
    size_t m = 0;
    g_autofree float *many = train(&run, &m);
    g_assert_cmpuint(m, ==, n);
    double rel = relative_difference(many, one, n);
    g_test_message("bf16, %s against cpu: relative difference %.3g", devices[k], rel);
    g_assert_cmpfloat(rel, <=, U16);
  }
}

/* conv → bn → relu, a residual block, a strided conv: every conv's output stored as bf16
 * (the bn is its one reader), and the block's input (the stem bn's output) and output,
 * or all kept float32 (TANDEM_BF16_ACTIVATIONS=0). */
/* The resnet preset's layers (TDM_NETWORK_RESNET) at a quarter of its widths: a stem
 * of more outputs than taps, conv, bn, relu, max pool stages and residual bodies that
 * end with relu inside the block, a global max pool, fc10nb, scale0.125. In a bf16 run
 * its convs, pools and blocks' outputs are stored bf16, its bns before pools keep no
 * output, and both blocks keep their gradients bf16. */
static const char plain_net[] =
    "conv8k3p1,bn,relu,conv16k3p1,bn,relu,pool2,res(conv16k3p1,bn,relu,conv16k3p1,bn,relu),"
    "conv32k3p1,bn,relu,pool2,conv64k3p1,bn,relu,pool2,"
    "res(conv64k3p1,bn,relu,conv64k3p1,bn,relu),gmp,fc10nb,scale0.125";

/* torchvision's ResNet-50 in small: its stem, then bottleneck blocks (res(convWk1,bn,relu,
 * convWk3sSp1,bn,relu,conv4Wk1,bn),relu), a projection of stride 1, an identity block
 * and a projection of stride 2. */
static const char bottleneck_net[] =
    "conv8k3p1,bn,relu,pool3s2p1,bottleneck4,bottleneck4,bottleneck8s2,gap,fc10";

static const char bn_net[] = "conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"
                             "conv16k3s2p1,bn,relu,gap,fc10";

/* Whether net has bottleneck blocks: three bns to a block, narrow here (4 to 32
 * channels), each dividing a rounding-sized change by its channel's spread, which the
 * backward carries through the three again; a step of bf16's operands alone moves
 * the gradients by 0.1 relative (measured 0.098 and 0.14), and one more rounding of the
 * stored tensors by as much. */
static gboolean
deep_bn_chains(const char *net)
{
  return strstr(net, "bottleneck") != NULL;
}

/* One SGD step from the same weights with the conv outputs stored as bf16 and as
 * float32. The stored value is the float32 one rounded once, a relative change of at
 * most 2⁻⁸ (U16) of each bn input; the bn subtracts the batch mean and divides by the
 * spread, which scales that change by |x| / σ, a few here (the synthetic images are not
 * centred: 0.018 measured, about 5·U16); statistics, normalization and backward then
 * compute in float32 as before. A block's input and output stored as bf16 change
 * less: the convs that read them round them to bf16 for their columns anyway, and the
 * block's add reads its skip rounded once (2⁻⁸ of a value a ReLU keeps). 1/16,
 * test_path()'s bound for rounding every operand, holds it with room and catches a bn,
 * an add or a mask reading the wrong bits (a change of order one). The blocks'
 * gradients are kept as bf16 with them (block_grad_bf16()): rounded once after the
 * block's ReLU, once where the block's first conv writes its input gradient (as cuDNN
 * does) and once where the block's start sums its two shares in float32, each
 * a relative change of at most 2⁻⁹ of a value that the backward then carries linearly,
 * as the forward carries the stored outputs' rounding: within the same bound, and a
 * share lost or added twice (a change of order one) is not. block_tensors: how many of
 * the block tensors the plan stores as bf16; grad_blocks: how many blocks keep their
 * gradients as bf16 (a skip buffer of bf16, or a projection's compact float32 one). */
static void
stored_outputs_case(const char *net, int block_tensors, int grad_blocks)
{
  Run run = {net, "cpu", TDM_PRECISION_BF16, TDM_OPTIMIZER_SGD, 64, 1, FALSE};
  size_t n = 0, m = 0;
  g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
  g_autofree float *kept = train(&run, &n);
  g_unsetenv("TANDEM_BF16_ACTIVATIONS");
  g_autofree float *stored = train(&run, &m);
  g_assert_cmpuint(n, ==, m);
  /* Max pools after bns and a global max pool route each window's gradient to its
   * largest input: where two inputs come within a rounding of each other, bf16's
   * rounding (of the conv's operands as of a stored tensor) may pick the other, an
   * order-one change of that one gradient, and such choices add up over the pools;
   * bottleneck blocks' chains of narrow bns scale each rounding up (deep_bn_chains()). The
   * bound there is what bf16's operands alone move the step from float32's (the same
   * run in fp32, this machine's bits either way), twice: storing a tensor rounds each
   * value once more, as rounding the operands does once; an operation that loses or
   * doubles a share moves it by order one. */
  double bound = 1.0 / 16;
  if (routes_by_argmax(net) || deep_bn_chains(net)) {
    g_autoptr(TdmNetwork) shape = tdm_network_new(net, 28, 28, 1, 10, NULL);
    g_autofree float *initial = g_new(float, shape->parameter_count);
    tdm_network_init_parameters(shape, 7, initial);
    Run wide = run;
    wide.precision = TDM_PRECISION_FP32;
    size_t k = 0;
    g_autofree float *fp32 = train(&wide, &k);
    g_assert_cmpuint(k, ==, n);
    g_autofree float *step_fp32 = g_new(float, n), *step_kept = g_new(float, n);
    for (size_t i = 0; i < n; i++) {
      step_fp32[i] = fp32[i] - initial[i];
      step_kept[i] = kept[i] - initial[i];
    }
    double operands = relative_difference(step_kept, step_fp32, n);
    g_test_message("%s: bf16's operands alone move the step by %.3g relative from float32's",
                   net, operands);
    g_assert_cmpfloat(operands, <, 0.5);
    bound = MAX(bound, 2 * operands);
  }

  g_autoptr(TdmNetwork) network = tdm_network_new(net, 28, 28, 1, 10, NULL);
  /* Every conv here has a bn after it: the plan stores them all, but where a tiling
   * pool follows the bn that is not a bf16 one (a tiling pool whose output is stored
   * bf16); a pool that does not tile reads the bn's own output. */
  int blocks = 0;
  for (int i = 0; i < network->layer_count; i++) {
    TdmDtype type =
        tdm_replica_layer_buffers(network, i, TDM_BACKEND_CPU, TDM_PRECISION_BF16).output_type;
    if (network->layers[i].kind == TDM_LAYER_CONV && i + 2 < network->layer_count &&
        network->layers[i + 2].kind == TDM_LAYER_POOL) {
      const TdmLayer *pool = &network->layers[i + 2];
      TdmLayerBuffers pb =
          tdm_replica_layer_buffers(network, i + 2, TDM_BACKEND_CPU, TDM_PRECISION_BF16);
      gboolean tiles = pool->stride == pool->kernel && pool->pad == 0;
      gboolean pool16 = tiles && pb.output_type == TDM_DTYPE_BF16;
      g_assert_cmpint(type, ==, !tiles || pool16 ? TDM_DTYPE_BF16 : TDM_DTYPE_F32);
      /* The bn between keeps no output where the pool is a bf16 one. */
      if (pool16)
        g_assert_cmpuint(
            tdm_replica_layer_buffers(network, i + 1, TDM_BACKEND_CPU, TDM_PRECISION_BF16)
                .output,
            ==, 0);
    } else if (network->layers[i].kind == TDM_LAYER_CONV &&
               stem_output_recomputed(network, i, TRUE))
      /* Stored as bf16 in the gradient region, computed again for its bn's backward. */
      g_assert_cmpuint(
          tdm_replica_layer_buffers(network, i, TDM_BACKEND_CPU, TDM_PRECISION_BF16).output, ==,
          0);
    else if (network->layers[i].kind == TDM_LAYER_CONV)
      g_assert_cmpint(type, ==, TDM_DTYPE_BF16);
    else
      blocks += type == TDM_DTYPE_BF16;
  }
  g_assert_cmpint(blocks, ==, block_tensors);
  int kept16 = 0;
  for (int i = 0; i < network->layer_count; i++) {
    const TdmLayer *l = &network->layers[i];
    if (l->kind != TDM_LAYER_RES_END)
      continue;
    TdmLayerBuffers buf = tdm_replica_layer_buffers(network, i, TDM_BACKEND_CPU,
                                                    TDM_PRECISION_BF16);
    const TdmLayer *begin = &network->layers[l->partner];
    size_t in = (size_t)begin->in_h * begin->in_w * begin->in_c;
    /* A projection of stride 1 keeps a compact gradient as wide as its input. */
    kept16 += buf.skip_type == TDM_DTYPE_BF16 || buf.skip < in ||
              (l->projection && l->stride == 1 && block_grad_bf16(network, i, TRUE));
  }
  g_assert_cmpint(kept16, ==, grad_blocks);
  g_autofree float *initial = g_new(float, network->parameter_count);
  tdm_network_init_parameters(network, 7, initial);
  g_autofree float *step_kept = g_new(float, n), *step_stored = g_new(float, n);
  size_t differ = 0;
  for (size_t i = 0; i < n; i++) {
    step_kept[i] = kept[i] - initial[i];
    step_stored[i] = stored[i] - initial[i];
    differ += memcmp(&kept[i], &stored[i], sizeof(float)) != 0;
  }
  double rel = relative_difference(step_stored, step_kept, n);
  g_test_message("%s: one SGD step, conv outputs stored as bf16: %zu of %zu parameters "
                 "differ from float32 storage's, the step by %.3g relative", net, differ, n,
                 rel);
  g_assert_cmpuint(differ, >, 0);
  g_assert_cmpfloat(rel, <=, bound);
}

static void
test_stored_outputs(void)
{
  /* The stem bn's output and the block's: a strided conv reads the latter. */
  stored_outputs_case(bn_net, 2, 1);
  /* A stem of more outputs than taps (16 > 9), which stores its output through a float32
   * product rounded after, and a 1×1 conv of stride 1, whose bf16 product over its input
   * (its columns) writes bf16 itself, the bn before it normalized as it is copied. */
  stored_outputs_case("conv16k3p1,bn,relu,conv24k1,bn,relu,gap,fc10", 0, 0);
  /* A block with a projection, whose conv output is stored as bf16 too; its 1×1 conv
   * (more outputs than its input's channels) reads the block's bf16 input as bf16
   * operands, and the global pool the block's output. */
  stored_outputs_case("conv8k3p1,bn,relu,res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10",
                      2, 1);
  /* Two identity blocks, the first one's output the second's input and skip. */
  stored_outputs_case("conv8k3p1,bn,relu,2*(res(conv8k3p1,bn,relu,conv8k3p1,bn),relu),gap,fc10",
                      3, 2);
  /* Both: an identity block, then a projection of stride 2 (its compact gradient at the
   * pixels it reads) whose start sums it with its first conv's, rounded once, for the
   * first block's end. */
  stored_outputs_case("conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"
                      "res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10",
                      3, 2);
  /* A stem max pool of stride 2 and padding 1 before a block (torchvision's ResNets):
   * it normalizes its bn's input as it reads it (the bn keeps no output; each value
   * rounded to bf16 as the bn would store it) and writes the block's input as bf16; its
   * backward reads the block's bf16 input gradient. */
  stored_outputs_case("conv8k3p1,bn,relu,pool3s2p1,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"
                      "gap,fc10",
                      2, 1);
  /* The preset's layers: each conv's output for its bn stored bf16, a bn before a
   * tiling pool normalized as the pool reads it (its output never written), the three
   * pools' outputs and the two blocks' stored bf16 (a conv, a block and the global max
   * pool read them), the gradients through the pools and both blocks bf16. */
  stored_outputs_case(plain_net, 5, 2);
  /* torchvision's bottlenecks in small (1×1, 3×3, 1×1 of four times the width): their
   * 1×1 convs take bf16 operands, so the bn before the last one is normalized as it
   * reads it, the blocks' outputs (read by the next block's 1×1 conv and projection)
   * are stored bf16, and every block keeps its gradients bf16: a projection of stride
   * 1, an identity block, a projection of stride 2. The stem pool's output and the
   * three blocks' are bf16 (the stem bn's is never written). */
  stored_outputs_case(bottleneck_net, 4, 3);
  /* The same blocks after a stem without its max pool (no gradient routed by argmax):
   * the stem bn's output (the blocks' input) and the three blocks' bf16. */
  stored_outputs_case("conv8k3p1,bn,relu,bottleneck4,bottleneck4,bottleneck8s2,gap,fc10", 4, 3);
}

/* Frozen layers below the trained ones: a frozen bn normalizes with its running
 * statistics, and where its output has no buffer (the conv after it normalizes the bn's
 * input as it reads it in training; the block's end adds the block's last bn as it
 * computes it) it is written where the next layer reads it and, for the first trained
 * conv's weight gradient, computed again. Against the same runs with every activation
 * kept float32 (TANDEM_BF16_ACTIVATIONS=0), which store those outputs: the frozen
 * parameters stay as they were in both, and the trained ones move alike, within
 * stored_outputs_case()'s 1/16 (a conv's weight gradient from wrongly normalized
 * inputs would be off by order one). A frozen bn whose output is stored bf16 (for a
 * pool) writes it as bf16 (bn_forward_eval_bf16). */
static void
frozen_case(const char *net, int steps, const char *const *freeze, const char *first_trained)
{
  Run run = {net, "cpu", TDM_PRECISION_BF16, TDM_OPTIMIZER_SGD, 64, steps, FALSE, freeze};
  size_t n = 0, m = 0;
  g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
  g_autofree float *kept = train(&run, &n);
  g_unsetenv("TANDEM_BF16_ACTIVATIONS");
  g_autofree float *stored = train(&run, &m);
  g_assert_cmpuint(n, ==, m);

  g_autoptr(TdmNetwork) network = tdm_network_new(net, 28, 28, 1, 10, NULL);
  g_autofree float *initial = g_new(float, network->parameter_count);
  tdm_network_init_parameters(network, 7, initial);
  size_t trained = 0, first_count = 0;
  for (int i = 0; i < network->layer_count; i++)
    if (strcmp(network->layers[i].name, first_trained) == 0) {
      trained = network->layers[i].param_offset;
      first_count = network->layers[i].param_count;
    }
  g_assert_cmpuint(trained, >, 0);
  g_assert_true(memcmp(kept, initial, trained * sizeof(float)) == 0);
  g_assert_true(memcmp(stored, initial, trained * sizeof(float)) == 0);
  size_t count = n - trained;
  g_autofree float *step_kept = g_new(float, count), *step_stored = g_new(float, count);
  for (size_t i = 0; i < count; i++) {
    step_kept[i] = kept[trained + i] - initial[trained + i];
    step_stored[i] = stored[trained + i] - initial[trained + i];
  }
  double rel = relative_difference(step_stored, step_kept, count);
  double first = relative_difference(step_stored, step_kept, first_count);
  g_test_message("frozen up to %s: the trained parameters' steps differ by %.3g relative, "
                 "%s's by %.3g", first_trained, rel, first_trained, first);
  size_t moved = 0;
  for (size_t i = 0; i < count; i++)
    moved += step_kept[i] != 0.0f;
  g_assert_cmpuint(moved, >, count / 2);
  /* Where max pools route by rounded values, twice what bf16's operands alone move the
   * same frozen run from float32's (stored_outputs_case() says why). */
  double bound_rel = 1.0 / 16, bound_first = 1.0 / 16;
  if (routes_by_argmax(net)) {
    Run wide = run;
    wide.precision = TDM_PRECISION_FP32;
    size_t k = 0;
    g_autofree float *fp32 = train(&wide, &k);
    g_assert_cmpuint(k, ==, n);
    g_assert_true(memcmp(fp32, initial, trained * sizeof(float)) == 0);
    g_autofree float *step_fp32 = g_new(float, count);
    for (size_t i = 0; i < count; i++)
      step_fp32[i] = fp32[trained + i] - initial[trained + i];
    double ops = relative_difference(step_kept, step_fp32, count);
    double ops_first = relative_difference(step_kept, step_fp32, first_count);
    g_test_message("frozen up to %s: bf16's operands alone move them by %.3g and %.3g",
                   first_trained, ops, ops_first);
    g_assert_cmpfloat(ops, <, 0.5);
    g_assert_cmpfloat(ops_first, <, 0.5);
    bound_rel = MAX(bound_rel, 2 * ops);
    bound_first = MAX(bound_first, 2 * ops_first);
  }
  g_assert_cmpfloat(rel, <=, bound_rel);
  g_assert_cmpfloat(first, <=, bound_first);
}

static void
test_stored_frozen(void)
{
  /* The first trained conv reads a frozen bn's output, which has no buffer. */
  const char *net = "conv8k3p1,bn,relu,conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),"
                    "relu,conv16k3s2p1,bn,relu,gap,fc10";
  const char *const stem[] = {"conv1", "bn1", NULL};
  frozen_case(net, 3, stem, "conv2");
  /* A frozen block whose last bn the block's end adds, and the stem. */
  const char *const block[] = {"conv1", "bn1", "conv2", "bn2", "layer1", NULL};
  frozen_case(net, 3, block, "conv3");
  /* The preset's layers, frozen up to the bn before the first pool: that bn, whose
   * output has no buffer in training (the pool normalizes as it reads), writes it into
   * the free gradient buffer for the pool to read. One step: its max pools route by
   * argmax, and after three steps even bf16's operands alone move it by order one. */
  const char *const plain[] = {"conv1", "bn1", "conv2", "bn2", NULL};
  frozen_case(plain_net, 1, plain, "layer1.0.conv1");
  /* The CIFAR stem, whose conv keeps no output (stem_output_recomputed()): the conv
   * frozen, its bn trained (its backward reads the conv's output computed again); and
   * both frozen (the frozen bn reads it from the gradient region in the forward). */
  const char *stem_net = "conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"
                         "conv16k3s2p1,bn,relu,gap,fc10";
  const char *const stem_conv[] = {"conv1", NULL};
  frozen_case(stem_net, 3, stem_conv, "bn1");
  frozen_case(stem_net, 3, stem, "layer1.0.conv1");
  /* torchvision's stem frozen: its bn's bf16 output for the 3×3 pool of stride 2. */
  frozen_case("conv8k3p1,bn,relu,pool3s2p1,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,gap,fc10",
              3, stem, "layer1.0.conv1");
  /* Bottlenecks: the first trained conv a 1×1 one after a frozen bn that has no
   * buffer (it reads that bn's output from the gradient buffer, then computes it again
   * for its weight gradient); and a whole block with its projection frozen, whose
   * last bn the block's end adds a chunk of rows at a time into its bf16 output beside
   * the projection's frozen bn output, bf16. */
  const char *const upto_bn2[] = {"conv1", "bn1", "layer1.0.conv1", "layer1.0.bn1",
                                  "layer1.0.conv2", "layer1.0.bn2", NULL};
  frozen_case(bottleneck_net, 3, upto_bn2, "layer1.0.conv3");
  const char *const first_block[] = {"conv1", "bn1", "layer1.0", NULL};
  frozen_case(bottleneck_net, 3, first_block, "layer1.1.conv1");
}

/* N workers (synchronized bn) train as one with the conv outputs stored as bf16, within
 * bf16's rounding as test_replicas() says (0.00105 measured).
 * SGD: Adam divides each gradient by its own size, so a rounding-sized difference in a
 * near-zero gradient becomes a step-sized one. */
/* The relative difference between 1 and 3 CPU workers after run's steps. */
static double
split_difference(const Run *run)
{
  Run split = *run;
  size_t n = 0, m = 0;
  g_autofree float *one = train(&split, &n);
  split.devices = "cpu:3";
  g_autofree float *three = train(&split, &m);
  g_assert_cmpuint(m, ==, n);
  return relative_difference(three, one, n);
}

static void
test_stored_replicas(void)
{
  Run run = {bn_net, "cpu", TDM_PRECISION_BF16, TDM_OPTIMIZER_SGD, 48, 6, FALSE};
  double rel = split_difference(&run);
  g_test_message("bf16 with stored outputs, %s, cpu:3 against cpu: relative difference %.3g",
                 bn_net, rel);
  g_assert_cmpfloat(rel, <=, U16);
  /* The preset's layers: their max pools route gradients by argmax, so the split's
   * rounding-sized differences (the synchronized bn's sums in another order) move a
   * value across a tie now and then, and the steps after carry that on; float32
   * storage does the same (0.0043 measured here, above 2⁻⁸). The bound: within twice
   * what the same split gives with every activation stored float32, or 2⁻⁸. */
  run.network = plain_net;
  double stored = split_difference(&run);
  g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
  double kept = split_difference(&run);
  g_unsetenv("TANDEM_BF16_ACTIVATIONS");
  g_test_message("%s, cpu:3 against cpu: %.3g with bf16 storage, %.3g with float32 storage",
                 plain_net, stored, kept);
  g_assert_cmpfloat(kept, <, 1.0 / 16);
  g_assert_cmpfloat(stored, <=, MAX(U16, 2 * kept));
  /* Bottleneck blocks behind the same stem pool, likewise (their narrow bns' chains scale
   * a rounding-sized difference as they scale storage's, stored_outputs_case()). */
  run.network = bottleneck_net;
  stored = split_difference(&run);
  g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
  kept = split_difference(&run);
  g_unsetenv("TANDEM_BF16_ACTIVATIONS");
  g_test_message("%s, cpu:3 against cpu: %.3g with bf16 storage, %.3g with float32 storage",
                 bottleneck_net, stored, kept);
  g_assert_cmpfloat(kept, <, 1.0 / 16);
  g_assert_cmpfloat(stored, <=, MAX(U16, 2 * kept));
}

/* Whether a replica stores its activations as bf16 is decided when it is made
 * (TANDEM_BF16_ACTIVATIONS read then, never by the passes): a replica made with bf16
 * storage steps with the same bits while the environment says 0, and one made under 0
 * keeps float32 storage after the variable is gone, its step within stored_outputs_case()'s
 * 1/16 of the other's and not the same. */
static void
test_decided_once(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(bn_net, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 64, 16);
  size_t n = net->parameter_count;
  g_autofree float *initial = g_new(float, n);
  tdm_network_init_parameters(net, 7, initial);
  TdmBackend *b16 = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
  TdmBackend *b32 = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  TdmReplica *stored = tdm_replica_new(b16, net, 32, data->train, data->test, &error);
  g_assert_no_error(error);
  g_autofree float *reference = replica_step_gradients(stored, initial, 32);
  g_assert_true(g_setenv("TANDEM_BF16_ACTIVATIONS", "0", TRUE));
  TdmReplica *kept = tdm_replica_new(b32, net, 32, data->train, data->test, &error);
  g_assert_no_error(error);
  g_autofree float *again = replica_step_gradients(stored, initial, 32);
  g_unsetenv("TANDEM_BF16_ACTIVATIONS");
  g_autofree float *wide = replica_step_gradients(kept, initial, 32);
  g_assert_true(stored->stores_bf16);
  g_assert_false(kept->stores_bf16);
  g_assert_true(memcmp(reference, again, n * sizeof(float)) == 0);
  double rel = relative_difference(wide, reference, n);
  g_test_message("one step's gradients, bf16 storage against float32 storage: %.3g relative",
                 rel);
  g_assert_cmpfloat(rel, >, 0);
  g_assert_cmpfloat(rel, <=, 1.0 / 16);
  tdm_replica_free(kept);
  tdm_replica_free(stored);
  tdm_backend_free(b32);
  tdm_backend_free(b16);
}

/* CIFAR ResNet-18's layout in small: a stem of more outputs than taps (16 > 9: float32
 * columns; its bn's input gradient goes to its workspace as bf16, which its weight
 * gradient reads widened), identity blocks whose first conv's input gradient is bf16
 * (summed with the skip's share in float32, rounded once), a projection of stride 2.
 * Those gradients, 28×28×16 bf16 values, are each written while the gradient they come
 * from lives outside the gradient region (in the skip buffer, or as bf16 in the conv's
 * workspace), so they take the whole region; the widest written beside something live is
 * the global pool's float32 input gradient, 14×14×32 floats (tdm-replica-plan.c's
 * tdm_replica_gradient_bytes_of()): 25,088 bytes a half, where float32 storage's halves
 * hold the 28×28×16 floats. */
static const char region_net[] =
    "conv16k3p1,bn,relu,2*(res(conv16k3p1,bn,relu,conv16k3p1,bn),relu),"
    "res(conv32k3s2p1,bn,relu,conv32k3p1,bn),relu,gap,fc10";

/* The region's size for region_net (14×14×32 floats a half in bf16, the 28×28×16 floats
 * in float32), and one SGD step and six steps on 3 workers against the
 * float32 storage's and 1 worker's, with the bounds of stored_outputs_case() and
 * test_stored_replicas(): a write that overran a half, or a gradient read after
 * something overwrote it, changes a step by order one. */
static void
test_gradient_region(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(region_net, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  const size_t widest = 28 * 28 * 16 * sizeof(float);
  for (int kind = TDM_BACKEND_CPU; kind <= TDM_BACKEND_CUDA; kind++) {
    g_assert_cmpuint(tdm_replica_gradient_bytes(net, kind, TDM_PRECISION_BF16), ==,
                     14 * 14 * 32 * sizeof(float));
    g_assert_cmpuint(tdm_replica_gradient_bytes(net, kind, TDM_PRECISION_FP32), ==, widest);
  }
  /* The stem bn's output and the three blocks' outputs stored as bf16; the three blocks'
   * gradients kept so. */
  stored_outputs_case(region_net, 4, 3);
  Run run = {region_net, "cpu", TDM_PRECISION_BF16, TDM_OPTIMIZER_SGD, 48, 6, FALSE};
  size_t n = 0, m = 0;
  g_autofree float *one = train(&run, &n);
  run.devices = "cpu:3";
  g_autofree float *three = train(&run, &m);
  g_assert_cmpuint(m, ==, n);
  double rel = relative_difference(three, one, n);
  g_test_message("%s, bf16, cpu:3 against cpu: relative difference %.3g", region_net, rel);
  g_assert_cmpfloat(rel, <=, U16);
}

/* The inference pass of a bf16 run stores what its readers take as bf16 too
 * (infer_output_bf16()): on the preset's layers, every conv's output, the bns' that a
 * conv or a bf16 pool reads, the first two pools' and the first block's end; not the
 * last stage's pool, block end and the bns that end a block (add_out_bf16 adds them in
 * float32): 16 of 26 layers. Its logits against the same replica made with float32
 * storage (TANDEM_BF16_ACTIVATIONS=0), from the same parameters and running statistics:
 * they differ, by what rounding each stored value once explains. A max pool's output
 * moves by no more than its inputs do (the max of values each within a relative 2⁻⁹
 * is within it), a conv's and a bn's carry an input's relative error linearly, so each
 * of the 16 stored tensors adds at most a few 2⁻⁹ to the logits' relative difference:
 * 1/16 is above that and far below an order-one mistake. */
static void
test_inference(void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(plain_net, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  int stored = 0;
  g_autoptr(GString) which = g_string_new(NULL);
  for (int i = 0; i < net->layer_count; i++)
    if (infer_output_bf16(net, i, TRUE)) {
      stored++;
      g_string_append_printf(which, " %d", i);
    }
  g_test_message("inference, %s: outputs stored bf16:%s", plain_net, which->str);
  g_assert_cmpint(stored, ==, 16);
  g_assert_true(infer_output_bf16(net, 1, TRUE));   /* the stem bn, for a conv */
  g_assert_false(infer_output_bf16(net, 9, TRUE));  /* a bn that ends a block */
  g_assert_true(infer_output_bf16(net, 4, TRUE));   /* the first pool */
  g_assert_true(infer_output_bf16(net, 10, TRUE));  /* the first block's end */
  g_assert_false(infer_output_bf16(net, 22, TRUE)); /* the last, read by the global pool */
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 64, 48);
  size_t n = net->parameter_count;
  g_autofree float *initial = g_new(float, n);
  tdm_network_init_parameters(net, 7, initial);
  TdmReplica *r16, *r32;
  replicas_by_storage(net, data, 16, 48, &r16, &r32);
  TdmBackend *b16 = r16->backend, *b32 = r32->backend;
  g_assert_true(r16->stores_bf16);
  g_assert_false(r32->stores_bf16);
  /* One step each (the same bits up to the storage) moves the running statistics off
   * their start, so that the evaluation's bns normalize. */
  g_autofree float *g16 = replica_step_gradients(r16, initial, 16);
  g_autofree float *g32 = replica_step_gradients(r32, initial, 16);
  /* An evaluation chunk three times the training batch: the inference pass keeps to its
   * own buffers. */
  size_t logits = (size_t)48 * net->classes;
  g_autofree float *y16 = g_new(float, logits), *y32 = g_new(float, logits);
  replicas_predict_alike(r32, r16, initial, 48, y32, y16);
  double rel = relative_difference(y16, y32, logits);
  g_test_message("inference, %s: logits with bf16 storage against float32 storage: %.3g "
                 "relative", plain_net, rel);
  g_assert_cmpfloat(rel, >, 0);
  g_assert_cmpfloat(rel, <=, 1.0 / 16);
  tdm_replica_free(r32);
  tdm_replica_free(r16);
  tdm_backend_free(b32);
  tdm_backend_free(b16);
}

/* Exact mode: a chunk's pass is the same operations wherever it runs, bf16 ones
 * included, so 1 and 3 workers end with the same bits (BN, a residual block; then
 * blocks whose gradients are kept as bf16, one with a projection; then region_net, whose
 * widest gradients take the whole gradient region; then the preset's layers, bf16 pools
 * among them). */
static void
test_exact(void)
{
  const char *nets[] = {"conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,pool2,"
                        "conv16k3s2p1,bn,relu,gap,fc10",
                        "conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"
                        "res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10",
                        region_net, plain_net, bottleneck_net};
  for (guint k = 0; k < G_N_ELEMENTS(nets); k++) {
    Run run = {nets[k], "cpu", TDM_PRECISION_BF16, TDM_OPTIMIZER_ADAM, 64, 3, TRUE};
    size_t n = 0, m = 0;
    g_autofree float *one = train(&run, &n);
    run.devices = "cpu:3";
    g_autofree float *three = train(&run, &m);
    g_assert_cmpuint(m, ==, n);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
      differ += memcmp(&one[i], &three[i], sizeof(float)) != 0;
    g_test_message("bf16, exact mode, %s: %zu of %zu parameters differ between 1 and 3 "
                   "workers", nets[k], differ, n);
    g_assert_cmpuint(differ, ==, 0);
  }
}

/* A block's start that makes the sums of the bn below it in its own pass
 * (add_relu_backward_bn_sums_bf16) trains to the same bits as the two passes
 * (TANDEM_START_SUMS=0): basic blocks over a bn with its ReLU and over a block's end,
 * projections of stride 1 and 2, bottlenecks; one worker and two (the synchronized
 * sums step after it unchanged). A projection's start adds its compact share in that
 * pass: every one whose start sums over a block's end (skip_grad_of() gives its buffer
 * room for both), its share past its sum in one buffer or, at the windows' split, its
 * sum in the low window's; the bottlenecks' first start, after the stem's pool, makes
 * no bn's sums (two passes). With two windows (each network with projections splits at
 * one projection's start, whose sum goes to the low window; the fifth's other
 * projection's share lies past its sum) and, for the networks with projections, one
 * (TANDEM_GRADIENT_WINDOWS=0: every such share past its sum), each replica as a worker's
 * (a full shard of the batch a step: tdm_memory_capacity()) checked before it trains
 * (replica_shares_of()). */
static void
test_start_sums(void)
{
  static const struct {
    const char *spec;
    int projections; /* whose start sums over a block's end */
  } nets[] = {{"conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"
               "res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10",
               1},
              {plain_net, 0},
              {bottleneck_net, 1},
              {region_net, 1},
              {"conv16k3p1,bn,relu,res(conv16k3p1,bn,relu,conv16k3p1,bn),relu,"
               "res(conv32k3s2p1,bn,relu,conv32k3p1,bn),relu,"
               "res(conv64k3s2p1,bn,relu,conv64k3p1,bn),relu,gap,fc10",
               2}};
  const char *devices[] = {"cpu", "cpu:2"};
  for (int windows = 2; windows >= 1; windows--)
    for (guint k = 0; k < G_N_ELEMENTS(nets); k++)
      for (guint d = 0; d < G_N_ELEMENTS(devices); d++) {
        if (windows == 1 && nets[k].projections == 0)
          continue;
        Run run = {nets[k].spec, devices[d], TDM_PRECISION_BF16, TDM_OPTIMIZER_SGD, 64, 2,
                   FALSE};
        if (windows == 1)
          g_assert_true(g_setenv("TANDEM_GRADIENT_WINDOWS", "0", TRUE));
        ReplicaShares found =
            replica_shares_of(TDM_DEVICE_CPU, nets[k].spec, run.batch / (int)(d + 1));
        g_assert_cmpint(found.past + found.split, ==, nets[k].projections);
        g_assert_cmpint(found.split, ==, windows == 2 && nets[k].projections > 0 ? 1 : 0);
        g_assert_cmpint(found.other, ==, nets[k].spec == bottleneck_net ? 1 : 0);
        size_t n = 0, m = 0;
        g_autofree float *fused = train(&run, &n);
        g_assert_true(g_setenv("TANDEM_START_SUMS", "0", TRUE));
        g_autofree float *apart = train(&run, &m);
        g_unsetenv("TANDEM_START_SUMS");
        g_unsetenv("TANDEM_GRADIENT_WINDOWS");
        g_assert_cmpuint(m, ==, n);
        size_t differ = 0;
        for (size_t i = 0; i < n; i++)
          differ += memcmp(&fused[i], &apart[i], sizeof(float)) != 0;
        g_test_message("bf16, %s on %s, %d window(s): projection starts in one pass, %d "
                       "with the share past the sum, %d at the split; %zu of %zu parameters "
                       "differ between the block start's sums and the bn's own",
                       nets[k].spec, devices[d], windows, found.past, found.split, differ, n);
        g_assert_cmpuint(differ, ==, 0);
      }
}

/* After a training step, each block end's ReLU mask (the bits its forward wrote beside
 * its bf16 output, which the backward reads instead of that output) is that output's
 * mask, for the step's samples: where the block end's add wrote it (add_out_bf16), where
 * its last bn was folded into it (bn_forward_bf16 with the skip) and where that bn is
 * frozen (bn_forward_eval then add_out_bf16 a chunk of rows at a time); identity blocks,
 * projections and bottlenecks. So the backward's masks are those it read from the bf16
 * outputs before, and the ops that read them give the same bits
 * (test-backend-cpu-bf16-resnet.c's /backend-cpu/bf16/relu-bits). */
static void
relu_bits_case(const char *spec, gboolean freeze_first_block)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmNetwork) net = tdm_network_new(spec, 28, 28, 1, 10, &error);
  g_assert_no_error(error);
  g_autoptr(TdmDatasetPair) data = tdm_dataset_synthetic(3, 40, 20);
  TdmBackend *b = tdm_backend_new(TDM_DEVICE_CPU, TDM_PRECISION_BF16, &error);
  g_assert_no_error(error);
  const int n = 12;
  TdmReplica *r = tdm_replica_new_sized(b, net, n, n, data->train, data->test, &error);
  g_assert_no_error(error);
  g_assert_true(r->stores_bf16);
  /* The first block frozen, through its end: its last bn normalizes with the running
   * statistics as the end adds it. */
  g_autofree uint8_t *frozen = g_new0(uint8_t, net->layer_count);
  int first_end = -1;
  for (int i = 0; i < net->layer_count && first_end < 0; i++)
    if (net->layers[i].kind == TDM_LAYER_RES_END)
      first_end = i;
  g_assert_cmpint(first_end, >, 0);
  if (freeze_first_block) {
    for (int i = 0; i <= first_end; i++)
      frozen[i] = 1;
    r->frozen = frozen;
    r->backward_stop = first_end + 1;
  }
  g_autofree float *params = g_new(float, net->parameter_count);
  tdm_network_init_parameters(net, 7, params);
  g_autofree float *grads = replica_step_gradients(r, params, n);
  /* The masks and outputs as a forward wrote them: a forward again, since the step's
   * backward may put the low window of its gradient buffers over the later layers'
   * pieces, dead by then (TdmGradientWindows). */
  g_autofree int32_t *indices = g_new(int32_t, n);
  for (int k = 0; k < n; k++)
    indices[k] = k;
  tdm_replica_train_loss(r, indices, n);
  int ends = 0;
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    TdmLayerBuffers buf =
        tdm_replica_layer_buffers(net, i, TDM_BACKEND_CPU, TDM_PRECISION_BF16);
    g_assert_cmpuint(buf.relu_bits, ==,
                     l->kind == TDM_LAYER_RES_END && l->fused_relu ? buf.output : 0);
    if (buf.relu_bits == 0)
      continue;
    g_assert_cmpint(buf.output_type, ==, TDM_DTYPE_BF16);
    size_t count = (size_t)n * buf.output;
    g_autofree uint32_t *want = g_new(uint32_t, TDM_RELU_BITS_WORDS(count));
    tdm_relu_bits_of(want, (const uint16_t *)r->acts[i + 1], count);
    size_t positive = 0;
    for (size_t e = 0; e < count; e++) {
      g_assert_cmpuint(tdm_relu_bit_at(r->relu_bits[i], e), ==, tdm_relu_bit_at(want, e));
      positive += tdm_relu_bit_at(want, e);
    }
    g_assert_cmpuint(positive, >, 0);
    g_assert_cmpuint(positive, <, count);
    ends++;
  }
  g_assert_cmpint(ends, >, 0);
  g_test_message("%s%s: %d block ends' masks, each its bf16 output's", spec,
                 freeze_first_block ? ", first block frozen" : "", ends);
  r->frozen = NULL;
  tdm_replica_free(r);
  tdm_backend_free(b);
}

static void
test_relu_bits(void)
{
  relu_bits_case("conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"
                 "res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10",
                 FALSE);
  relu_bits_case("conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1,bn),relu,"
                 "res(conv16k3s2p1,bn,relu,conv16k3p1,bn),relu,gap,fc10",
                 TRUE);
  relu_bits_case(bottleneck_net, FALSE);
  relu_bits_case(bottleneck_net, TRUE);
  /* A body that ends with a conv: the end adds its float32 output (add_out_bf16). */
  relu_bits_case("conv8k3p1,bn,relu,res(conv8k3p1,bn,relu,conv8k3p1),relu,gap,fc10", FALSE);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/bf16/path", test_path);
  g_test_add_func("/bf16/replicas", test_replicas);
  g_test_add_func("/bf16/exact", test_exact);
  g_test_add_func("/bf16/stored-outputs", test_stored_outputs);
  g_test_add_func("/bf16/stored-replicas", test_stored_replicas);
  g_test_add_func("/bf16/stored-frozen", test_stored_frozen);
  g_test_add_func("/bf16/decided-once", test_decided_once);
  g_test_add_func("/bf16/gradient-region", test_gradient_region);
  g_test_add_func("/bf16/inference", test_inference);
  g_test_add_func("/bf16/start-sums", test_start_sums);
  g_test_add_func("/bf16/relu-bits", test_relu_bits);
  dataset = test_synthetic_idx_new(0, 1000, 200);
  int status = g_test_run();
  test_remove_synthetic_idx(dataset);
  return status;
}
