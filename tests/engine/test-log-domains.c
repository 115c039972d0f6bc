/* SPDX-License-Identifier: GPL-3.0-or-later */
/* test-log-domains.c — each engine folder logs under its own domain, so that
 * G_MESSAGES_DEBUG=Tandem-Model shows one part. One public entry point of each folder
 * is called against its precondition, and the critical it logs must carry that
 * folder's domain (engine/meson.build's engine_log_domains): a folder built under
 * another domain, or the whole engine under one, fails here. Not what the messages
 * say.
 */
#include "tdm-backend.h"
#include "tdm-communicator.h"
#include "tdm-compare.h"
#include "tdm-config.h"
#include "tdm-history.h"
#include "tdm-image.h"
#include "tdm-network-catalogue.h"
#include "tdm-onnx-export.h"
#include "tdm-telemetry.h"
#include "tdm-trainer.h"

typedef struct {
  const char *path;      /* the test's */
  const char *domain;    /* what the folder logs under */
  const char *function;  /* its entry point, named in the critical */
  void (*call)(void);    /* calls it against its precondition */
} Part;

static void
call_core(void)
{
  g_assert_null(tdm_config_copy(NULL));
}

static void
call_data(void)
{
  g_assert_false(tdm_image_probe(NULL, NULL, NULL));
}

static void
call_compute(void)
{
  g_assert_null(tdm_backend_new((TdmDeviceId){(TdmBackendKind)7, 0}, TDM_PRECISION_FP32, NULL));
}

static void
call_devices(void)
{
  g_assert_false(tdm_telemetry_available(NULL, NULL));
}

static void
call_model(void)
{
  g_assert_null(tdm_network_preset_find(NULL));
}

static void
call_communication(void)
{
  g_assert_null(tdm_communicator_new(NULL, 0, NULL));
}

static void
call_training(void)
{
  g_assert_null(tdm_trainer_new(NULL, NULL, NULL));
}

static void
call_history(void)
{
  g_assert_null(tdm_history_load(NULL, "run", NULL));
}

static void
call_experiments(void)
{
  tdm_compare_prepare(NULL, 1);
}

static void
call_export(void)
{
  g_assert_false(tdm_onnx_export(NULL, NULL, NULL, NULL, NULL, NULL));
}

static const Part parts[] = {
  {"/log-domain/core", "Tandem-Core", "tdm_config_copy", call_core},
  {"/log-domain/data", "Tandem-Data", "tdm_image_probe", call_data},
  {"/log-domain/compute", "Tandem-Compute", "tdm_backend_new", call_compute},
  {"/log-domain/compute-devices", "Tandem-Compute", "tdm_telemetry_available", call_devices},
  {"/log-domain/model", "Tandem-Model", "tdm_network_preset_find", call_model},
  {"/log-domain/communication", "Tandem-Communication", "tdm_communicator_new",
   call_communication},
  {"/log-domain/training", "Tandem-Training", "tdm_trainer_new", call_training},
  {"/log-domain/history", "Tandem-Run-History", "tdm_history_load", call_history},
  {"/log-domain/experiments", "Tandem-Experiments", "tdm_compare_prepare", call_experiments},
  {"/log-domain/export", "Tandem-Export", "tdm_onnx_export", call_export},
};

static void
test_part(gconstpointer data)
{
  const Part *part = data;
  g_autofree char *pattern = g_strdup_printf("%s: assertion*failed", part->function);

  /* An unexpected critical (another domain) is fatal; an expected one never seen
   * fails the assertion below. */
  g_test_expect_message(part->domain, G_LOG_LEVEL_CRITICAL, pattern);
  part->call();
  g_test_assert_expected_messages();
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(parts); i++)
    g_test_add_data_func(parts[i].path, &parts[i], test_part);
  return g_test_run();
}
