/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-window-finetune.c — the form's fine-tuning group: "Start from weights…" shows
 * the engine's load report for the network chosen, and works it out again when the
 * network changes (weights that do not fit: the engine's error, Start greyed out);
 * the frozen part and the normalization reach the run's TdmConfig as --train head,
 * --freeze and --normalize do; every choice is saved and restored; image folders
 * are decoded at a torchvision preset's input size. The weights come
 * from tandem-train, built beside this test. */
#include <locale.h>
#include <string.h>
#include <glib/gstdio.h>
#include <adwaita.h>
#include "tdm-application.h"
#include "tdm-build-config.h"
#include "tdm-choice.h"
#include "tdm-classify-view.h"
#include "tdm-history-store.h"
#include "tdm-dataset-chooser.h"
#include "tdm-finetune-group.h"
#include "tdm-network-catalogue.h"
#include "tdm-run-form.h"
#include "tdm-spec-entry.h"
#include "tdm-window.h"
#include "window-test-util.h"

#define SPEC "conv4k3p1,bn,relu,pool2,fc10"

static char *tmp_dir;
static char *weights;

static gboolean
report_known(gpointer data)
{
  return tdm_finetune_group_get_report(data) != NULL ||
         tdm_finetune_group_get_error(data) != NULL;
}

static gboolean
dataset_ready(gpointer data)
{
  return tdm_dataset_chooser_get_ready(window_child(data, "dataset_chooser"));
}

/* A window on the synthetic set with SPEC as its network. */
static TdmWindow *
window_with_spec(const char *spec)
{
  TdmWindow *window = present_window();

  tdm_dataset_chooser_set_source(window_child(window, "dataset_chooser"), "synthetic");
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), window_custom_network());
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), spec);
  g_assert_true(wait_for(dataset_ready, window, 60));
  return window;
}

static void
test_report(void)
{
  TdmWindow *window;
  TdmFinetuneGroup *group;
  g_autoptr(TdmConfig) config = NULL;

  reset_settings();
  window = window_with_spec(SPEC);
  group = window_child(window, "finetune_group");
  g_assert_null(tdm_finetune_group_get_weights(group));
  g_assert_null(tdm_finetune_group_get_report(group));

  tdm_finetune_group_set_weights(group, weights);
  g_assert_true(wait_for(report_known, group, 60));
  g_assert_null(tdm_finetune_group_get_error(group));
  /* The engine's report, as the run says it when it starts: everything fits. */
  g_assert_true(g_str_has_prefix(tdm_finetune_group_get_report(group), "loaded "));
  g_assert_null(strstr(tdm_finetune_group_get_report(group), "skipped"));
  g_assert_true(tdm_run_form_get_ready(window_child(window, "sidebar")));
  config = window_config(window);
  g_assert_cmpstr(config->init_path, ==, weights);

  /* Another network: the report is worked out again, and these weights do not fit
   * its first convolution; Start waits for a choice that works. */
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), "conv8k3p1,bn,relu,pool2,fc10");
  g_assert_null(tdm_finetune_group_get_report(group));
  g_assert_true(wait_for(report_known, group, 60));
  g_assert_nonnull(tdm_finetune_group_get_error(group));
  g_assert_nonnull(strstr(tdm_finetune_group_get_error(group), "another architecture"));
  g_assert_false(tdm_run_form_get_ready(window_child(window, "sidebar")));

  /* An invalid spec: no network to read the weights into, and the row says it waits
   * for one instead of reading for ever. */
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), "conv8k3p1,bogus,fc10");
  drain();
  g_assert_false(tdm_spec_entry_get_valid(window_child(window, "spec_entry")));
  g_assert_null(tdm_finetune_group_get_report(group));
  g_assert_null(tdm_finetune_group_get_error(group));
  g_assert_cmpstr(tdm_finetune_group_get_status(group), ==,
                  "The weights are read once the network and the dataset are ready");
  tdm_spec_entry_set_text(window_child(window, "spec_entry"), SPEC);
  g_assert_cmpstr(tdm_finetune_group_get_status(group), ==, "Reading the weights…");
  g_assert_true(wait_for(report_known, group, 60));
  g_assert_cmpstr(tdm_finetune_group_get_status(group), ==, "What loads");

  /* Starting from random values again: nothing to report, Start back. */
  tdm_finetune_group_set_weights(group, NULL);
  g_assert_null(tdm_finetune_group_get_error(group));
  g_assert_true(tdm_run_form_get_ready(window_child(window, "sidebar")));
  g_clear_pointer(&config, tdm_config_free);
  config = window_config(window);
  g_assert_null(config->init_path);
  drop_window(window);
}

/* A file that is not a checkpoint: the engine's words, naming it. */
static void
test_not_weights(void)
{
  g_autofree char *bad = g_build_filename(tmp_dir, "bad.safetensors", NULL);
  TdmWindow *window;
  TdmFinetuneGroup *group;

  g_assert_true(g_file_set_contents(bad, "not a checkpoint", -1, NULL));
  reset_settings();
  window = window_with_spec(SPEC);
  group = window_child(window, "finetune_group");
  tdm_finetune_group_set_weights(group, bad);
  g_assert_true(wait_for(report_known, group, 60));
  g_assert_nonnull(strstr(tdm_finetune_group_get_error(group), bad));
  g_assert_false(tdm_run_form_get_ready(window_child(window, "sidebar")));
  drop_window(window);
}

/* The schema's choices of `key` are the nicks of `type`, in the enum's order. */
static void
assert_schema_choices(GSettings *settings, const char *key, GType type)
{
  g_autoptr(GSettingsSchema) schema = NULL;
  g_autoptr(GSettingsSchemaKey) schema_key = NULL;
  g_autoptr(GVariant) range = NULL;
  g_autoptr(GVariant) values = NULL;
  g_autofree const char **names = NULL;
  g_autofree const char **nicks = tdm_choice_names(type);
  const char *kind;

  g_object_get(settings, "settings-schema", &schema, NULL);
  schema_key = g_settings_schema_get_key(schema, key);
  range = g_settings_schema_key_get_range(schema_key);
  g_variant_get(range, "(&sv)", &kind, &values);
  g_assert_cmpstr(kind, ==, "enum");
  names = g_variant_get_strv(values, NULL);
  g_assert_cmpstrv(names, nicks);
}

static void
test_choices(void)
{
  TdmWindow *window;
  TdmFinetuneGroup *group;
  TdmConfig *config;

  reset_settings();
  window = window_with_spec(SPEC);
  group = window_child(window, "finetune_group");

  /* By default nothing is frozen and the network's recipe normalizes. */
  config = window_config(window);
  g_assert_false(config->train_head);
  g_assert_null(config->freeze);
  g_assert_null(config->normalize);
  tdm_config_free(config);

  tdm_finetune_group_set_freeze(group, TDM_FREEZE_CHOICE_BACKBONE, NULL);
  tdm_finetune_group_set_normalize(group, TDM_NORMALIZE_CHOICE_DATASET);
  config = window_config(window);
  g_assert_true(config->train_head);
  g_assert_null(config->freeze);
  g_assert_cmpstr(config->normalize, ==, "dataset");
  tdm_config_free(config);

  tdm_finetune_group_set_freeze(group, TDM_FREEZE_CHOICE_CUSTOM, " conv1, bn1  ");
  tdm_finetune_group_set_normalize(group, TDM_NORMALIZE_CHOICE_IMAGENET);
  tdm_finetune_group_set_weights(group, weights);
  config = window_config(window);
  g_assert_false(config->train_head);
  g_assert_cmpuint(g_strv_length(config->freeze), ==, 2);
  g_assert_cmpstr(config->freeze[0], ==, "conv1");
  g_assert_cmpstr(config->freeze[1], ==, "bn1");
  g_assert_cmpstr(config->normalize, ==, "imagenet");
  tdm_config_free(config);
  drop_window(window);

  /* Saved as they changed, by the GEnums' names, which are the schema's choices. */
  {
    g_autoptr(GSettings) settings = g_settings_new(TDM_APP_ID);
    g_autofree char *freeze = g_settings_get_string(settings, "freeze");
    g_autofree char *normalize = g_settings_get_string(settings, "normalize");

    g_assert_cmpstr(freeze, ==, "custom");
    g_assert_cmpstr(normalize, ==, "imagenet");
    assert_schema_choices(settings, "freeze", TDM_TYPE_FREEZE_CHOICE);
    assert_schema_choices(settings, "normalize", TDM_TYPE_NORMALIZE_CHOICE);
  }
  /* A new window starts with them. */
  window = window_with_spec(SPEC);
  group = window_child(window, "finetune_group");
  g_assert_cmpstr(tdm_finetune_group_get_weights(group), ==, weights);
  config = window_config(window);
  g_assert_cmpstr(config->init_path, ==, weights);
  g_assert_cmpuint(g_strv_length(config->freeze), ==, 2);
  g_assert_cmpstr(config->normalize, ==, "imagenet");
  tdm_config_free(config);
  g_assert_true(wait_for(report_known, group, 60));
  drop_window(window);
  reset_settings();
}

static gboolean
decoded_at_224(gpointer data)
{
  int height = 0, width = 0, channels, classes;

  return tdm_dataset_chooser_get_ready(window_child(data, "dataset_chooser")) &&
         tdm_dataset_chooser_get_shape(window_child(data, "dataset_chooser"), &height, &width,
                                       &channels, &classes) &&
         height == 224 && width == 224;
}

static gboolean
decoded_automatic(gpointer data)
{
  int height = 0, width = 0, channels, classes;

  return tdm_dataset_chooser_get_ready(window_child(data, "dataset_chooser")) &&
         tdm_dataset_chooser_get_shape(window_child(data, "dataset_chooser"), &height, &width,
                                       &channels, &classes) &&
         height != 224;
}

static guint
preset_index(const char *name)
{
  int count = 0;
  const TdmNetworkPreset *presets = tdm_network_presets(&count);

  for (int i = 0; i < count; i++)
    if (g_str_equal(presets[i].name, name))
      return (guint)i;
  g_assert_not_reached();
}

/* A folder of `classes` class folders of `per_class` small photos each, every class
 * its own colour; returns its path. */
static char *
make_photos(const char *name, int classes, int per_class)
{
  static const char *const names[] = {"ant", "bee", "cat", "dog", "eel"};
  char *folder = g_build_filename(tmp_dir, name, NULL);

  g_assert_cmpint(classes, <=, (int)G_N_ELEMENTS(names));
  for (int k = 0; k < classes; k++)
    for (int i = 0; i < per_class; i++)
      {
        g_autofree char *dir = g_build_filename(folder, names[k], NULL);
        g_autofree char *file = g_strdup_printf("%d.png", i);
        g_autofree char *path = g_build_filename(dir, file, NULL);
        g_autoptr(GdkPixbuf) pixbuf = gdk_pixbuf_new(GDK_COLORSPACE_RGB, FALSE, 8, 12, 12);

        gdk_pixbuf_fill(pixbuf, 0x20406000u + (guint32)(k * 0x30000000u) + (guint32)i * 0x100u);
        g_assert_cmpint(g_mkdir_with_parents(dir, 0700), ==, 0);
        g_assert_true(gdk_pixbuf_save(pixbuf, path, "png", NULL, NULL));
      }
  return folder;
}

static gboolean
form_ready(gpointer data)
{
  return tdm_run_form_get_ready(window_child(data, "sidebar"));
}

/* Every built-in network takes a folder of three classes, as tandem-train --network
 * does: the entry shows the engine's spec for three classes (its head fc3), and Start
 * is offered. */
static void
test_presets_fit_folder(void)
{
  g_autofree char *folder = make_photos("three", 3, 4);
  int count = 0;
  const TdmNetworkPreset *presets = tdm_network_presets(&count);
  TdmWindow *window;

  reset_settings();
  window = present_window();
  tdm_dataset_chooser_set_source(window_child(window, "dataset_chooser"), folder);
  for (int i = 0; i < count; i++)
    {
      g_autofree char *expected = tdm_network_preset_spec(&presets[i], 3);
      TdmSpecEntry *entry = window_child(window, "spec_entry");

      adw_combo_row_set_selected(window_child(window, "network_dropdown"), (guint)i);
      /* After the network: a recipe brings its own batch, more than these photos. */
      gtk_spin_button_set_value(window_child(window, "batch_spin"), 2);
      g_assert_true(wait_for(dataset_ready, window, 60));
      g_assert_true(wait_for(form_ready, window, 60));
      g_test_message("%s: %s", presets[i].name, tdm_spec_entry_get_text(entry));
      g_assert_cmpstr(tdm_spec_entry_get_text(entry), ==, expected);
      g_assert_true(tdm_spec_entry_get_valid(entry));
      /* Its size under it: every number separated as "1,796,010 parameters" is. */
      g_test_message("%s", tdm_spec_entry_get_message(entry));
      g_assert_false(g_regex_match_simple("[0-9]{4}", tdm_spec_entry_get_message(entry), 0, 0));
    }
  drop_window(window);
  reset_settings();
}

static gboolean
window_idle(gpointer data)
{
  return !tdm_window_get_running(data);
}

static TdmClassifyView *
classify_view_shown(void)
{
  GListModel *toplevels = gtk_window_get_toplevels();   /* not ours */

  for (guint i = 0; i < g_list_model_get_n_items(toplevels); i++) {
    g_autoptr(GtkWindow) w = g_list_model_get_item(toplevels, i);
    GtkWidget *child = gtk_window_get_child(w);

    if (child != NULL && TDM_IS_CLASSIFY_VIEW(child) && gtk_widget_get_visible(GTK_WIDGET(w)))
      return TDM_CLASSIFY_VIEW(child);
  }
  return NULL;
}

static gboolean
classified(gpointer view)
{
  return tdm_classify_view_get_n_results(view) > 0;
}

/* Own photos of three classes, from the window alone: a CNN trained elsewhere on four
 * classes is the start, its head is left out (its class count differs), the backbone
 * stays frozen, the run trains, keeps its network, and that network names one of
 * the three classes for a photo. */
static void
test_own_photos(void)
{
  g_autofree char *four = make_photos("four", 4, 5);
  g_autofree char *three = make_photos("three-own", 3, 4);
  g_autofree char *start = g_build_filename(tmp_dir, "four.safetensors", NULL);
  g_autofree char *photo = g_build_filename(three, "bee", "0.png", NULL);
  TdmWindow *window;
  TdmFinetuneGroup *group;
  TdmClassifyView *view;
  GListModel *runs;
  g_autoptr(TdmRunItem) item = NULL;
  g_autofree char *kept = NULL;
  const char *result;

  {
    g_autofree char *program = g_test_build_filename(G_TEST_BUILT, "..", "..", "src",
                                                     "tandem-train", NULL);
    g_autofree char *command = g_strdup_printf("%s --dataset %s --network cnn --max-steps 3 "
                                               "--batch 4 --quiet --save %s",
                                               program, four, start);
    g_autofree char *err = NULL;
    int status = 0;

    g_assert_true(g_spawn_command_line_sync(command, NULL, &err, &status, NULL));
    g_assert_true(g_spawn_check_wait_status(status, NULL));
  }

  reset_settings();
  window = present_window();
  tdm_dataset_chooser_set_source(window_child(window, "dataset_chooser"), three);
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), preset_index("cnn"));
  gtk_spin_button_set_value(window_child(window, "batch_spin"), 2);
  gtk_spin_button_set_value(window_child(window, "epochs_spin"), 2);
  group = window_child(window, "finetune_group");
  tdm_finetune_group_set_weights(group, start);
  tdm_finetune_group_set_freeze(group, TDM_FREEZE_CHOICE_BACKBONE, NULL);
  g_assert_true(wait_for(report_known, group, 60));
  g_test_message("%s", tdm_finetune_group_get_report(group));
  g_assert_null(tdm_finetune_group_get_error(group));
  g_assert_nonnull(strstr(tdm_finetune_group_get_report(group), "skipped"));
  g_assert_true(wait_for(can_start, window, 60));

  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.start", NULL));
  g_assert_true(wait_for(window_idle, window, 300));
  g_assert_false(gtk_revealer_get_reveal_child(window_child(window, "error_revealer")));

  runs = G_LIST_MODEL(tdm_window_get_history(window));
  g_assert_cmpuint(g_list_model_get_n_items(runs), >, 0);
  item = g_list_model_get_item(runs, g_list_model_get_n_items(runs) - 1);
  g_assert_true(tdm_run_item_get_record(item)->finished);
  g_assert_false(tdm_run_item_get_record(item)->final.stopped);
  kept = tdm_window_weights_path(window, tdm_run_item_get_id(item));
  g_assert_true(g_file_test(kept, G_FILE_TEST_IS_REGULAR));

  g_assert_true(gtk_widget_activate_action(GTK_WIDGET(window), "win.classify-run", "s",
                                           tdm_run_item_get_id(item)));
  view = classify_view_shown();
  g_assert_nonnull(view);
  g_assert_cmpstr(tdm_classify_view_get_checkpoint(view), ==, kept);
  {
    GSList *files = g_slist_prepend(NULL, g_file_new_for_path(photo));

    tdm_classify_view_add_files(view, files);
    g_slist_free_full(files, g_object_unref);
  }
  g_assert_true(wait_for(classified, view, 60));
  result = tdm_classify_view_get_result(view, 0);
  g_test_message("%s: %s", photo, result);
  g_assert_true(strstr(result, "ant") != NULL || strstr(result, "bee") != NULL ||
                strstr(result, "cat") != NULL);
  g_assert_null(strstr(result, "dog"));
  drop_window(window);
  reset_settings();
}

/* A folder of photos is decoded at the size a torchvision preset is made for, at
 * "Automatic"; another network gives it back to the engine's choice. */
static void
test_folder_size(void)
{
  g_autofree char *folder = make_photos("photos", 2, 3);
  TdmWindow *window;
  int size = -1, channels;
  TdmConfig *config;

  reset_settings();
  window = present_window();
  tdm_dataset_chooser_set_source(window_child(window, "dataset_chooser"), folder);
  adw_combo_row_set_selected(window_child(window, "network_dropdown"), preset_index("resnet18"));
  g_assert_true(wait_for(decoded_at_224, window, 60));
  tdm_dataset_chooser_get_image_options(window_child(window, "dataset_chooser"), &size, &channels);
  g_assert_cmpint(size, ==, 224);
  config = window_config(window);
  g_assert_cmpint(config->image_size, ==, 224);
  tdm_config_free(config);

  adw_combo_row_set_selected(window_child(window, "network_dropdown"), preset_index("cnn"));
  g_assert_true(wait_for(decoded_automatic, window, 60));
  tdm_dataset_chooser_get_image_options(window_child(window, "dataset_chooser"), &size, &channels);
  g_assert_cmpint(size, ==, 0);
  drop_window(window);
  reset_settings();
}

/* The torchvision presets are offered with the others, from the engine's catalogue. */
static void
test_presets_offered(void)
{
  TdmWindow *window;
  GListModel *model;
  gboolean resnet50 = FALSE;

  reset_settings();
  window = present_window();
  model = adw_combo_row_get_model(window_child(window, "network_dropdown"));
  for (guint i = 0; i < g_list_model_get_n_items(model); i++)
    {
      const char *title = gtk_string_list_get_string(GTK_STRING_LIST(model), i);

      resnet50 |= strstr(title, "ResNet-50") != NULL;
    }
  g_assert_true(resnet50);
  drop_window(window);
}

int
main(int argc, char **argv)
{
  g_setenv("LC_ALL", "C.UTF-8", TRUE);
  g_unsetenv("LANGUAGE");
  tmp_dir = g_dir_make_tmp("tandem-finetune-XXXXXX", NULL);
  g_setenv("XDG_DATA_HOME", tmp_dir, TRUE);
  window_test_init(&argc, &argv);

  /* Weights of SPEC trained two steps on the synthetic set. */
  {
    g_autofree char *program = g_test_build_filename(G_TEST_BUILT, "..", "..", "src",
                                                     "tandem-train", NULL);
    g_autofree char *command = NULL;
    g_autofree char *err = NULL;
    int status = 0;

    weights = g_build_filename(tmp_dir, "start.safetensors", NULL);
    command = g_strdup_printf("%s --dataset synthetic --network " SPEC " --max-steps 2 "
                              "--batch 8 --quiet --save %s", program, weights);
    if (!g_spawn_command_line_sync(command, NULL, &err, &status, NULL) ||
        !g_spawn_check_wait_status(status, NULL))
      g_error("%s failed: %s", command, err);
  }

  g_test_add_func("/window-finetune/report", test_report);
  g_test_add_func("/window-finetune/not-weights", test_not_weights);
  g_test_add_func("/window-finetune/choices", test_choices);
  g_test_add_func("/window-finetune/presets-offered", test_presets_offered);
  g_test_add_func("/window-finetune/folder-size", test_folder_size);
  g_test_add_func("/window-finetune/presets-fit-folder", test_presets_fit_folder);
  g_test_add_func("/window-finetune/own-photos", test_own_photos);

  int status = g_test_run();
  g_autofree char *quoted = g_shell_quote(tmp_dir);
  g_autofree char *command = g_strdup_printf("rm -rf %s", quoted);
  g_spawn_command_line_sync(command, NULL, NULL, NULL, NULL);
  g_free(weights);
  return status;
}
