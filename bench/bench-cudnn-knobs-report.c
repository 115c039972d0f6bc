/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench-cudnn-knobs-report.c — bench-cudnn-knobs' results as a table per shape on
 * stdout and as one JSON file; the sweep itself is bench-cudnn-knobs.c's.
 */
#include "bench-cudnn-knobs.h"
#include "tdm-json.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>

/* cudnnBackendKnobType_t's names, by value (cudnn_graph.h). */
static const char *const knob_names[CUDNN_KNOB_TYPE_COUNTS] = {
  "SPLIT_K", "SWIZZLE", "TILE_SIZE", "USE_TEX", "EDGE", "KBLOCK", "LDGA", "LDGB",
  "CHUNK_K", "SPLIT_H", "WINO_TILE", "MULTIPLY", "SPLIT_K_BUF", "TILEK", "STAGES",
  "REDUCTION_MODE", "CTA_SPLIT_K_MODE", "SPLIT_K_SLC", "IDX_MODE", "SLICED", "SPLIT_RS",
  "SINGLEBUFFER", "LDGC", "SPECFILT", "KERNEL_CFG", "WORKSPACE", "TILE_CGA", "TILE_CGA_M",
  "TILE_CGA_N", "BLOCK_SIZE", "OCCUPANCY", "ARRAY_SIZE_PER_THREAD", "NUM_C_PER_BLOCK",
  "SPLIT_COLS", "TILE_ROWS", "TILE_COLS", "LOAD_SIZE", "CTA_COUNT", "STREAM_K",
  "SPLIT_P_SLC", "TILE_M", "TILE_N", "WARP_SPEC_CFG", "SWAP_AB",
};
G_STATIC_ASSERT(G_N_ELEMENTS(knob_names) == CUDNN_KNOB_TYPE_COUNTS);

const char *
knob_name(int type)
{
  return type >= 0 && type < CUDNN_KNOB_TYPE_COUNTS ? knob_names[type] : "?";
}

static double
flops_of(const TdmConvShape *s)
{
  return 2.0 * s->n * tdm_conv_out_h(s) * tdm_conv_out_w(s) * s->out_c * s->c * s->kernel *
         s->kernel;
}

static int
by_ms(gconstpointer a, gconstpointer b)
{
  const Timed *x = *(const Timed *const *)a, *y = *(const Timed *const *)b;
  return (x->ms > y->ms) - (x->ms < y->ms);
}

static gboolean
right(const Timed *t)
{
  return t->error <= ERROR_FLAG; /* FALSE for NaN too */
}

/* The fastest right plan of the heuristics' own (heuristic) or of all. */
static const Timed *
fastest(const Sweep *sw, gboolean heuristic)
{
  const Timed *best = NULL;
  for (guint i = 0; i < sw->timed->len; i++) {
    const Timed *t = g_ptr_array_index(sw->timed, i);
    gboolean own = t->origin[0] == 'A' || t->origin[0] == 'B';
    if (right(t) && (!heuristic || own) && (best == NULL || t->ms < best->ms))
      best = t;
  }
  return best;
}

/* The summary line of a shape. */
void
sweep_summary(const Sweep *sw)
{
  double flops = flops_of(&sw->s);
  const Timed *heur = fastest(sw, TRUE), *best = fastest(sw, FALSE);
  if (heur != NULL && best != NULL)
    printf("summary %s: heuristics' best %.4f ms (e%" G_GINT64_FORMAT " %s, %.1f TFLOP/s) vs "
           "best found %.4f ms (e%" G_GINT64_FORMAT " %s %s, %.1f TFLOP/s): %.3f×%s\n",
           sw->key, heur->ms, heur->engine, heur->origin, flops / (heur->ms * 1e-3) / 1e12,
           best->ms, best->engine, best->origin, best->spelt, flops / (best->ms * 1e-3) / 1e12,
           heur->ms / best->ms, sw->cut ? " (cut by the budget)" : "");
  else
    printf("summary %s: nothing timed%s%s\n", sw->key, sw->why_not != NULL ? ": " : "",
           sw->why_not != NULL ? sw->why_not : "");
}

void
sweep_print(const Sweep *sw, const char *output, int lines)
{
  g_ptr_array_sort(sw->timed, by_ms);
  double flops = flops_of(&sw->s);
  printf("== %s (%s output): %u engines, %u plans timed, %d refused by cuDNN, %d did not "
         "run, %d over 1 GiB of workspace, %d heuristics' configurations left out by their "
         "notes%s\n",
         sw->key, output, sw->engines->len, sw->timed->len, sw->refused, sw->failed,
         sw->by_workspace, sw->by_notes, sw->cut ? "; cut short by the budget" : "");
  if (sw->why_not != NULL)
    printf("   no plans: %s\n", sw->why_not);
  for (guint i = 0; i < sw->engines->len; i++) {
    const Engine *e = g_ptr_array_index(sw->engines, i);
    printf("   e%-4" G_GINT64_FORMAT " knobs:", e->engine);
    for (guint r = 0; r < e->ranges->len; r++) {
      const Range *range = &g_array_index(e->ranges, Range, r);
      printf(" %s[%" G_GINT64_FORMAT "..%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT "]",
             knob_name(range->type), range->min, range->max, range->stride);
    }
    printf("%s; %d configurations tried\n", e->ranges->len == 0 ? " none" : "", e->tried);
  }
  printf("   %-6s %-8s %9s %8s %12s %9s  %s\n", "engine", "origin", "ms", "TFLOP/s",
         "workspace", "error", "knobs (* unlike the heuristics')");
  int left_out = 0;
  for (guint i = 0; i < sw->timed->len; i++) {
    const Timed *t = g_ptr_array_index(sw->timed, i);
    gboolean own = t->origin[0] == 'A' || t->origin[0] == 'B';
    if (lines > 0 && (int)i >= lines && !own) {
      left_out++;
      continue;
    }
    printf("   e%-5" G_GINT64_FORMAT " %-8s %9.4f %8.1f %12" G_GINT64_FORMAT " %9.2e%s %s\n",
           t->engine, t->origin, t->ms, flops / (t->ms * 1e-3) / 1e12, t->workspace, t->error,
           right(t) ? " " : "!", t->spelt);
  }
  if (left_out > 0)
    printf("   (%d slower plans not shown: --lines 0 shows all, the JSON has them)\n", left_out);
  sweep_summary(sw);
  fflush(stdout);
}

static void
json_knobs(JsonBuilder *jb, GArray *knobs)
{
  json_builder_begin_object(jb);
  for (guint i = 0; i < knobs->len; i++)
    tdm_json_set_int(jb, knob_name(g_array_index(knobs, Knob, i).type),
             g_array_index(knobs, Knob, i).value);
  json_builder_end_object(jb);
}

static void
json_sweep(JsonBuilder *jb, const Sweep *sw)
{
  double flops = flops_of(&sw->s);
  json_builder_begin_object(jb);
  tdm_json_set_string(jb, "shape", sw->key);
  tdm_json_set_double(jb, "flops", flops);
  tdm_json_set_int(jb, "refused", sw->refused);
  tdm_json_set_int(jb, "did_not_run", sw->failed);
  tdm_json_set_int(jb, "over_workspace", sw->by_workspace);
  tdm_json_set_int(jb, "left_out_by_notes", sw->by_notes);
  json_builder_set_member_name(jb, "cut_by_budget");
  json_builder_add_boolean_value(jb, sw->cut);
  const Timed *heur = fastest(sw, TRUE), *best = fastest(sw, FALSE);
  tdm_json_set_double(jb, "heuristics_best_ms", heur != NULL ? heur->ms : NAN);
  tdm_json_set_double(jb, "best_ms", best != NULL ? best->ms : NAN);
  tdm_json_set_double(jb, "speedup", heur != NULL && best != NULL ? heur->ms / best->ms : NAN);
  json_builder_set_member_name(jb, "engines");
  json_builder_begin_array(jb);
  for (guint i = 0; i < sw->engines->len; i++) {
    const Engine *e = g_ptr_array_index(sw->engines, i);
    json_builder_begin_object(jb);
    tdm_json_set_int(jb, "engine", e->engine);
    tdm_json_set_int(jb, "tried", e->tried);
    json_builder_set_member_name(jb, "heuristics_knobs");
    json_knobs(jb, e->base);
    json_builder_set_member_name(jb, "knobs");
    json_builder_begin_array(jb);
    for (guint r = 0; r < e->ranges->len; r++) {
      const Range *range = &g_array_index(e->ranges, Range, r);
      json_builder_begin_object(jb);
      tdm_json_set_string(jb, "type", knob_name(range->type));
      tdm_json_set_int(jb, "min", range->min);
      tdm_json_set_int(jb, "max", range->max);
      tdm_json_set_int(jb, "stride", range->stride);
      json_builder_end_object(jb);
    }
    json_builder_end_array(jb);
    json_builder_end_object(jb);
  }
  json_builder_end_array(jb);
  json_builder_set_member_name(jb, "plans");
  json_builder_begin_array(jb);
  for (guint i = 0; i < sw->timed->len; i++) {
    const Timed *t = g_ptr_array_index(sw->timed, i);
    json_builder_begin_object(jb);
    tdm_json_set_int(jb, "engine", t->engine);
    tdm_json_set_string(jb, "origin", t->origin);
    json_builder_set_member_name(jb, "knobs");
    json_knobs(jb, t->knobs);
    tdm_json_set_double(jb, "ms", t->ms);
    tdm_json_set_double(jb, "tflops", flops / (t->ms * 1e-3) / 1e12);
    tdm_json_set_int(jb, "workspace", t->workspace);
    tdm_json_set_double(jb, "error", t->error);
    json_builder_end_object(jb);
  }
  json_builder_end_array(jb);
  json_builder_end_object(jb);
}

gboolean
sweeps_write_json(const char *path, const Sweep *sweeps, int count, const Setup *setup)
{
  g_autoptr(JsonBuilder) jb = json_builder_new();
  json_builder_begin_object(jb);
  tdm_json_set_string(jb, "device", setup->device);
  tdm_json_set_int(jb, "cudnn_version", (gint64)setup->cudnn_version);
  tdm_json_set_string(jb, "output", setup->output);
  tdm_json_set_double(jb, "budget_s", setup->budget);
  tdm_json_set_int(jb, "engines", setup->engines);
  tdm_json_set_int(jb, "max_plans", setup->max_plans);
  json_builder_set_member_name(jb, "runtime_compiled");
  json_builder_add_boolean_value(jb, setup->runtime);
  tdm_json_set_double(jb, "error_flag", ERROR_FLAG);
  json_builder_set_member_name(jb, "shapes");
  json_builder_begin_array(jb);
  for (int i = 0; i < count; i++)
    json_sweep(jb, &sweeps[i]);
  json_builder_end_array(jb);
  json_builder_end_object(jb);
  /* tdm_json_to_string(): json-glib 1.6 writes 1e-08 as "1e-08.0", which no parser takes
   * (and a plan's error is often that small). */
  g_autoptr(JsonNode) root = json_builder_get_root(jb);
  g_autofree char *text = tdm_json_to_string(root);
  g_autoptr(GError) error = NULL;
  if (!g_file_set_contents(path, text, -1, &error)) {
    fprintf(stderr, "%s\n", error->message);
    return FALSE;
  }
  return TRUE;
}
