/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-cublas.c — cuBLAS's loader (tdm-cublas.h) without a GPU: nothing of cuBLAS in a
 * process that has made no CUDA backend (it is opened at run time, not linked); a
 * missing file and a library that is not cuBLAS refused in words that name them; the
 * real library where the toolkit has it, with every function the backend calls and
 * cuBLAS's own names for its statuses. Loading needs no GPU, so these run wherever the
 * build has CUDA; on a GPU, a backend asked for with cuBLAS missing says so. The GEMMs
 * themselves are test-cuda-kernels' and test-cuda-train's.
 */
#include "tdm-build-config.h"

#include <glib.h>
#include <string.h>

#if TDM_HAVE_CUDA

#include "tdm-backend.h"
#include "tdm-cublas.h"

/* The library named by its path as the loader would find it: the default name, or the
 * same file beside the CUDA runtime. */
static gboolean
cublas_in_process(void)
{
  return tdm_cublas_is_loaded(TDM_CUBLAS_DEFAULT);
}

static void
test_not_linked(void)
{
  /* First test to run: the process has its engine, and asked whether a GPU is there
   * (as tandem-train and the window do at start), but made no CUDA backend. */
  (void)tdm_backend_cuda_available();
  g_assert_false(cublas_in_process());
}

/* A missing file, and a library every Linux has with none of cuBLAS's functions: each
 * refused, in words that name the file and what is wrong. */
static void
test_refused(void)
{
  static const struct {
    const char *library, *says;
  } cases[] = {
    {"libtandem-no-such-cublas.so.13", "could not be loaded"},
    {"libm.so.6", "lacks cublasCreate_v2"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *why = NULL;
    g_assert_null(tdm_cublas_open(cases[i].library, &why));
    g_test_message("%s: %s", cases[i].library, why);
    g_assert_nonnull(why);
    g_assert_nonnull(strstr(why, cases[i].library));
    g_assert_nonnull(strstr(why, cases[i].says));
  }
}

static void
test_present(void)
{
  g_autofree char *why = NULL;
  TdmCublas *c = tdm_cublas_open(TDM_CUBLAS_DEFAULT, &why);
  if (c == NULL) {
    g_assert_nonnull(why);
    g_test_skip(why);
    return;
  }
  g_assert_null(why);
  g_assert_true(cublas_in_process());
  g_assert_nonnull(c->create);
  g_assert_nonnull(c->destroy);
  g_assert_nonnull(c->set_stream);
  g_assert_nonnull(c->set_math_mode);
  g_assert_nonnull(c->set_workspace);
  g_assert_nonnull(c->sgemm);
  g_assert_nonnull(c->gemm_ex);
  g_assert_nonnull(c->gemm_strided_batched_ex);
  /* The status names need no GPU and are what the backend's messages print. */
  g_assert_cmpstr(c->get_status_name(CUBLAS_STATUS_NOT_INITIALIZED), ==,
                  "CUBLAS_STATUS_NOT_INITIALIZED");
  g_assert_cmpstr(c->get_status_name(CUBLAS_STATUS_EXECUTION_FAILED), ==,
                  "CUBLAS_STATUS_EXECUTION_FAILED");
  g_assert_nonnull(c->get_status_string(CUBLAS_STATUS_EXECUTION_FAILED));
  tdm_cublas_close(c);
}

/* On a GPU: with cuBLAS missing, making a CUDA backend fails with words naming the
 * device and the library (in a child, whose process loads its own cuBLAS). */
static void
test_backend_without_cublas(void)
{
  if (!tdm_backend_cuda_available()) {
    g_test_skip("no CUDA GPU here");
    return;
  }
  if (g_test_subprocess()) {
    g_setenv("TANDEM_CUBLAS_LIBRARY", "libtandem-no-such-cublas.so.13", TRUE);
    g_autoptr(GError) error = NULL;
    TdmBackend *b = tdm_backend_cuda_new(0, TDM_PRECISION_FP32, &error);
    g_assert_null(b);
    g_assert_nonnull(error);
    g_print("%s\n", error->message);
    return;
  }
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  g_test_trap_assert_stdout("*cuda:0*libtandem-no-such-cublas.so.13*could not be loaded*");
}

static void
test_process_once(void)
{
  const TdmCublas *first = tdm_cublas_get();
  g_assert_true(tdm_cublas_get() == first);
  /* Either it loaded, or it says why not; never neither. */
  g_assert_true((first != NULL) != (tdm_cublas_why_not() != NULL));
  if (first != NULL)
    g_assert_true(cublas_in_process());
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_unsetenv("TANDEM_CUBLAS_LIBRARY");
  g_test_add_func("/cublas/not-linked", test_not_linked);
  g_test_add_func("/cublas/refused", test_refused);
  g_test_add_func("/cublas/present", test_present);
  g_test_add_func("/cublas/process-once", test_process_once);
  g_test_add_func("/cublas/backend-without-cublas", test_backend_without_cublas);
  return g_test_run();
}

#else /* !TDM_HAVE_CUDA */

static void
test_no_cuda(void)
{
  g_test_skip("this build has no CUDA backend, so no cuBLAS loader");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cublas/none", test_no_cuda);
  return g_test_run();
}

#endif
