/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cli-classify.c — tandem-train --classify (tdm-cli-classify.h): files and folders
 * of images, each result saying how its image was adapted to the network's input. */
#include "tdm-cli-classify.h"
#include "tdm-cli-guard.h"
#include <glib/gi18n.h>
#include "tdm-classifier.h"
#include "tdm-json.h"

#include "tdm-image.h"

#include <json-glib/json-glib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define EXIT_BAD_INPUT 2

static int
compare_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void
print_json(const TdmClassifier *cl, const char *path, const float *probs, const int *order,
           int top, const char *adapted)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "type");
  json_builder_add_string_value(b, "classification");
  json_builder_set_member_name(b, "file");
  g_autofree char *display = g_filename_display_name(path);
  json_builder_add_string_value(b, display);
  json_builder_set_member_name(b, "top");
  json_builder_begin_array(b);
  for (int r = 0; r < top; r++) {
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "class");
    json_builder_add_int_value(b, order[r]);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, tdm_classifier_class_name(cl, order[r]));
    json_builder_set_member_name(b, "probability");
    json_builder_add_double_value(b, probs[order[r]]);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  if (adapted != NULL) {
    json_builder_set_member_name(b, "adapted");
    json_builder_add_string_value(b, adapted);
  }
  json_builder_end_object(b);
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  g_autofree char *text = tdm_json_to_string(root);
  printf("%s\n", text);
}

/* The names in a folder in byte order, hidden ones left out; NULL with the reason
 * when it cannot be read. */
static GPtrArray *
sorted_names(const char *folder, GError **error)
{
  g_autoptr(GDir) dir = g_dir_open(folder, 0, error);
  if (dir == NULL)
    return NULL;
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  const char *name;
  while ((name = g_dir_read_name(dir)) != NULL)
    if (name[0] != '.')
      g_ptr_array_add(names, g_strdup(name));
  g_ptr_array_sort(names, compare_names);
  return names;
}

typedef struct {
  char *folder;
  GPtrArray *names;
  guint next;
} Level;

/* Whether the folder at path was walked already (by device and inode), noting it if
 * not: a link back up the tree is followed once, not for ever. */
static gboolean
seen_before(GHashTable *seen, const char *path)
{
  struct stat st;
  if (stat(path, &st) != 0)
    return FALSE;
  char *key = g_strdup_printf("%ju:%ju", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
  if (g_hash_table_contains(seen, key)) {
    g_free(key);
    return TRUE;
  }
  g_hash_table_add(seen, key);
  return FALSE;
}

/* The files to classify: each file named, and every PNG or JPEG under each folder
 * named, at any depth, in name order, hidden entries left out. A link to a folder is
 * followed, once: one that leads back to a folder walked already is said and left
 * out. Walked with a list of open levels rather than by recursion, so nesting costs
 * no stack; a folder that cannot be read (a path grown past the system's limit, no
 * permission) is said, not silently empty. */
static void
collect_folder(const char *top, GPtrArray *out)
{
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  (void)seen_before(seen, top);
  g_autoptr(GArray) levels = g_array_new(FALSE, FALSE, sizeof(Level));
  g_autoptr(GError) error = NULL;
  GPtrArray *first = sorted_names(top, &error);
  if (first == NULL) {
    tdm_cli_line(stderr, _("tandem-train: warning: --classify: %s: cannot read the folder: "
                           "%s\n"), top, error->message);
    return;
  }
  g_array_append_val(levels, ((Level){g_strdup(top), first, 0}));
  while (levels->len > 0) {
    Level *l = &g_array_index(levels, Level, levels->len - 1);
    if (l->next >= l->names->len) {
      g_free(l->folder);
      g_ptr_array_unref(l->names);
      g_array_set_size(levels, levels->len - 1);
      continue;
    }
    const char *name = l->names->pdata[l->next++];
    g_autofree char *path = g_build_filename(l->folder, name, NULL);
    if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
      if (seen_before(seen, path)) {
        g_autofree char *display = g_filename_display_name(path);
        tdm_cli_line(stderr, _("tandem-train: warning: --classify: %s: the same folder as "
                               "one already looked through (a link); left out\n"), display);
        continue;
      }
      g_clear_error(&error);
      GPtrArray *names = sorted_names(path, &error);
      if (names == NULL) {
        g_autofree char *display = g_filename_display_name(path);
        tdm_cli_line(stderr, _("tandem-train: warning: --classify: %s: cannot read the "
                               "folder: %s\n"), display, error->message);
        continue;
      }
      g_array_append_val(levels, ((Level){g_steal_pointer(&path), names, 0}));
      continue;
    }
    g_autofree char *lower = g_ascii_strdown(name, -1);
    if (g_str_has_suffix(lower, ".png") || g_str_has_suffix(lower, ".jpg") ||
        g_str_has_suffix(lower, ".jpeg"))
      g_ptr_array_add(out, g_steal_pointer(&path));
  }
}

/* The words of an adaptation note: translated for people, English for --json (read by
 * programs). */
static const char *
words(gboolean translated, const char *text)
{
  return translated ? _(text) : text;
}

/* How a file of `info` was made into the network's input (size × size, channels):
 * NULL when it already was one. */
static char *
adaptation(const TdmImageInfo *info, int size, int channels, gboolean translated)
{
  if (info->width == size && info->height == size && info->channels == channels)
    return NULL;
  GString *s = g_string_new(NULL);
  if (info->width != info->height) {
    int side = MIN(info->width, info->height);
    g_string_append_printf(s, words(translated, N_("centre %d×%d of %d×%d")), side, side,
                           info->width, info->height);
    if (side != size)
      g_string_append_printf(s, words(translated, N_(" scaled to %d×%d")), size, size);
  } else if (info->width != size) {
    g_string_append_printf(s, words(translated, N_("scaled from %d×%d to %d×%d")), info->width,
                           info->height, size, size);
  }
  if (info->channels != channels)
    g_string_append_printf(s, "%s%s", s->len > 0 ? ", " : "",
                           channels == 1 ? words(translated, N_("colour made grey"))
                                         : words(translated, N_("grey made colour")));
  return g_string_free(s, FALSE);
}

/* Far from the training samples: scaled by more than 4 either way, or another colour. */
static gboolean
far_from_training(const TdmImageInfo *info, int size, int channels)
{
  int longer = MAX(info->width, info->height), shorter = MIN(info->width, info->height);
  return info->channels != channels || longer > 4 * size || 4 * shorter < size;
}
static int classify_all(TdmClassifier *cl, const char *const *images, int top, gboolean json);

int
tdm_cli_classify(const char *checkpoint, const char *const *images, int top, gboolean json)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmClassifier) cl = tdm_classifier_load(checkpoint, &error);
  if (cl == NULL) {
    tdm_cli_line(stderr, _("tandem-train: --resume: %s\n"), error->message);
    return EXIT_BAD_INPUT;
  }
  return classify_all(cl, images, top, json);
}

int
tdm_cli_classify_weights(const char *network, const char *weights, int size, int channels,
                         const char *normalize, const char *const *images, int top,
                         gboolean json)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmClassifier) cl = tdm_classifier_load_weights(network, weights, size, channels,
                                                            normalize, &error);
  if (cl == NULL) {
    const char *flag = g_str_has_prefix(error->message, "--") ? "" : "--init: ";
    tdm_cli_line(stderr, _("tandem-train: %s%s\n"), flag, error->message);
    return EXIT_BAD_INPUT;
  }
  return classify_all(cl, images, top, json);
}

static int
classify_all(TdmClassifier *cl, const char *const *images, int top, gboolean json)
{
  g_autoptr(GError) error = NULL;
  int classes = tdm_classifier_classes(cl);
  top = MIN(top, classes);
  int height, width, channels;
  tdm_classifier_input(cl, &height, &width, &channels);
  g_autofree float *probs = g_new(float, classes);
  g_autofree int *order = g_new(int, classes);
  int status = 0;
  gboolean warned = FALSE;
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
  for (int i = 0; images[i] != NULL; i++) {
    guint before = files->len;
    if (g_file_test(images[i], G_FILE_TEST_IS_DIR)) {
      collect_folder(images[i], files);
      if (files->len == before) {
        g_autofree char *display = g_filename_display_name(images[i]);
        tdm_cli_line(stderr,
                     _("tandem-train: --classify: %s: no PNG or JPEG image in this folder\n"),
                     display);
        status = EXIT_BAD_INPUT;
      }
    } else {
      g_ptr_array_add(files, g_strdup(images[i]));
    }
  }
  for (guint i = 0; i < files->len; i++) {
    const char *file = files->pdata[i];
    g_clear_error(&error);
    TdmImageInfo info;
    gboolean probed = tdm_image_probe(file, &info, NULL);
    if (!tdm_classifier_run_file(cl, file, probs, &error)) {
      tdm_cli_line(stderr, _("tandem-train: --classify: %s\n"), error->message);
      status = EXIT_BAD_INPUT;
      continue;
    }
    g_autofree char *adapted = probed ? adaptation(&info, height, channels, !json) : NULL;
    if (probed && !warned && far_from_training(&info, height, channels)) {
      g_autofree char *display = g_filename_display_name(file);
      tdm_cli_line(stderr,
              _("tandem-train: warning: the network was trained on %d×%d %s images; %s is "
              "%d×%d %s, far from them: its answers may mean little\n"),
              width, height, channels == 1 ? _("grey") : _("colour"), display, info.width,
              info.height, info.channels == 1 ? _("grey") : _("colour"));
      warned = TRUE;
    }
    tdm_classifier_rank(probs, classes, top, order);
    if (json) {
      print_json(cl, file, probs, order, top, adapted);
      continue;
    }
    g_autofree char *display = g_filename_display_name(file);
    g_autoptr(GString) line = g_string_new(display);
    g_string_append_c(line, ':');
    for (int r = 0; r < top; r++)
      g_string_append_printf(line, "%s %s %.1f %%", r > 0 ? "," : "",
                             tdm_classifier_class_name(cl, order[r]), 100.0 * probs[order[r]]);
    if (adapted != NULL)
      g_string_append_printf(line, " (%s)", adapted);
    tdm_cli_line(stdout, "%s", line->str);
  }
  fflush(stdout);
  return status;
}
