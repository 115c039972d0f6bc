/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-onnx-export.c — the engine's ONNX exporter seen from C: the file read back
 * with protobuf-c through the same .proto (nodes in order, attributes, weights in
 * ONNX's layouts, the free batch dimension), and its refusals (a bad normalization,
 * a folder, a path with no folder) leaving nothing behind. Whether other readers
 * accept the file and compute Tandem's logits is test-onnx.sh's. */
#include "tdm-build-config.h"
#include "tdm-error.h"
#include "tdm-network.h"
#include "tdm-onnx-export.h"
#if TDM_HAVE_ONNX
#include "tdm-onnx.pb-c.h"
#endif

#include <glib/gstdio.h>
#include <string.h>

typedef struct {
  TdmNetwork *net;
  float *params, *state;
  char *dir;
} Fixture;

static void
fixture_set_up(Fixture *f, gconstpointer spec)
{
  g_autoptr(GError) error = NULL;
  f->net = tdm_network_new(spec, 8, 8, 3, 4, &error);
  g_assert_no_error(error);
  f->params = g_new(float, f->net->parameter_count);
  f->state = g_new(float, MAX(1, f->net->state_count));
  tdm_network_init_parameters(f->net, 3, f->params);
  /* Running statistics no initialization would give, so a swap of mean and
   * variance, or of a BN's four tensors, shows. */
  for (size_t i = 0; i < f->net->state_count; i++)
    f->state[i] = 0.5f + 0.01f * (float)i;
  f->dir = g_dir_make_tmp("tdm-onnx-XXXXXX", &error);
  g_assert_no_error(error);
}

static void
fixture_tear_down(Fixture *f, gconstpointer spec)
{
  const char *name;
  GDir *d = g_dir_open(f->dir, 0, NULL);
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    g_autofree char *path = g_build_filename(f->dir, name, NULL);
    g_unlink(path);
  }
  if (d != NULL)
    g_dir_close(d);
  g_rmdir(f->dir);
  g_free(f->dir);
  g_free(f->params);
  g_free(f->state);
  tdm_network_free(f->net);
}

static guint
files_in(const char *dir)
{
  guint count = 0;
  GDir *d = g_dir_open(dir, 0, NULL);
  while (d != NULL && g_dir_read_name(d) != NULL)
    count++;
  if (d != NULL)
    g_dir_close(d);
  return count;
}

#if TDM_HAVE_ONNX
static TdmOnnx__ModelProto *
read_model(const char *path)
{
  g_autofree char *data = NULL;
  gsize size = 0;
  g_assert_true(g_file_get_contents(path, &data, &size, NULL));
  TdmOnnx__ModelProto *model = tdm_onnx__model_proto__unpack(NULL, size, (uint8_t *)data);
  g_assert_nonnull(model);
  return model;
}

static const TdmOnnx__TensorProto *
initializer(const TdmOnnx__GraphProto *g, const char *name)
{
  for (size_t i = 0; i < g->n_initializer; i++)
    if (g_str_equal(g->initializer[i]->name, name))
      return g->initializer[i];
  g_error("no initializer %s", name);
}

static const TdmOnnx__AttributeProto *
attribute(const TdmOnnx__NodeProto *n, const char *name)
{
  for (size_t i = 0; i < n->n_attribute; i++)
    if (g_str_equal(n->attribute[i]->name, name))
      return n->attribute[i];
  return NULL;
}

static float
value(const TdmOnnx__TensorProto *t, size_t i)
{
  g_assert_cmpuint((i + 1) * sizeof(float), <=, t->raw_data.len);
  guint32 bits;
  memcpy(&bits, t->raw_data.data + i * sizeof(float), sizeof bits);
  bits = GUINT32_FROM_LE(bits);
  float v;
  memcpy(&v, &bits, sizeof v);
  return v;
}
#endif

/* conv8k3s2p1,bn,relu,pool2,fc4 on 8 × 8 × 3: the nodes, their attributes and the
 * weights where the layouts differ (conv, and the fc that reads an image). */
static void
test_structure(Fixture *f, gconstpointer spec)
{
#if !TDM_HAVE_ONNX
  g_test_skip("built without ONNX export");
#else
  g_autoptr(GError) error = NULL;
  g_autofree char *path = g_build_filename(f->dir, "m.onnx", NULL);
  const char *names[] = {"a", "b", "c", "d"};
  TdmOnnxOptions options = {.class_names = names};
  g_assert_true(tdm_onnx_export(f->net, f->params, f->state, &options, path, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(files_in(f->dir), ==, 1);

  TdmOnnx__ModelProto *model = read_model(path);
  g_assert_cmpint(model->ir_version, ==, 7);
  g_assert_cmpuint(model->n_opset_import, ==, 1);
  g_assert_cmpint(model->opset_import[0]->version, ==, 13);
  const TdmOnnx__GraphProto *g = model->graph;
  const char *ops[] = {"Conv", "BatchNormalization", "Relu", "MaxPool", "Flatten", "Gemm"};
  g_assert_cmpuint(g->n_node, ==, G_N_ELEMENTS(ops));
  for (size_t i = 0; i < G_N_ELEMENTS(ops); i++)
    g_assert_cmpstr(g->node[i]->op_type, ==, ops[i]);
  /* Each node reads the one before it; the last gives the graph's output. */
  g_assert_cmpstr(g->node[0]->input[0], ==, "input");
  for (size_t i = 1; i < g->n_node; i++)
    g_assert_cmpstr(g->node[i]->input[0], ==, g->node[i - 1]->output[0]);
  g_assert_cmpstr(g->node[g->n_node - 1]->output[0], ==, "logits");
  g_assert_cmpstr(g->output[0]->name, ==, "logits");

  const TdmOnnx__AttributeProto *strides = attribute(g->node[0], "strides");
  const TdmOnnx__AttributeProto *pads = attribute(g->node[0], "pads");
  g_assert_cmpint(strides->ints[0], ==, 2);
  g_assert_cmpint(pads->ints[3], ==, 1);
  g_assert_cmpfloat(attribute(g->node[1], "epsilon")->f, ==, TDM_BN_EPS);
  g_assert_cmpint(attribute(g->node[3], "kernel_shape")->ints[1], ==, 2);
  g_assert_cmpint(attribute(g->node[5], "transB")->i, ==, 1);

  /* The batch is free, the rest is the network's NCHW input. */
  const TdmOnnx__TensorShapeProto *in = g->input[0]->type->tensor_type->shape;
  g_assert_cmpuint(in->n_dim, ==, 4);
  g_assert_cmpstr(in->dim[0]->dim_param, ==, "batch");
  g_assert_cmpint(in->dim[1]->dim_value, ==, 3);
  g_assert_cmpint(in->dim[3]->dim_value, ==, 8);

  /* conv: ours [out, kh, kw, in], ONNX's [out, in, kh, kw]. */
  const TdmLayer *conv = &f->net->layers[0];
  const TdmOnnx__TensorProto *w = initializer(g, "conv1.weight");
  g_assert_cmpuint(w->n_dims, ==, 4);
  g_assert_cmpint(w->dims[1], ==, 3);
  for (int o = 0; o < 8; o++)
    for (int ci = 0; ci < 3; ci++)
      for (int t = 0; t < 9; t++)
        g_assert_cmpfloat(value(w, ((size_t)o * 3 + ci) * 9 + t), ==,
                          f->params[conv->weight_offset + ((size_t)o * 9 + t) * 3 + ci]);
  /* The fc reads a 2 × 2 × 8 image: ours in (y, x, c) order, ONNX's in (c, y, x). */
  const TdmLayer *fc = &f->net->layers[3];
  g_assert_cmpint(fc->kind, ==, TDM_LAYER_LINEAR);
  /* A network's only fc is "fc", as torchvision names its head. */
  const TdmOnnx__TensorProto *fw = initializer(g, "fc.weight");
  for (int o = 0; o < 4; o++)
    for (int p = 0; p < 4; p++)
      for (int c = 0; c < 8; c++)
        g_assert_cmpfloat(value(fw, (size_t)o * 32 + c * 4 + p), ==,
                          f->params[fc->weight_offset + (size_t)o * 32 + p * 8 + c]);
  const TdmLayer *bn = &f->net->layers[1];
  g_assert_cmpfloat(value(initializer(g, "bn1.running_var"), 5), ==,
                    f->state[bn->state_offset + 8 + 5]);

  gboolean named = FALSE;
  for (size_t i = 0; i < model->n_metadata_props; i++)
    if (g_str_equal(model->metadata_props[i]->key, "class_names"))
      named = g_str_equal(model->metadata_props[i]->value, "[\"a\",\"b\",\"c\",\"d\"]");
  g_assert_true(named);
  tdm_onnx__model_proto__free_unpacked(model, NULL);
#endif
}

/* Refusals: one error naming the file, nothing written, an existing file kept. */
static void
test_refusals(Fixture *f, gconstpointer spec)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *path = g_build_filename(f->dir, "m.onnx", NULL);
  g_assert_true(g_file_set_contents(path, "old", -1, NULL));
  if (!tdm_onnx_export_available()) {
    g_assert_false(tdm_onnx_export(f->net, f->params, f->state, NULL, path, &error));
    g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_EXPORT);
    g_assert_nonnull(strstr(error->message, "built without ONNX export"));
    return;
  }
  const float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.25f, 0.0f, 0.25f};
  TdmOnnxOptions options = {.mean = mean, .std = std};
  g_assert_false(tdm_onnx_export(f->net, f->params, f->state, &options, path, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_EXPORT);
  g_assert_nonnull(strstr(error->message, "standard deviation of channel 1 is 0"));
  g_assert_nonnull(strstr(error->message, path));
  g_clear_error(&error);

  g_assert_false(tdm_onnx_export(f->net, f->params, f->state, NULL, f->dir, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_EXPORT);
  g_assert_nonnull(strstr(error->message, "is a folder"));
  g_clear_error(&error);

  g_autofree char *nowhere = g_build_filename(f->dir, "no", "m.onnx", NULL);
  g_assert_false(tdm_onnx_export(f->net, f->params, f->state, NULL, nowhere, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_EXPORT);
  g_assert_nonnull(strstr(error->message, "does not exist"));
  g_clear_error(&error);

  g_autofree char *kept = NULL;
  g_assert_true(g_file_get_contents(path, &kept, NULL, NULL));
  g_assert_cmpstr(kept, ==, "old");
  g_assert_cmpuint(files_in(f->dir), ==, 1);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  const char *spec = "conv8k3s2p1,bn,relu,pool2,fc4";
  g_test_add("/onnx-export/structure", Fixture, spec, fixture_set_up, test_structure,
             fixture_tear_down);
  g_test_add("/onnx-export/refusals", Fixture, spec, fixture_set_up, test_refusals,
             fixture_tear_down);
  return g_test_run();
}
