/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-plan.c — what a replica keeps for each layer of a network, as its memory plan
 * says (tdm_replica_layer_buffers(), the rule the allocation follows), and in which
 * type: one line a layer with the bytes a sample of its output, argmax, projection and
 * skip gradient, then the gradient buffers' width and the plan's totals at a batch (and
 * with one window of the gradient buffers, TANDEM_GRADIENT_WINDOWS=0).
 * Counted on the host, nothing run: a debug dump for bench/NOTES.md's storage tables.
 *
 *   bench-plan [network [h w c [cpu|cuda [fp32|bf16 [batch]]]]]
 *
 * Defaults: the resnet preset, 28 28 1 (Fashion-MNIST), cuda, bf16, batch 512.
 * TANDEM_BF16_ACTIVATIONS=0 gives the float32 storage of a bf16 run; TANDEM_BN_STORE is
 * read as a run reads it (the per-layer lines leave the stored bn outputs out; the plan
 * counts them). */
#include "tdm-backend.h"
#include "tdm-network.h"
#include "tdm-replica.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *
kind_name(TdmLayerKind kind)
{
  switch (kind) {
  case TDM_LAYER_LINEAR: return "fc";
  case TDM_LAYER_CONV: return "conv";
  case TDM_LAYER_POOL: return "pool";
  case TDM_LAYER_RELU: return "relu";
  case TDM_LAYER_FLATTEN: return "flatten";
  case TDM_LAYER_BN: return "bn";
  case TDM_LAYER_AVGPOOL: return "avgpool";
  case TDM_LAYER_GLOBAL_AVG: return "gap";
  case TDM_LAYER_GLOBAL_MAX: return "gmp";
  case TDM_LAYER_DROPOUT: return "dropout";
  case TDM_LAYER_SCALE: return "scale";
  case TDM_LAYER_RES_BEGIN: return "res(";
  case TDM_LAYER_RES_END: return ")";
  }
  return "?";
}

static const char *
type_name(TdmDtype t)
{
  return t == TDM_DTYPE_BF16 ? "bf16" : "f32";
}

int
main(int argc, char **argv)
{
  const char *spec = argc > 1 ? argv[1] : "resnet";
  int h = argc > 4 ? atoi(argv[2]) : 28, w = argc > 4 ? atoi(argv[3]) : 28,
      c = argc > 4 ? atoi(argv[4]) : 1;
  TdmBackendKind kind =
      argc > 5 && strcmp(argv[5], "cpu") == 0 ? TDM_BACKEND_CPU : TDM_BACKEND_CUDA;
  TdmPrecision precision =
      argc > 6 && strcmp(argv[6], "fp32") == 0 ? TDM_PRECISION_FP32 : TDM_PRECISION_BF16;
  int batch = argc > 7 ? atoi(argv[7]) : 512;
  GError *error = NULL;
  TdmNetwork *net = tdm_network_new(spec, h, w, c, 10, &error);
  if (net == NULL) {
    fprintf(stderr, "bench-plan: %s\n", error->message);
    return 1;
  }
  printf("%s, %d×%d×%d, %s, %s, stores bf16: %s\n", net->spec, h, w, c,
         kind == TDM_BACKEND_CUDA ? "cuda" : "cpu",
         precision == TDM_PRECISION_BF16 ? "bf16" : "fp32",
         tdm_replica_stores_bf16(kind, precision) ? "yes" : "no");
  printf("| # | layer | output (elements) | stored | bytes a sample | argmax | projection | "
         "skip gradient |\n|---|---|---|---|---|---|---|---|\n");
  size_t total = (size_t)h * w * c * sizeof(float);
  for (int i = 0; i < net->layer_count; i++) {
    const TdmLayer *l = &net->layers[i];
    TdmLayerBuffers buf = tdm_replica_layer_buffers(net, i, kind, precision);
    size_t out_bytes = buf.output * tdm_dtype_size(buf.output_type);
    size_t proj_bytes = buf.projection * tdm_dtype_size(buf.projection_type);
    size_t arg_bytes = buf.argmax * buf.argmax_size;
    total += out_bytes + proj_bytes + arg_bytes;
    printf("| %d | %s %s%s | %d×%d×%d | %s | %zu | %zu | %zu %s | %zu %s |\n", i, l->name,
           kind_name(l->kind), l->fused_relu ? "+relu" : "", l->out_h, l->out_w, l->out_c,
           buf.output > 0 ? type_name(buf.output_type) : "none", out_bytes, arg_bytes,
           proj_bytes, buf.projection > 0 ? type_name(buf.projection_type) : "",
           buf.skip * tdm_dtype_size(buf.skip_type), buf.skip > 0 ? type_name(buf.skip_type) : "");
  }
  size_t grad = tdm_replica_gradient_bytes(net, kind, precision);
  TdmReplicaPlan p = tdm_replica_plan(net, kind, precision, batch, batch);
  printf("\nactivations a sample (input, outputs, argmax, projections): %zu bytes\n", total);
  printf("each of the two gradient buffers a sample: %zu bytes\n", grad);
  printf("plan at batch %d: activations %zu, workspace %zu (columns %zu), inference %zu, "
         "parameters %zu, gradients %zu bytes\n",
         batch, p.activations, p.workspace, p.columns, p.inference, p.parameters, p.gradients);
  printf("plan's total: %zu bytes; bn outputs stored for their conv: those of at most %zu "
         "bytes a sample (TANDEM_BN_STORE %s)\n",
         tdm_replica_plan_total(&p), tdm_replica_bn_store(net, kind, precision, batch),
         g_getenv("TANDEM_BN_STORE") != NULL ? g_getenv("TANDEM_BN_STORE") : "unset");
  /* The gradient buffers in two windows against one (TANDEM_GRADIENT_WINDOWS=0). */
  char *windows = g_strdup(g_getenv("TANDEM_GRADIENT_WINDOWS"));
  g_setenv("TANDEM_GRADIENT_WINDOWS", "0", TRUE);
  TdmReplicaPlan one = tdm_replica_plan(net, kind, precision, batch, batch);
  if (windows != NULL)
    g_setenv("TANDEM_GRADIENT_WINDOWS", windows, TRUE);
  else
    g_unsetenv("TANDEM_GRADIENT_WINDOWS");
  g_free(windows);
  printf("one window of the gradient buffers: %zu bytes (%zd more)\n",
         tdm_replica_plan_total(&one),
         (ssize_t)(tdm_replica_plan_total(&one) - tdm_replica_plan_total(&p)));
  printf("evaluation chunk for --eval-batch 1000: %d samples\n",
         tdm_replica_eval_capacity(net, kind, precision, batch, 1000));
  tdm_network_free(net);
  return 0;
}
