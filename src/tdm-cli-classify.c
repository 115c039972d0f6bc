/* tdm-cli-classify.c — tandem-train --classify (tdm-cli-classify.h). */
#include "tdm-cli-classify.h"
#include "tdm-classifier.h"
#include "tdm-json.h"

#include <json-glib/json-glib.h>
#include <stdio.h>

#define EXIT_BAD_INPUT 2

static void
print_json(const TdmClassifier *cl, const char *path, const float *probs, const int *order,
           int top)
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
  json_builder_end_object(b);
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  g_autofree char *text = tdm_json_to_string(root);
  printf("%s\n", text);
}

static int classify_all(TdmClassifier *cl, const char *const *images, int top, gboolean json);

int
tdm_cli_classify(const char *checkpoint, const char *const *images, int top, gboolean json)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TdmClassifier) cl = tdm_classifier_load(checkpoint, &error);
  if (cl == NULL) {
    fprintf(stderr, "tandem-train: --resume: %s\n", error->message);
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
    fprintf(stderr, "tandem-train: %s%s\n", flag, error->message);
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
  g_autofree float *probs = g_new(float, classes);
  g_autofree int *order = g_new(int, classes);
  int status = 0;
  for (int i = 0; images[i] != NULL; i++) {
    g_clear_error(&error);
    if (!tdm_classifier_run_file(cl, images[i], probs, &error)) {
      fprintf(stderr, "tandem-train: --classify: %s\n", error->message);
      status = EXIT_BAD_INPUT;
      continue;
    }
    tdm_classifier_rank(probs, classes, top, order);
    if (json) {
      print_json(cl, images[i], probs, order, top);
      continue;
    }
    g_autofree char *display = g_filename_display_name(images[i]);
    printf("%s:", display);
    for (int r = 0; r < top; r++)
      printf("%s %s %.1f %%", r > 0 ? "," : "", tdm_classifier_class_name(cl, order[r]),
             100.0 * probs[order[r]]);
    printf("\n");
  }
  fflush(stdout);
  return status;
}
