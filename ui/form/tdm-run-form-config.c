/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-run-form-config.c: the run the form's choices describe, and its memory.
 *
 * The choices become a TdmConfig as tandem-train's options would (a built-in
 * network's recipe first, then what the form shows over it), validated by the
 * engine; the memory estimate is the engine's for that configuration, against this
 * machine's free memory and the smallest chosen GPU.
 */

#include <glib/gi18n.h>
#include <glib/gstdio.h>

#include "tdm-choice.h"
#include "tdm-device.h"
#include "tdm-device-row.h"
#include "tdm-error.h"
#include "tdm-form-choices.h"
#include "tdm-memory.h"
#include "tdm-network-catalogue.h"
#include "tdm-network.h"
#include "tdm-run.h"
#include "tdm-run-form-private.h"

TdmConfig *
tdm_run_form_build_config (TdmRunForm  *self,
                           GError     **error)
{
  g_autoptr(TdmConfig) config = NULL;
  guint network, optimizer, strategy, batchnorm, precision;

  g_return_val_if_fail (TDM_IS_RUN_FORM (self), NULL);

  config = tdm_config_new ();
  network = adw_combo_row_get_selected (self->network_dropdown);
  optimizer = adw_combo_row_get_selected (self->optimizer_dropdown);
  strategy = adw_combo_row_get_selected (self->strategy_dropdown);
  batchnorm = adw_combo_row_get_selected (self->batchnorm_dropdown);
  precision = adw_combo_row_get_selected (self->precision_dropdown);

  g_free (config->dataset);
  config->dataset = g_strdup (tdm_dataset_chooser_get_source (self->dataset_chooser));
  tdm_dataset_chooser_get_image_options (self->dataset_chooser, &config->image_size,
                                         &config->image_channels);
  /* Every run keeps its network, so images can be classified with it afterwards. */
  config->save_path = tdm_run_last_network_path ();
  {
    g_autofree char *dir = g_path_get_dirname (config->save_path);
    g_mkdir_with_parents (dir, 0700);
  }

  g_free (config->network);
  if (network >= tdm_form_network_custom_index ())
    config->network = g_strstrip (g_strdup (tdm_spec_entry_get_text (self->spec_entry)));
  else
    config->network = g_strdup (tdm_form_network_id (network));
  /* The recipe's parts the form has no control for (decay, warm-up, smoothing,
   * augmentation); what the form shows is set below. */
  tdm_config_apply_preset (config, config->network);
  tdm_finetune_group_apply (self->finetune_group, config);

  {
    TdmDeviceId devices[TDM_MAX_REPLICAS];
    int count = tdm_device_picker_get_replicas (self->device_picker, devices, TDM_MAX_REPLICAS,
                                                &config->main_replica);

    if (!tdm_config_set_device_list (config, devices, count, error))
      return NULL;
  }

  config->batch = gtk_spin_button_get_value_as_int (self->batch_spin);
  config->epochs = gtk_spin_button_get_value_as_int (self->epochs_spin);
  /* Positions are the enums' values (tdm_form_choice_value()); no selection keeps the
   * default. */
  if (optimizer < tdm_choice_count (TDM_TYPE_OPTIMIZER_KIND))
    config->optimizer = (TdmOptimizerKind) optimizer;
  config->lr = gtk_spin_button_get_value (self->lr_spin);
  if (strategy < tdm_choice_count (TDM_TYPE_STRATEGY))
    config->strategy = (TdmStrategy) strategy;
  if (batchnorm < tdm_choice_count (TDM_TYPE_BATCH_NORM))
    config->batchnorm = (TdmBatchNorm) batchnorm;
  if (precision < tdm_choice_count (TDM_TYPE_PRECISION))
    config->precision = (TdmPrecision) tdm_form_choice_value (TDM_TYPE_PRECISION, precision);

  if (!tdm_config_validate (config, error))
    return NULL;

  return g_steal_pointer (&config);
}

/* The smallest memory of the GPUs the choices use (0: no GPU, or none known). */
static guint64
tdm_run_form_gpu_budget (TdmRunForm      *self,
                         const TdmConfig *config)
{
  g_autoptr(GPtrArray) rows = tdm_device_picker_get_rows (self->device_picker);
  guint64 budget = 0;

  for (int i = 0; i < config->replicas; i++)
    for (guint k = 0; k < rows->len; k++)
      {
        const TdmDeviceInfo *info = tdm_device_row_get_info (rows->pdata[k]);

        if (tdm_device_id_is_gpu (config->devices[i]) &&
            tdm_device_id_equal (tdm_device_info_id (info), config->devices[i]) &&
            info->memory_bytes > 0 && (budget == 0 || (guint64) info->memory_bytes < budget))
          budget = (guint64) info->memory_bytes;
      }
  return budget;
}

gboolean
tdm_run_form_estimate_memory (TdmRunForm      *self,
                              TdmMemoryEvent  *estimate,
                              gboolean        *fits,
                              int             *largest_batch,
                              GError         **error)
{
  g_autoptr(TdmConfig) config = NULL;
  TdmNetwork *net;
  int height, width, channels, classes, train_count, test_count;
  guint64 host_budget, gpu_budget;
  gboolean ok;

  g_return_val_if_fail (TDM_IS_RUN_FORM (self), FALSE);
  g_return_val_if_fail (estimate != NULL, FALSE);

  if (!tdm_dataset_chooser_get_shape (self->dataset_chooser, &height, &width, &channels, &classes) ||
      !tdm_dataset_chooser_get_counts (self->dataset_chooser, &train_count, &test_count))
    {
      g_set_error_literal (error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_DATASET,
                           _("The estimate appears once the dataset has loaded."));
      return FALSE;
    }
  /* What stops Start, in the form's words: the engine's check below would name the
   * command line's options ("--batch 1 is smaller than the 2 devices"). */
  {
    g_autofree char *problem = tdm_run_form_dup_problem (self);

    if (problem != NULL)
      {
        g_set_error_literal (error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_INVALID_OPTION, problem);
        return FALSE;
      }
  }
  config = tdm_run_form_build_config (self, error);
  if (config == NULL)
    return FALSE;
  net = tdm_network_new (config->network, height, width, channels, classes, error);
  if (net == NULL)
    return FALSE;

  tdm_memory_estimate (config, net, train_count, test_count, estimate);

  /* The same budgets the trainer checks against: the host's free memory, and each
   * GPU's capacity. */
  host_budget = tdm_memory_host_available (NULL);
  if (host_budget == G_MAXUINT64)
    host_budget = 0;
  gpu_budget = tdm_run_form_gpu_budget (self, config);
  ok = tdm_memory_fits (estimate, host_budget, gpu_budget);

  if (fits != NULL)
    *fits = ok;
  if (largest_batch != NULL)
    *largest_batch = ok ? config->batch
                        : tdm_memory_largest_batch (config, net, train_count, test_count,
                                                    host_budget, gpu_budget);
  tdm_network_free (net);
  return TRUE;
}

