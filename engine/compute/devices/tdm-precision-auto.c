/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-precision-auto.c — see tdm-precision-auto.h. The rule looks at every device of
 * the run, not the first: one CPU worker or one older GPU among fast GPUs makes the
 * whole run fp32, since every replica must compute alike (the CPU's bf16 is the GPUs'
 * slow reference, and a GPU without bfloat16 tensor cores runs bf16 no faster than
 * fp32). Not the backends' precision: they never see auto.
 */
#include "tdm-precision-auto.h"
#include "tdm-i18n.h"

/* Compute capability 8.0 (Ampere) brought bfloat16 tensor cores. */
#define BF16_TENSOR_CORES_MAJOR 8

static const TdmDeviceInfo *
find_device(TdmDeviceId device, const TdmDeviceInfo *known, guint known_count)
{
  for (guint i = 0; i < known_count; i++)
    if (tdm_device_id_equal(tdm_device_info_id(&known[i]), device))
      return &known[i];
  return NULL;
}

TdmPrecisionChoice
tdm_precision_choose(TdmPrecision asked, const TdmDeviceId *devices, int count,
                     const TdmDeviceInfo *known, guint known_count)
{
  TdmPrecisionChoice c = {.precision = asked, .asked = asked, .cause = TDM_PRECISION_ASKED};
  if (asked != TDM_PRECISION_AUTO)
    return c;
  c.precision = TDM_PRECISION_FP32;
  if (count <= 0 || devices == NULL) {
    c.cause = TDM_PRECISION_NO_DEVICE;
    return c;
  }
  for (int i = 0; i < count; i++) {
    const TdmDeviceInfo *info = find_device(devices[i], known, known_count);
    c.device = devices[i];
    if (devices[i].kind == TDM_BACKEND_CPU) {
      c.cause = TDM_PRECISION_CPU;
      return c;
    }
    if (info == NULL) {
      c.cause = TDM_PRECISION_UNKNOWN_DEVICE;
      return c;
    }
    if (info->compute_major < BF16_TENSOR_CORES_MAJOR) {
      c.cause = TDM_PRECISION_OLDER_GPU;
      c.compute_major = info->compute_major;
      c.compute_minor = info->compute_minor;
      return c;
    }
  }
  c.device = (TdmDeviceId){0};
  c.precision = TDM_PRECISION_BF16;
  c.cause = TDM_PRECISION_TENSOR_CORES;
  return c;
}

/* This machine's devices, listed once a process: the estimate asks for every batch it
 * tries (the window's largest batch, a binary search), and a list reads /proc/cpuinfo
 * and each GPU's properties; the GPUs a process sees do not change while it runs. */
static const GArray *
devices_here(void)
{
  static gsize known; /* the GArray, once listed */
  if (g_once_init_enter(&known))
    g_once_init_leave(&known, (gsize)tdm_device_list());
  return (const GArray *)known;
}

TdmPrecisionChoice
tdm_precision_choose_here(TdmPrecision asked, const TdmDeviceId *devices, int count)
{
  if (asked != TDM_PRECISION_AUTO)
    return tdm_precision_choose(asked, devices, count, NULL, 0);
  const GArray *known = devices_here();
  return tdm_precision_choose(asked, devices, count, (const TdmDeviceInfo *)known->data,
                              known->len);
}

TdmPrecision
tdm_precision_resolve_here(TdmPrecision asked, const TdmDeviceId *devices, int count)
{
  return tdm_precision_choose_here(asked, devices, count).precision;
}

char *
tdm_precision_choice_reason(const TdmPrecisionChoice *choice)
{
  g_return_val_if_fail(choice != NULL, NULL);
  char name[TDM_DEVICE_NAME_MAX];
  tdm_device_id_name(choice->device, name);
  switch (choice->cause) {
  case TDM_PRECISION_ASKED:
    return NULL;
  case TDM_PRECISION_TENSOR_CORES:
    return g_strdup(_("every device has bfloat16 tensor cores"));
  case TDM_PRECISION_NO_DEVICE:
    return g_strdup(_("the run has no device"));
  case TDM_PRECISION_CPU:
    return g_strdup_printf(_("%s has no bfloat16 tensor cores"), name);
  case TDM_PRECISION_OLDER_GPU:
    return g_strdup_printf(_("%s (compute capability %d.%d) has no bfloat16 tensor cores"),
                           name, choice->compute_major, choice->compute_minor);
  case TDM_PRECISION_UNKNOWN_DEVICE:
    return g_strdup_printf(_("%s is not a device of this machine"), name);
  case TDM_PRECISION_OTHER_RANK:
    return g_strdup_printf(_("rank %d's %s has no bfloat16 tensor cores"), choice->rank, name);
  }
  return NULL;
}
