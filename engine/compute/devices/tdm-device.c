/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-device.c — what Tandem can train on: every CUDA GPU the runtime reports (in
 * builds with CUDA, on machines with a driver) and then the CPU, described from
 * /proc/cpuinfo and the system's memory figures.
 *
 * A machine without a GPU or driver is ordinary, not an error: the list simply has
 * the CPU alone, and nothing is printed. Not telemetry (tdm-telemetry.c): these are
 * the fixed facts a person picks devices by.
 */
#include "tdm-device.h"
#include "tdm-build-config.h"

#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#if TDM_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static void
add_gpus(GArray *list)
{
#if TDM_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  for (int i = 0; i < count; i++) {
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    TdmDeviceInfo info = {0};
    info.kind = TDM_BACKEND_CUDA;
    info.index = i;
    tdm_device_id_name(TDM_DEVICE_GPU(i), info.id);
    g_strlcpy(info.name, prop.name, sizeof info.name);
    info.memory_bytes = (gint64)prop.totalGlobalMem;
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    info.cores = prop.multiProcessorCount;
    if (cudaDeviceGetPCIBusId(info.pci_bus_id, (int)sizeof info.pci_bus_id, i) != cudaSuccess) {
      (void)cudaGetLastError();
      info.pci_bus_id[0] = '\0';
    }
    g_array_append_val(list, info);
  }
#endif
}

/* The value of the first "key : value" line of /proc/cpuinfo whose key is one of
 * keys (x86 says "model name"; Arm kernels say "Hardware" or "Model", or nothing). */
static char *
cpuinfo_value(const char *const *keys)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/cpuinfo", &text, NULL, NULL))
    return NULL;
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (const char *const *key = keys; *key != NULL; key++)
    for (char **line = lines; *line != NULL; line++) {
      char *colon = strchr(*line, ':');
      if (colon == NULL)
        continue;
      g_autofree char *name = g_strstrip(g_strndup(*line, colon - *line));
      if (g_ascii_strcasecmp(name, *key) == 0) {
        char *value = g_strstrip(g_strdup(colon + 1));
        if (*value != '\0')
          return value;
        g_free(value);
      }
    }
  return NULL;
}

static gint64
physical_memory(void)
{
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0)
    return (gint64)pages * page_size;

  g_autofree char *text = NULL;
  if (g_file_get_contents("/proc/meminfo", &text, NULL, NULL)) {
    const char *at = strstr(text, "MemTotal:");
    if (at != NULL)
      return (gint64)g_ascii_strtoll(at + strlen("MemTotal:"), NULL, 10) * 1024;
  }
  return 0;
}

static void
add_cpu(GArray *list)
{
  static const char *const keys[] = {"model name", "Hardware", "Model", "cpu model", NULL};
  TdmDeviceInfo info = {0};
  info.kind = TDM_BACKEND_CPU;
  info.index = 0;
  tdm_device_id_name(TDM_DEVICE_CPU, info.id);
  g_autofree char *model = cpuinfo_value(keys);
  if (model == NULL) {
    struct utsname u;
    model = g_strdup_printf("%s processor", uname(&u) == 0 ? u.machine : "unknown");
  }
  /* Firmware pads some model names with runs of spaces. */
  g_auto(GStrv) words = g_strsplit_set(model, " \t", -1);
  GString *name = g_string_new(NULL);
  for (char **w = words; *w != NULL; w++)
    if (**w != '\0')
      g_string_append_printf(name, "%s%s", name->len > 0 ? " " : "", *w);
  g_strlcpy(info.name, name->str, sizeof info.name);
  g_string_free(name, TRUE);
  info.memory_bytes = physical_memory();
  info.cores = (int)g_get_num_processors();
  g_array_append_val(list, info);
}

GArray *
tdm_device_list(void)
{
  GArray *list = g_array_new(FALSE, TRUE, sizeof(TdmDeviceInfo));
  add_gpus(list);
  add_cpu(list);
  return list;
}

TdmDeviceId
tdm_device_info_id(const TdmDeviceInfo *info)
{
  g_return_val_if_fail(info != NULL, TDM_DEVICE_CPU);
  return info->kind == TDM_BACKEND_CUDA ? TDM_DEVICE_GPU(info->index) : TDM_DEVICE_CPU;
}

char *
tdm_device_describe(const TdmDeviceInfo *info)
{
  g_return_val_if_fail(info != NULL, NULL);
  g_autofree char *memory = g_format_size_full((guint64)MAX(info->memory_bytes, 0),
                                               G_FORMAT_SIZE_IEC_UNITS);
  if (info->kind == TDM_BACKEND_CUDA)
    return g_strdup_printf("%-8s %s, %s, compute capability %d.%d, %d multiprocessors, "
                           "PCI %s",
                           info->id, info->name, memory, info->compute_major,
                           info->compute_minor, info->cores,
                           info->pci_bus_id[0] != '\0' ? info->pci_bus_id : "unknown");
  return g_strdup_printf("%-8s %s, %d logical cores, %s RAM", info->id, info->name,
                         info->cores, memory);
}
