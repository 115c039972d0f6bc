/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-fields.c — the run's field table (tdm-config-fields.c) and what is made from
 * its rows: each row's default, text, check message and JSON; a preset's recipe read
 * back from the flags --help prints for it; device names read once into values, with
 * one bound and one message. test-config.c checks the configuration's behaviour
 * field by field; this file checks the table as a table, so a new row is held to the
 * same rules without a test of its own. */
#include "tdm-config.h"
#include "tdm-device-id.h"
#include "tdm-error.h"
#include "tdm-network-catalogue.h"

#include <math.h>
#include <string.h>

static const TdmField *
rows(guint *n)
{
  return tdm_config_fields(n);
}

/* Keys and flags name one row each; every flag has help, and a help that speaks of
 * a default takes it from the engine (a %s), never as a literal. */
static void
test_table(void)
{
  guint n;
  const TdmField *f = rows(&n);
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  g_assert_cmpuint(n, >=, 40);
  for (guint i = 0; i < n; i++) {
    g_test_message("%s", f[i].key);
    g_assert_true(g_hash_table_add(seen, (gpointer)f[i].key));
    if (f[i].flag != NULL && !g_str_equal(f[i].flag, f[i].key))
      g_assert_true(g_hash_table_add(seen, (gpointer)f[i].flag));
    if (f[i].no_flag != NULL)
      g_assert_true(g_hash_table_add(seen, (gpointer)f[i].no_flag));
    g_assert_true(f[i].flag == NULL || f[i].help != NULL);
    if (f[i].help != NULL && strstr(f[i].help, "default") != NULL)
      g_assert_nonnull(strstr(f[i].help, "%s"));
    g_assert_true(tdm_config_field(f[i].key) == &f[i]);
  }
  /* The configuration starts from the rows' defaults: each row's default, read as a
   * person would type it, is what tdm_config_new() holds, and passes every check. */
  g_autoptr(TdmConfig) d = tdm_config_new();
  for (guint i = 0; i < n; i++) {
    if (f[i].fallback == NULL)
      continue;
    g_autoptr(TdmConfig) one = g_new0(TdmConfig, 1);
    g_assert_true(tdm_field_parse(&f[i], one, f[i].fallback, NULL));
    g_assert_true(tdm_field_equal(&f[i], d, one));
  }
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_config_validate(d, &error));
  /* And --help names them: the batch's, a choice's list with its default marked. */
  g_autofree char *batch = tdm_field_help(tdm_config_field("batch"), d);
  g_assert_nonnull(strstr(batch, "(default 100)"));
  g_autofree char *flip = tdm_field_help(tdm_config_field("flip"), d);
  g_assert_nonnull(strstr(flip, "auto, on or off (default)"));
}

/* A value's text is what a person would type to get it back. */
static void
test_text_round_trip(void)
{
  guint n;
  const TdmField *f = rows(&n);
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_assert_true(tdm_config_set_devices(c, "cuda:3,cpu:2", NULL));
  c->lr = 0.1 / 3.0;
  c->seed = G_MAXUINT64;
  c->image_channels = TDM_COLOR_RGB;
  c->train_head = TRUE;
  c->test_flip = TRUE;
  g_strfreev(c->freeze);
  c->freeze = g_strsplit("conv1,layer1", ",", -1);
  for (guint i = 0; i < n; i++) {
    g_autofree char *text = tdm_field_text(&f[i], c);
    if (text == NULL)
      continue;
    g_autoptr(TdmConfig) back = tdm_config_new();
    g_autoptr(GError) error = NULL;
    g_test_message("%s = %s", f[i].key, text);
    g_assert_true(tdm_field_parse(&f[i], back, text, &error));
    g_assert_no_error(error);
    /* %g keeps 6 digits (half a unit of the sixth off at most): a double's text is
     * for people, its JSON for files. */
    if (f[i].type == TDM_FIELD_DOUBLE || f[i].type == TDM_FIELD_NUMBERS) {
      const double *got = G_STRUCT_MEMBER_P(back, f[i].offset);
      const double *want = G_STRUCT_MEMBER_P(c, f[i].offset);
      for (int k = 0; k < MAX(f[i].count, 1); k++)
        g_assert_cmpfloat_with_epsilon(got[k], want[k], 1e-5 * fabs(want[k]) + 1e-12);
    } else
      g_assert_true(tdm_field_equal(&f[i], back, c));
  }
}

/* A failed check names the flag, the value and the row's own bounds. */
static void
test_check_messages(void)
{
  struct {
    const char *key, *value, *message;
  } cases[] = {
    {"crop_pad", "70", "--crop 70: give the padding in pixels, 0 (off) to 64"},
    {"momentum", "1", "--momentum 1: must be at least 0 and less than 1"},
    {"image_size", "2", "--image-size 2: give 0 (chosen from the images) or a side from 4 "
                        "to 512 pixels"},
    {"batch", "0", "--batch 0: the batch size must be at least 1"},
    {"cpu_threads", "2000", "cpu_threads 2000: give 0 (automatic) or 1 to 1024"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    const TdmField *f = tdm_config_field(cases[i].key);
    g_autoptr(TdmConfig) c = tdm_config_new();
    g_autoptr(GError) error = NULL;
    g_assert_true(tdm_field_parse(f, c, cases[i].value, NULL));
    /* As every caller checks a configuration: the row's check says why. */
    g_assert_false(tdm_config_validate(c, &error));
    g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION);
    g_assert_cmpstr(error->message, ==, cases[i].message);
  }
  /* Zero is "off" beside a range that does not hold it. */
  g_autoptr(TdmConfig) c = tdm_config_new();
  c->image_size = 0;
  g_assert_true(tdm_config_validate(c, NULL));
  /* A choice set by code to no name of its GEnum. */
  c->flip = (TdmFlipSetting)9;
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_config_validate(c, &error));
  g_assert_cmpstr(error->message, ==, "--flip: unknown value 9 (choose auto, on or off)");
  /* Text that is no value of the row's type. */
  g_clear_error(&error);
  g_assert_false(tdm_field_parse(tdm_config_field("epochs"), c, "ten", &error));
  g_assert_cmpstr(error->message, ==, "--epochs: “ten” is not a whole number");
  g_clear_error(&error);
  g_assert_false(tdm_field_parse(tdm_config_field("color"), c, "purple", &error));
  g_assert_cmpstr(error->message, ==, "--color: unknown value “purple” (choose auto, grey or rgb)");
}

/* What JSON holds: rows written only when set stay out of a default run's, and how
 * a run is executed (BLAS threads) is never saved. */
static void
test_json_rows(void)
{
  g_autoptr(TdmConfig) c = tdm_config_new();
  g_autofree char *plain = tdm_config_to_json(c);
  g_assert_null(strstr(plain, "\"val_split\""));
  g_assert_null(strstr(plain, "\"init\""));
  g_assert_nonnull(strstr(plain, "\"devices\":[\"cpu\"]"));
  g_assert_nonnull(strstr(plain, "\"image_channels\":0"));
  g_assert_nonnull(strstr(plain, "\"normalize\":\"none\""));
  c->val_split = 0.2;
  c->cpu_threads = 3;
  c->image_channels = TDM_COLOR_GREY;
  g_autofree char *set = tdm_config_to_json(c);
  g_assert_nonnull(strstr(set, "\"val_split\":0.2"));
  g_assert_nonnull(strstr(set, "\"image_channels\":1"));
  g_assert_null(strstr(set, "cpu_threads"));
  g_autoptr(TdmConfig) back = tdm_config_from_json(set, NULL);
  g_assert_nonnull(back);
  g_assert_cmpfloat(back->val_split, ==, 0.2);
  g_assert_cmpint(back->image_channels, ==, TDM_COLOR_GREY);
  g_assert_cmpint(back->cpu_threads, ==, 0);
  /* A device name no parser knows is the file's fault, said on reading. */
  g_autoptr(GError) error = NULL;
  g_autofree char *bad = g_strdup(plain);
  char *at = strstr(bad, "[\"cpu\"]");
  memcpy(at, "[\"tpu\"]", 7);
  g_assert_null(tdm_config_from_json(bad, &error));
  g_assert_nonnull(strstr(error->message, "“devices” has the unknown value “tpu”"));
}

/* The flags --help prints for a preset's recipe give that recipe back. */
static void
test_recipe_flags(void)
{
  int count = 0;
  const TdmNetworkPreset *presets = tdm_network_presets(&count);
  int recipes = 0;
  for (int p = 0; p < count; p++) {
    g_autoptr(TdmConfig) recipe = tdm_config_new();
    if (!tdm_config_apply_preset(recipe, presets[p].name))
      continue;
    recipes++;
    g_autofree char *flags = tdm_config_to_flags(recipe);
    g_test_message("%s: %s", presets[p].name, flags);
    g_assert_nonnull(strstr(flags, "--epochs "));
    g_auto(GStrv) argv = NULL;
    g_assert_true(g_shell_parse_argv(flags, NULL, &argv, NULL));
    g_autoptr(TdmConfig) back = tdm_config_new();
    for (int i = 0; argv[i] != NULL; i++) {
      g_assert_true(g_str_has_prefix(argv[i], "--"));
      const TdmField *f = tdm_config_field(argv[i] + 2);
      if (f == NULL) {
        /* A --no- flag clears its switch. */
        guint n;
        const TdmField *all = tdm_config_fields(&n);
        for (guint k = 0; k < n && f == NULL; k++)
          if (g_strcmp0(all[k].no_flag, argv[i] + 2) == 0)
            f = &all[k];
        g_assert_nonnull(f);
        G_STRUCT_MEMBER(gboolean, back, f->offset) = FALSE;
      } else if (f->type == TDM_FIELD_BOOL && f->choices == NULL) {
        G_STRUCT_MEMBER(gboolean, back, f->offset) = TRUE;
      } else {
        g_assert_nonnull(argv[i + 1]);
        g_assert_true(tdm_field_parse(f, back, argv[++i], NULL));
      }
    }
    g_autofree char *want = tdm_config_to_json(recipe);
    g_autofree char *got = tdm_config_to_json(back);
    g_assert_cmpstr(got, ==, want);
  }
  g_assert_cmpint(recipes, >=, 2);
}

static void
assert_device_list(const char *list, const char *names)
{
  TdmDeviceId ids[TDM_MAX_REPLICAS];
  int count = -1;
  g_autoptr(GError) error = NULL;
  g_assert_true(tdm_device_list_parse(list, ids, TDM_MAX_REPLICAS, &count, &error));
  g_autofree char *joined = tdm_device_list_join(ids, count);
  g_assert_cmpstr(joined, ==, names);
}

/* One parser, one bound: a GPU's ordinal goes up to TDM_DEVICE_ORDINAL_MAX, and past
 * it the message says the bound; "cuda" alone is GPU 0. */
static void
test_device_ids(void)
{
  assert_device_list("cuda", "cuda:0");
  assert_device_list("cuda:01,cpu", "cuda:1,cpu");
  g_autofree char *top = g_strdup_printf("cuda:%d", TDM_DEVICE_ORDINAL_MAX);
  assert_device_list(top, top);

  g_autofree char *past = g_strdup_printf("cuda:%d", TDM_DEVICE_ORDINAL_MAX + 1);
  TdmDeviceId ids[TDM_MAX_REPLICAS];
  int count = 0;
  g_autoptr(GError) error = NULL;
  g_assert_false(tdm_device_list_parse(past, ids, TDM_MAX_REPLICAS, &count, &error));
  g_assert_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DEVICE);
  g_autofree char *bound = g_strdup_printf("0 to %d", TDM_DEVICE_ORDINAL_MAX);
  g_assert_nonnull(strstr(error->message, bound));
  g_assert_nonnull(strstr(error->message, past));

  /* One entry at a time (a JSON array, a setting) by the same rule. */
  TdmDeviceId id = TDM_DEVICE_CPU;
  g_assert_true(tdm_device_id_parse("cuda:7", &id));
  g_assert_true(tdm_device_id_equal(id, TDM_DEVICE_GPU(7)));
  g_assert_false(tdm_device_id_parse(past, &id));
  g_assert_false(tdm_device_id_parse("cpu:2", &id));
  g_assert_false(tdm_device_id_parse("cuda:-1", &id));
  g_assert_false(tdm_device_id_parse(" cpu", &id));
  g_assert_true(tdm_device_id_equal(id, TDM_DEVICE_GPU(7)));
  g_assert_false(tdm_device_id_equal(TDM_DEVICE_GPU(0), TDM_DEVICE_GPU(1)));
  g_assert_false(tdm_device_id_equal(TDM_DEVICE_GPU(0), TDM_DEVICE_CPU));
  char name[TDM_DEVICE_NAME_MAX];
  g_assert_cmpstr(tdm_device_id_name(TDM_DEVICE_GPU(TDM_DEVICE_ORDINAL_MAX), name), ==, top);

  /* The window's picker hands values; more than a run may have is refused whole. */
  g_autoptr(TdmConfig) c = tdm_config_new();
  TdmDeviceId many[TDM_MAX_REPLICAS];
  for (int i = 0; i < TDM_MAX_REPLICAS; i++)
    many[i] = TDM_DEVICE_GPU(i % 2);
  g_assert_true(tdm_config_set_device_list(c, many, TDM_MAX_REPLICAS, NULL));
  g_assert_cmpint(tdm_config_replica_count(c), ==, TDM_MAX_REPLICAS);
  g_clear_error(&error);
  g_assert_false(tdm_config_set_device_list(c, many, TDM_MAX_REPLICAS + 1, &error));
  g_assert_nonnull(strstr(error->message, "--devices"));
  g_assert_cmpint(tdm_config_replica_count(c), ==, TDM_MAX_REPLICAS);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/fields/table", test_table);
  g_test_add_func("/fields/text-round-trip", test_text_round_trip);
  g_test_add_func("/fields/check-messages", test_check_messages);
  g_test_add_func("/fields/json", test_json_rows);
  g_test_add_func("/fields/recipe-flags", test_recipe_flags);
  g_test_add_func("/fields/device-ids", test_device_ids);
  return g_test_run();
}
