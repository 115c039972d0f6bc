/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cudnn.c — cuDNN's loader (tdm-cudnn.h) without a GPU: hidden by TANDEM_CUDNN=0,
 * a missing file, a library that is not cuDNN, each refused with words that name it;
 * the real libcudnn.so.9 where it is installed (the development machine has it with
 * CUDA 13.0), with its version and every function the graph API needs. Loading needs
 * no GPU, so these run wherever the build has CUDA. The convolutions themselves are
 * test-cuda-conv.c's.
 */
#include "tdm-build-config.h"

#include <glib.h>
#include <string.h>

#if TDM_HAVE_CUDA

#include "tdm-backend-cuda-conv-cache.h"
#include "tdm-cudnn.h"

#include <glib/gstdio.h>

/* Opening `library` is refused, in words that contain `first` and `second`. */
static void
refused(const char *library, const char *first, const char *second)
{
  g_autofree char *why = NULL;
  TdmCudnn *c = tdm_cudnn_open(library, &why);
  g_assert_null(c);
  g_assert_nonnull(why);
  g_test_message("%s: %s", library, why);
  g_assert_nonnull(strstr(why, first));
  g_assert_nonnull(strstr(why, second));
}

static void
test_hidden(void)
{
  g_setenv("TANDEM_CUDNN", "0", TRUE);
  refused("libcudnn.so.9", "TANDEM_CUDNN=0", "hidden");
  g_unsetenv("TANDEM_CUDNN");
}

static void
test_missing(void)
{
  refused("libtandem-no-such-cudnn.so.9", "libtandem-no-such-cudnn.so.9", "could not be loaded");
}

static void
test_not_cudnn(void)
{
  /* A library every Linux has, with none of cuDNN's functions. */
  refused("libm.so.6", "libm.so.6", "graph API");
}

static void
test_present(void)
{
  g_autofree char *why = NULL;
  TdmCudnn *c = tdm_cudnn_open("libcudnn.so.9", &why);
  if (c == NULL) {
    g_assert_nonnull(why);
    g_test_skip(why);
    return;
  }
  g_assert_null(why);
  g_test_message("cuDNN %zu from %s", c->version, c->path);
  g_assert_cmpuint(c->version / 10000, ==, 9);
  g_assert_nonnull(c->create);
  g_assert_nonnull(c->create_descriptor);
  g_assert_nonnull(c->set_attribute);
  g_assert_nonnull(c->get_attribute);
  g_assert_nonnull(c->finalize);
  g_assert_nonnull(c->execute);
  /* A descriptor is host memory: creating and destroying one needs no GPU. */
  cudnnBackendDescriptor_t d = NULL;
  g_assert_cmpint(c->create_descriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d), ==,
                  CUDNN_STATUS_SUCCESS);
  g_assert_nonnull(d);
  /* Finalizing a tensor without its dimensions is refused with a status to describe. */
  cudnnStatus_t status = c->finalize(d);
  g_assert_cmpint(status, !=, CUDNN_STATUS_SUCCESS);
  g_autofree char *text = tdm_cudnn_describe(c, status);
  g_autofree char *code = g_strdup_printf("(%d)", status);
  g_test_message("%s", text);
  g_assert_nonnull(strstr(text, code));
  g_assert_cmpint(c->destroy_descriptor(d), ==, CUDNN_STATUS_SUCCESS);
  tdm_cudnn_close(c);
}

static void
test_process_once(void)
{
  const TdmCudnn *first = tdm_cudnn_get();
  g_assert_true(tdm_cudnn_get() == first);
  /* Either it loaded, or it says why not; never neither. */
  g_assert_true((first != NULL) != (tdm_cudnn_why_not() != NULL));
}

/* The convolution engine's choices on disk: read back, and a damaged file ignored and
 * written anew (no GPU needed: the cache is plain files). */
static void
test_conv_cache(void)
{
  g_autofree char *dir = g_dir_make_tmp("tandem-conv-cache-XXXXXX", NULL);
  g_autofree char *path = g_build_filename(dir, "choices.txt", NULL);
  g_setenv("TANDEM_CONV_CACHE", path, TRUE);
  g_autofree char *where = tdm_conv_cache_path("NVIDIA H200-sm9-cudnn91900");
  g_assert_cmpstr(where, ==, path);

  /* A good file. */
  g_assert_true(g_file_set_contents(path, "tandem-conv-choices 7\n"
                                    "fwd n2 h8 w8 c64 o64 k3 p1 s1 bf16\tcudnn:e7:r0:f\t0.012\n",
                                    -1, NULL));
  tdm_conv_cache_reset();
  g_autofree char *name = tdm_conv_cache_lookup("gpu", "fwd n2 h8 w8 c64 o64 k3 p1 s1 bf16");
  g_assert_cmpstr(name, ==, "cudnn:e7:r0:f");
  g_assert_null(tdm_conv_cache_lookup("gpu", "fwd n3 h8 w8 c64 o64 k3 p1 s1 bf16"));

  /* Damaged in each way the reader checks: every one is ignored as a whole. */
  const char *damaged[] = {
    "not a cache\nfwd x\tim2col\t1\n",
    "tandem-conv-choices 7\nfwd n2\tim2col\n",
    "tandem-conv-choices 7\nfwd n2\tim2col\t-1\n",
    "tandem-conv-choices 7\nfwd n2\tim2col\tfast\n",
    "tandem-conv-choices 7\nfwd n2\tim2col\t1\textra\n",
    "tandem-conv-choices 1\nfwd n2\tim2col\t1\n", /* an older version's choices */
    "tandem-conv-choices 2\nfwd n2\tim2col\t1\n", /* before cuDNN ran in chunks */
    "tandem-conv-choices 3\nfwd n2\tim2col\t1\n", /* before cuDNN's fused plans */
    "tandem-conv-choices 4\nfwd n2\tim2col\t1\n", /* before the screen */
    "tandem-conv-choices 5\nfwd n2\tim2col\t1\n", /* before float32's own slack */
    "tandem-conv-choices 6\nfwd n2\tim2col\t1\n", /* before the input gradient by phases */
    "tandem-conv-choices 8\nfwd n2\tim2col\t1\n", /* a later version's */
  };
  for (size_t i = 0; i < G_N_ELEMENTS(damaged); i++) {
    g_assert_true(g_file_set_contents(path, damaged[i], -1, NULL));
    tdm_conv_cache_reset();
    g_assert_null(tdm_conv_cache_lookup("gpu", "fwd n2"));
    /* The next choice rewrites the file whole, well-formed. */
    tdm_conv_cache_store("gpu", "wgrad n2", "own:dgrad", 0.5);
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    g_assert_cmpstr(text, ==, "tandem-conv-choices 7\nwgrad n2\town:dgrad\t0.500000\n");
  }
  /* A NUL byte inside. */
  g_assert_true(g_file_set_contents(path, "tandem-conv-choices 7\nfwd n2\tim\0x\t1\n", 36,
                                    NULL));
  tdm_conv_cache_reset();
  g_assert_null(tdm_conv_cache_lookup("gpu", "fwd n2"));

  /* Off: the process's table alone, the file left as it was. */
  g_autofree char *before = NULL;
  g_assert_true(g_file_get_contents(path, &before, NULL, NULL));
  g_setenv("TANDEM_CONV_CACHE", "0", TRUE);
  tdm_conv_cache_reset();
  g_assert_null(tdm_conv_cache_path("gpu"));
  g_assert_null(tdm_conv_cache_lookup("gpu", "wgrad n2"));
  tdm_conv_cache_store("gpu", "wgrad n3", "im2col", 1.0);
  g_autofree char *shared = tdm_conv_cache_lookup("gpu", "wgrad n3");
  g_assert_cmpstr(shared, ==, "im2col");
  g_autofree char *after = NULL;
  g_assert_true(g_file_get_contents(path, &after, NULL, NULL));
  g_assert_cmpstr(after, ==, before);
  g_unsetenv("TANDEM_CONV_CACHE");
  tdm_conv_cache_reset();
  g_unlink(path);
  g_rmdir(dir);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_unsetenv("TANDEM_CUDNN_LIBRARY");
  g_test_add_func("/cudnn/conv-cache", test_conv_cache);
  g_test_add_func("/cudnn/hidden", test_hidden);
  g_test_add_func("/cudnn/missing", test_missing);
  g_test_add_func("/cudnn/not-cudnn", test_not_cudnn);
  g_test_add_func("/cudnn/present", test_present);
  g_test_add_func("/cudnn/process-once", test_process_once);
  return g_test_run();
}

#else /* !TDM_HAVE_CUDA */

static void
test_no_cuda(void)
{
  g_test_skip("this build has no CUDA backend, so no cuDNN loader");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cudnn/none", test_no_cuda);
  return g_test_run();
}

#endif
