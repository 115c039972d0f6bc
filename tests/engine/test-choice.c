/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-choice.c — the choices' names have one source, their GEnums: the engine's
 * name functions, the GSettings schema's choices, and the shell completion's word
 * lists must all agree with it, and the schema's defaults with the field table's
 * (tdm-config-fields.c, which tdm_config_new() starts from): every row that names a
 * GSettings key is checked against the schema, every choice with a flag against the
 * completion (and --network's words against the catalogue's built-in networks), so a
 * second table drifting, or a value added to one place only, fails here. */
#include "tdm-base-recipe.h"
#include "tdm-choice.h"
#include "tdm-config.h"
#include "tdm-experiments-enum-types.h"
#include "tdm-error.h"
#include "tdm-network-catalogue.h"
#include "tdm-scaling.h"
#include "tdm-trainer.h"
#include "tdm-training-enum-types.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>

typedef struct {
  GType type;
  const char *flag;        /* tandem-train's */
  const char *key;         /* the schema's, or NULL when the window keeps none */
  const char *names;       /* the names users type, space-separated, in value order */
} Choice;

static Choice choices[14];

static void
init_choices(void)
{
  const Choice all[] = {
    {TDM_TYPE_OPTIMIZER_KIND, "--optimizer", "optimizer", "sgd momentum adam nesterov"},
    {TDM_TYPE_STRATEGY, "--strategy", "strategy", "main allreduce"},
    {TDM_TYPE_SCHEDULE, "--schedule", NULL, "constant step cosine linear onecycle plateau"},
    {TDM_TYPE_PRECISION, "--precision", "precision", "fp32 tf32 bf16 auto"},
    {TDM_TYPE_BATCH_NORM, "--batchnorm", "batchnorm", "per-replica sync"},
    {TDM_TYPE_DECAY_SCOPE, "--weight-decay-on", NULL, "all weights"},
    {TDM_TYPE_FLIP_SETTING, "--flip", NULL, "auto on off"},
    {TDM_TYPE_MONITOR, "--monitor", NULL, "val_loss val_accuracy test_loss test_accuracy"},
    {TDM_TYPE_MONITOR_MODE, "--monitor-mode", NULL, "auto min max"},
    {TDM_TYPE_COLOR, "--color", NULL, "auto grey rgb"},
    {TDM_TYPE_TRAIN_PART, "--train", NULL, "all head"},
    {TDM_TYPE_PREWARM, "--prewarm", NULL, "auto on off"},
    {TDM_TYPE_SCALING_MODE, "--scaling", NULL, "strong weak"},
    {TDM_TYPE_ENGINE_ERROR, NULL, NULL,
     "invalid-option invalid-spec dataset device out-of-memory backend communication "
     "checkpoint diverged cancelled history export"},
  };
  memcpy(choices, all, sizeof all);
}

/* The nicks, in value order, as one space-separated string. */
static char *
nicks(GType type)
{
  GString *s = g_string_new(NULL);
  g_autoptr(GEnumClass) klass = g_type_class_ref(type);
  for (guint i = 0; i < klass->n_values; i++)
    g_string_append_printf(s, "%s%s", i ? " " : "", klass->values[i].value_nick);
  return g_string_free(s, FALSE);
}

/* The names users type stay as they were, values run 0…n−1, and the engine's name
 * functions are the GEnum's. */
static void
test_names(void)
{
  for (guint c = 0; c < G_N_ELEMENTS(choices); c++) {
    GType type = choices[c].type;
    g_autofree char *got = nicks(type);
    g_assert_cmpstr(got, ==, choices[c].names);
    g_autoptr(GEnumClass) klass = g_type_class_ref(type);
    for (guint i = 0; i < klass->n_values; i++) {
      int value = klass->values[i].value, back = -1;
      g_assert_true(tdm_choice_from_name(type, tdm_choice_name(type, value), &back));
      g_assert_cmpint(back, ==, value);
    }
    int untouched = 42;
    g_assert_false(tdm_choice_from_name(type, "no-such-choice", &untouched));
    g_assert_cmpint(untouched, ==, 42);
    g_assert_null(tdm_choice_name(type, klass->maximum + 1));
  }
  /* Every error code has its name (an export error is "export", not "other"). */
  g_assert_cmpuint(tdm_choice_count(TDM_TYPE_ENGINE_ERROR), ==, TDM_ENGINE_ERROR_EXPORT + 1);
  g_assert_cmpstr(tdm_choice_name(TDM_TYPE_ENGINE_ERROR, TDM_ENGINE_ERROR_EXPORT), ==, "export");
  g_assert_cmpstr(tdm_choice_name(TDM_TYPE_PREWARM, TDM_PREWARM_OFF), ==, "off");
  g_assert_cmpstr(tdm_scaling_mode_name(TDM_SCALING_WEAK), ==, "weak");
  int channels = -1;
  g_assert_true(tdm_choice_from_name(TDM_TYPE_COLOR, "rgb", &channels));
  g_assert_cmpint(channels, ==, 3);
  g_assert_cmpstr(tdm_choice_name(TDM_TYPE_COLOR, 1), ==, "grey");
  /* The typed name functions the engine keeps read the same table. */
  for (int v = 0; v < (int)tdm_choice_count(TDM_TYPE_STRATEGY); v++)
    g_assert_cmpstr(tdm_strategy_name(v), ==, tdm_choice_name(TDM_TYPE_STRATEGY, v));
  for (int v = 0; v < (int)tdm_choice_count(TDM_TYPE_PRECISION); v++)
    g_assert_cmpstr(tdm_precision_name(v), ==, tdm_choice_name(TDM_TYPE_PRECISION, v));

  /* Every optimizer starts from a rate of the base recipe's. */
  for (int v = 0; v < (int)tdm_choice_count(TDM_TYPE_OPTIMIZER_KIND); v++)
    g_assert_cmpfloat(tdm_base_recipe_lr(v), >, 0);

  g_autofree char *list = tdm_choice_list(TDM_TYPE_OPTIMIZER_KIND, TDM_OPTIMIZER_ADAM);
  g_assert_nonnull(strstr(list, "sgd, momentum, adam"));
  g_assert_nonnull(strstr(list, "nesterov"));
  g_assert_nonnull(strstr(list, "(")); /* the default marked */
}

/* The schema, compiled from the source by GLib's own compiler into a folder of the
 * test's, read through GIO as the window reads it. */
static GSettingsSchema *
compile_schema(char **dir_out)
{
  g_autofree char *data = g_test_build_filename(G_TEST_DIST, "..", "..", "data", NULL);
  g_autoptr(GError) error = NULL;
  char *dir = g_dir_make_tmp("tandem-schema-XXXXXX", &error);
  g_assert_no_error(error);
  g_autofree char *target = g_strdup_printf("--targetdir=%s", dir);
  const char *argv[] = {"glib-compile-schemas", "--strict", target, data, NULL};
  int status = 0;
  if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL,
                    &status, &error)) {
    g_rmdir(dir);
    g_free(dir);
    return NULL;
  }
  g_assert_true(g_spawn_check_wait_status(status, NULL));
  GSettingsSchemaSource *source =
    g_settings_schema_source_new_from_directory(dir, NULL, FALSE, &error);
  g_assert_no_error(error);
  GSettingsSchema *schema = g_settings_schema_source_lookup(source, "io.github.tandem.Tandem",
                                                            FALSE);
  g_settings_schema_source_unref(source);
  g_assert_nonnull(schema);
  *dir_out = dir;
  return schema;
}

static void
remove_schema_dir(char *dir)
{
  g_autofree char *compiled = g_build_filename(dir, "gschemas.compiled", NULL);
  g_unlink(compiled);
  g_rmdir(dir);
  g_free(dir);
}

/* What tdm_config_new() holds for a row, as the schema's GVariant type reads it. */
static void
assert_schema_default(const TdmField *field, GSettingsSchemaKey *key, const TdmConfig *d)
{
  g_autoptr(GVariant) v = g_settings_schema_key_get_default_value(key);
  g_autofree char *text = tdm_field_text(field, d);
  g_autofree char *printed = g_variant_print(v, FALSE);
  g_test_message("%s: schema %s, engine %s", field->settings, printed, text);
  if (g_variant_is_of_type(v, G_VARIANT_TYPE_STRING))
    /* An unset string (no weights to start from) is the schema's empty one. */
    g_assert_cmpstr(g_variant_get_string(v, NULL), ==, text != NULL ? text : "");
  else if (g_variant_is_of_type(v, G_VARIANT_TYPE_INT32))
    g_assert_cmpint(g_variant_get_int32(v), ==, G_STRUCT_MEMBER(int, d, field->offset));
  else if (g_variant_is_of_type(v, G_VARIANT_TYPE_DOUBLE))
    g_assert_cmpfloat(g_variant_get_double(v), ==, G_STRUCT_MEMBER(double, d, field->offset));
  else
    g_assert_not_reached();
  /* Within the range the schema allows. */
  g_assert_true(g_settings_schema_key_range_check(key, v));
}

static void
test_schema(void)
{
  char *dir = NULL;
  GSettingsSchema *schema = compile_schema(&dir);
  if (schema == NULL) {
    g_test_skip("glib-compile-schemas is not installed");
    return;
  }
  for (guint c = 0; c < G_N_ELEMENTS(choices); c++) {
    if (choices[c].key == NULL)
      continue;
    g_autoptr(GSettingsSchemaKey) key = g_settings_schema_get_key(schema, choices[c].key);
    g_autoptr(GVariant) range = g_settings_schema_key_get_range(key);
    const char *kind;
    g_autoptr(GVariant) values = NULL;
    g_variant_get(range, "(&sv)", &kind, &values);
    g_assert_cmpstr(kind, ==, "enum");
    g_autofree const char **names = g_variant_get_strv(values, NULL);
    g_autofree char *joined = g_strjoinv(" ", (char **)names);
    g_autofree char *want = nicks(choices[c].type);
    g_assert_cmpstr(joined, ==, want);
  }

  /* The defaults are the field table's, which tdm_config_new() starts from: every row
   * that names a key of the window's. */
  g_autoptr(TdmConfig) d = tdm_config_new();
  guint n, keys = 0;
  const TdmField *fields = tdm_config_fields(&n);
  for (guint i = 0; i < n; i++) {
    if (fields[i].settings == NULL)
      continue;
    g_assert_true(g_settings_schema_has_key(schema, fields[i].settings));
    g_autoptr(GSettingsSchemaKey) key = g_settings_schema_get_key(schema, fields[i].settings);
    assert_schema_default(&fields[i], key, d);
    keys++;
  }
  g_assert_cmpuint(keys, >=, 8);
  g_assert_cmpfloat(d->lr, ==, tdm_base_recipe_lr(d->optimizer));

  g_settings_schema_unref(schema);
  remove_schema_dir(dir);
}

/* The words data/completions/tandem-train offers after `flag`: the first line naming
 * the flag before ')' or '|' ("    --optimizer) COMPREPLY=($(compgen -W 'sgd momentum
 * adam nesterov' …" or "--flip|--prewarm) …"). */
static char **
completion_words(const char *text, const char *flag)
{
  g_autofree char *start = g_strdup_printf("    %s", flag);
  const char *line = strstr(text, start);
  while (line != NULL) {
    char after = line[strlen(start)];
    if (after == ')' || after == '|')
      break;
    line = strstr(line + 1, start);
  }
  g_assert_nonnull(line);
  const char *words = strstr(line, "-W '");
  g_assert_nonnull(words);
  words += 4;
  g_autofree char *listed = g_strndup(words, strcspn(words, "'"));
  return g_strsplit(listed, " ", -1);
}

/* data/completions/tandem-train completes each choice's flag with its names, and
 * --network with the catalogue's built-in networks. */
static void
test_completion(void)
{
  g_autofree char *path =
    g_test_build_filename(G_TEST_DIST, "..", "..", "data", "completions", "tandem-train", NULL);
  g_autofree char *text = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, &error));
  for (guint c = 0; c < G_N_ELEMENTS(choices); c++) {
    if (choices[c].flag == NULL)
      continue;
    g_auto(GStrv) got = completion_words(text, choices[c].flag);
    g_autofree char *want = nicks(choices[c].type);
    g_auto(GStrv) wanted = g_strsplit(want, " ", -1);
    /* The same set; the completion may order them by use. */
    g_assert_cmpuint(g_strv_length(got), ==, g_strv_length(wanted));
    for (guint i = 0; wanted[i] != NULL; i++)
      g_assert_true(g_strv_contains((const char *const *)got, wanted[i]));
  }
  {
    int count = 0;
    const TdmNetworkPreset *presets = tdm_network_presets(&count);
    g_auto(GStrv) got = completion_words(text, "--network");
    g_assert_cmpuint(g_strv_length(got), ==, (guint)count);
    for (int i = 0; i < count; i++)
      g_assert_true(g_strv_contains((const char *const *)got, presets[i].name));
  }
  /* Every option of a run given by name is one of the choices above, so a new one is
   * checked here too. */
  guint n;
  const TdmField *fields = tdm_config_fields(&n);
  for (guint i = 0; i < n; i++) {
    if (fields[i].choices == NULL || fields[i].flag == NULL)
      continue;
    g_autofree char *flag = g_strconcat("--", fields[i].flag, NULL);
    gboolean found = FALSE;
    for (guint c = 0; c < G_N_ELEMENTS(choices); c++)
      found |= g_strcmp0(choices[c].flag, flag) == 0 && choices[c].type == fields[i].choices();
    g_test_message("%s", flag);
    g_assert_true(found);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  init_choices();
  g_test_add_func("/choice/names", test_names);
  g_test_add_func("/choice/schema", test_schema);
  g_test_add_func("/choice/completion", test_completion);
  return g_test_run();
}
