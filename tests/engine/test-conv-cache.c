/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-conv-cache.c — the convolution cache's file on any machine (it is plain files,
 * no GPU): written through a temporary beside it and renamed over it, a stale
 * temporary of a killed writer removed, and what stands at its place respected — a
 * dangling symbolic link, a link to another file, a folder and a FIFO are neither
 * read, written through nor replaced, and that is said once. A replica's remembered
 * workspace read back from the file, and none from a damaged file, a partial one or a
 * line that is not a number of bytes. Candidate names read back, and a file naming
 * no candidate ignored; a file of version 4 (choices made before the screen) or 5
 * (float32 choices within a 64-MiB slack) ignored and rebuilt. Reading and damaged
 * files of choices are tests/gpu/test-cudnn.c's /cudnn/conv-cache. */
#include "tdm-backend-cuda-conv-cache.h"
#include "remove-tree.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MODEL "NVIDIA H200-sm9-cudnn91900"
#define LINE "fwd n2 h8 w8 c64 o64 k3 p1 s1 bf16"

static char *dir;
static char *path;
static GPtrArray *messages;

static void
keep_message(const char *domain, GLogLevelFlags level, const char *message, gpointer data)
{
  g_test_message("%s: %s", domain, message);
  g_ptr_array_add(messages, g_strdup(message));
}

/* A fresh folder and the cache pointed at choices.txt in it. */
static void
fresh(void)
{
  if (dir != NULL) {
    test_remove_tree(dir);
    g_clear_pointer(&dir, g_free);
    g_clear_pointer(&path, g_free);
  }
  dir = g_dir_make_tmp("tandem-conv-cache-XXXXXX", NULL);
  path = g_build_filename(dir, "choices.txt", NULL);
  g_setenv("TANDEM_CONV_CACHE", path, TRUE);
  tdm_conv_cache_reset();
  g_ptr_array_set_size(messages, 0);
}

/* The names in dir but choices.txt, and whatever else the caller made there. */
static guint
others_in_dir(const char *besides)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  g_assert_nonnull(d);
  guint n = 0;
  const char *name;
  while ((name = g_dir_read_name(d)) != NULL)
    if (!g_str_equal(name, "choices.txt") && (besides == NULL || !g_str_equal(name, besides))) {
      g_test_message("left in the folder: %s", name);
      n++;
    }
  g_dir_close(d);
  return n;
}

static char *
contents(const char *file)
{
  char *text = NULL;
  g_assert_true(g_file_get_contents(file, &text, NULL, NULL));
  return text;
}

static void
test_written_beside(void)
{
  fresh();
  /* A temporary of a writer that was killed: its lock is free, so it goes. */
  g_autofree char *stale = g_build_filename(dir, ".choices.txt.Ab12Cd", NULL);
  g_assert_true(g_file_set_contents(stale, "half a cache", -1, NULL));
  tdm_conv_cache_store(MODEL, LINE, "cudnn:e7:r0:f", 0.012);
  tdm_conv_cache_store(MODEL, "wgrad n2", "own:dgrad", 0.5);
  g_autofree char *text = contents(path);
  g_assert_cmpstr(text, ==, "tandem-conv-choices 7\n" LINE "\tcudnn:e7:r0:f\t0.012000\n"
                            "wgrad n2\town:dgrad\t0.500000\n");
  g_assert_cmpuint(others_in_dir(NULL), ==, 0);
  g_assert_cmpuint(messages->len, ==, 0);
  /* What was written reads back in the next process. */
  tdm_conv_cache_reset();
  g_autofree char *name = tdm_conv_cache_lookup(MODEL, LINE);
  g_assert_cmpstr(name, ==, "cudnn:e7:r0:f");
}

/* The few-channel candidates' choices (the stem's keys, as the engine writes them)
 * read back by the next process under their names. */
static void
test_own_names(void)
{
  fresh();
  const char *fwd = "fwd n128 h224 w224 c3 o64 k7 p3 s2 bf16 y16";
  const char *wgrad = "wgrad n128 h224 w224 c3 o64 k7 p3 s2 bf16";
  tdm_conv_cache_store(MODEL, fwd, "own:fwd", 0.25);
  tdm_conv_cache_store(MODEL, wgrad, "own:wgrad", 0.3);
  tdm_conv_cache_reset();
  g_autofree char *f = tdm_conv_cache_lookup(MODEL, fwd);
  g_autofree char *w = tdm_conv_cache_lookup(MODEL, wgrad);
  g_assert_cmpstr(f, ==, "own:fwd");
  g_assert_cmpstr(w, ==, "own:wgrad");
  g_assert_cmpuint(messages->len, ==, 0);
}

/* A chunked cuDNN choice (tdm-backend-cuda-conv-name.h: ":n32") written and read back
 * by the next process; a file naming something that is no candidate's name (damaged:
 * a chunk of no samples, a leading zero, fields out of order, a kind that does not
 * exist) is ignored whole, said once, and written anew at the next choice; a
 * workspace line is bytes, not a name. */
static void
test_candidate_names(void)
{
  const char *key = "fwd n128 h128 w128 c64 o64 k3 p1 s1 bf16 bn x16 y16";
  fresh();
  tdm_conv_cache_store(MODEL, key, "cudnn:e62:r0:h:n32", 0.35);
  tdm_conv_cache_reset();
  g_autofree char *name = tdm_conv_cache_lookup(MODEL, key);
  g_assert_cmpstr(name, ==, "cudnn:e62:r0:h:n32");
  g_assert_cmpuint(messages->len, ==, 0);
  const char *damaged[] = {"cudnn:e62:r0:h:n0", "cudnn:e62:r0:h:n032", "cudnn:e62:r0:h:n32:c8",
                           "cudnn:e62:r0", "own:bwd", "im2col:n32"};
  for (size_t i = 0; i < G_N_ELEMENTS(damaged); i++) {
    fresh();
    g_autofree char *text = g_strdup_printf("tandem-conv-choices 7\n"
                                            "%s\tcudnn:e62:r0:h:n32\t0.35\n"
                                            LINE "\t%s\t0.5\n", key, damaged[i]);
    g_assert_true(g_file_set_contents(path, text, -1, NULL));
    tdm_conv_cache_reset();
    g_assert_null(tdm_conv_cache_lookup(MODEL, key));
    g_assert_cmpuint(messages->len, ==, 1);
    g_assert_nonnull(strstr(g_ptr_array_index(messages, 0), "damaged"));
    g_assert_nonnull(strstr(g_ptr_array_index(messages, 0), "names no candidate"));
    tdm_conv_cache_store(MODEL, LINE, "im2col", 1.0);
    g_autofree char *rewritten = contents(path);
    g_assert_cmpstr(rewritten, ==, "tandem-conv-choices 7\n" LINE "\tim2col\t1.000000\n");
  }
}

/* Version 4's choices were made before the screen (tdm-backend-cuda-conv-screen.h) and
 * may name a candidate it now leaves out (cuDNN's engine 62 for a 1×1 weight gradient
 * written as bf16, the bn-input-chunks case); version 5's float32 choices within a
 * 64-MiB slack, without the cuDNN plans that need more; version 6's input gradients of
 * stride 2 or more, chosen without the phases ("cudnn-phases:…"). Each is ignored whole,
 * said once, and written anew as version 7 at the next choice, whose own lines read
 * back. */
static void
test_older_versions(void)
{
  const char *key = "wgrad n64 h128 w128 c64 o16 k1 p0 s1 bf16 bn x16";
  for (int version = 4; version <= 6; version++) {
    fresh();
    g_autofree char *old =
        g_strdup_printf("tandem-conv-choices %d\n%s\tcudnn:e62:r0:h\t0.2\n", version, key);
    g_assert_true(g_file_set_contents(path, old, -1, NULL));
    tdm_conv_cache_reset();
    g_assert_null(tdm_conv_cache_lookup(MODEL, key));
    g_assert_cmpuint(messages->len, ==, 1);
    g_assert_nonnull(strstr(g_ptr_array_index(messages, 0), "damaged"));
    tdm_conv_cache_store(MODEL, key, "im2col", 0.3);
    g_autofree char *rewritten = contents(path);
    g_autofree char *expected =
        g_strdup_printf("tandem-conv-choices 7\n%s\tim2col\t0.300000\n", key);
    g_assert_cmpstr(rewritten, ==, expected);
    tdm_conv_cache_reset();
    g_autofree char *name = tdm_conv_cache_lookup(MODEL, key);
    g_assert_cmpstr(name, ==, "im2col");
    g_assert_cmpuint(messages->len, ==, 1);
  }
}

/* Two stores and the file's place as it was: the refusal said once, naming it. */
static void
assert_refused_once(const char *fragment)
{
  tdm_conv_cache_store(MODEL, LINE, "im2col", 1.0);
  tdm_conv_cache_store(MODEL, "wgrad n2", "own:dgrad", 0.5);
  g_assert_cmpuint(messages->len, ==, 1);
  const char *said = messages->pdata[0];
  g_assert_nonnull(strstr(said, path));
  if (strstr(said, fragment) == NULL)
    g_error("“%s” is not in: %s", fragment, said);
  /* The choices themselves are still used by this process. */
  g_autofree char *name = tdm_conv_cache_lookup(MODEL, LINE);
  g_assert_cmpstr(name, ==, "im2col");
}

/* A replica's workspace after its choices, remembered for its configuration and read
 * back from the file by the next process (the cache's tables forgotten in between);
 * another configuration's is not there; a damaged file remembers nothing. */
static void
test_workspace_remembered(void)
{
  const char *plan = "net=resnet in=32x32x3 precision=bf16 batch=512";
  const char *other = "net=resnet in=32x32x3 precision=bf16 batch=256";
  guint64 bytes = 0;
  fresh();
  tdm_conv_cache_store(MODEL, LINE, "cudnn:e7:r0:h", 0.012);
  tdm_conv_cache_store_workspace(MODEL, plan, 123456789012u);
  tdm_conv_cache_reset();
  g_assert_true(tdm_conv_cache_lookup_workspace(MODEL, plan, &bytes));
  g_assert_cmpuint(bytes, ==, 123456789012u);
  /* Partial: the choices are there, this configuration's workspace is not. */
  g_assert_false(tdm_conv_cache_lookup_workspace(MODEL, other, &bytes));
  g_autofree char *text = contents(path);
  g_assert_nonnull(strstr(text, "\tcudnn:e7:r0:h\t"));
  g_assert_nonnull(strstr(text, "\n" "workspace "));

  /* A workspace line whose bytes are not a whole number: none remembered. */
  g_autofree char *digest = g_compute_checksum_for_string(G_CHECKSUM_SHA1, plan, -1);
  g_autofree char *bad = g_strdup_printf("tandem-conv-choices 7\nworkspace %s\t12kB\t0\n",
                                         digest);
  g_assert_true(g_file_set_contents(path, bad, -1, NULL));
  tdm_conv_cache_reset();
  g_assert_false(tdm_conv_cache_lookup_workspace(MODEL, plan, &bytes));

  /* A damaged file (a line of two fields) is ignored whole. */
  g_autofree char *damaged = g_strdup_printf(
      "tandem-conv-choices 7\nworkspace %s\t4096\t0\n" LINE "\tcudnn:e7:r0:h\n", digest);
  g_assert_true(g_file_set_contents(path, damaged, -1, NULL));
  tdm_conv_cache_reset();
  g_assert_false(tdm_conv_cache_lookup_workspace(MODEL, plan, &bytes));
  g_assert_cmpuint(messages->len, ==, 1);
  g_assert_nonnull(strstr(g_ptr_array_index(messages, 0), "damaged"));
  /* The same lines, well formed: remembered. */
  g_autofree char *good = g_strdup_printf(
      "tandem-conv-choices 7\nworkspace %s\t4096\t0\n" LINE "\tcudnn:e7:r0:h\t0.5\n",
      digest);
  g_assert_true(g_file_set_contents(path, good, -1, NULL));
  tdm_conv_cache_reset();
  g_assert_true(tdm_conv_cache_lookup_workspace(MODEL, plan, &bytes));
  g_assert_cmpuint(bytes, ==, 4096);
}

static void
test_dangling_link(void)
{
  fresh();
  g_autofree char *target = g_build_filename(dir, "elsewhere", "choices.txt", NULL);
  g_assert_cmpint(symlink(target, path), ==, 0);
  assert_refused_once("dangling symbolic link");
  g_autofree char *link = g_file_read_link(path, NULL);
  g_assert_cmpstr(link, ==, target);
  g_assert_false(g_file_test(target, G_FILE_TEST_EXISTS));
  g_assert_cmpuint(others_in_dir(NULL), ==, 0);
}

static void
test_link_to_a_file(void)
{
  fresh();
  g_autofree char *target = g_build_filename(dir, "notes.txt", NULL);
  const char *mine = "tandem-conv-choices 7\n" LINE "\town:fwd\t0.250000\n";
  g_assert_true(g_file_set_contents(target, mine, -1, NULL));
  g_assert_cmpint(symlink(target, path), ==, 0);
  /* Neither read through the link… */
  g_assert_null(tdm_conv_cache_lookup(MODEL, LINE));
  /* …nor written through it, nor replacing it. */
  assert_refused_once("a symbolic link (to");
  g_autofree char *after = contents(target);
  g_assert_cmpstr(after, ==, mine);
  g_assert_true(g_file_test(path, G_FILE_TEST_IS_SYMLINK));
  g_assert_cmpuint(others_in_dir("notes.txt"), ==, 0);
}

static void
test_not_a_file(void)
{
  fresh();
  g_assert_cmpint(g_mkdir(path, 0755), ==, 0);
  assert_refused_once("a folder");
  g_assert_true(g_file_test(path, G_FILE_TEST_IS_DIR));
  g_assert_cmpuint(others_in_dir(NULL), ==, 0);

  fresh();
  g_assert_cmpint(mkfifo(path, 0644), ==, 0);
  assert_refused_once("FIFO");
  struct stat st;
  g_assert_cmpint(lstat(path, &st), ==, 0);
  g_assert_true(S_ISFIFO(st.st_mode));
  g_assert_cmpuint(others_in_dir(NULL), ==, 0);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  messages = g_ptr_array_new_with_free_func(g_free);
  g_log_set_handler("Tandem-Compute", G_LOG_LEVEL_MESSAGE, keep_message, NULL);
  g_test_add_func("/conv-cache/written-beside", test_written_beside);
  g_test_add_func("/conv-cache/own-names", test_own_names);
  g_test_add_func("/conv-cache/dangling-link", test_dangling_link);
  g_test_add_func("/conv-cache/workspace-remembered", test_workspace_remembered);
  g_test_add_func("/conv-cache/candidate-names", test_candidate_names);
  g_test_add_func("/conv-cache/older-versions", test_older_versions);
  g_test_add_func("/conv-cache/link-to-a-file", test_link_to_a_file);
  g_test_add_func("/conv-cache/not-a-file", test_not_a_file);
  int status = g_test_run();
  if (dir != NULL)
    test_remove_tree(dir);
  g_free(dir);
  g_free(path);
  g_unsetenv("TANDEM_CONV_CACHE");
  tdm_conv_cache_reset();
  g_ptr_array_unref(messages);
  return status;
}
