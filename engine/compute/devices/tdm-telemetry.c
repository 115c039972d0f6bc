/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-telemetry.c — per-GPU utilization, memory, temperature and power from NVML,
 * sampled on a thread of its own.
 *
 * NVML is opened with dlopen("libnvidia-ml.so.1") and declared here by hand (the few
 * types and functions used), so Tandem builds without NVIDIA's headers and runs
 * where the library is missing. Versioned symbols are tried newest first; a symbol
 * or field that is missing leaves its valid bit unset, and nothing is made up.
 * Samples are indexed by CUDA ordinal, matched to NVML's devices by PCI bus id
 * (the two number GPUs differently). Not the device list (tdm-device.c).
 */
#include "tdm-telemetry.h"
#include "tdm-device.h"
#include "tdm-library.h"

#include <dlfcn.h>
#include <string.h>

/* The slice of nvml.h that Tandem uses, with NVML's own names and layouts. */
typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_TEMPERATURE_GPU 0
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define NVML_MEMORY_V2_VERSION ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef struct {
  nvmlReturn_t (*init) (void);
  nvmlReturn_t (*shutdown) (void);
  const char *(*error_string) (nvmlReturn_t);
  nvmlReturn_t (*get_count) (unsigned int *);
  nvmlReturn_t (*by_index) (unsigned int, nvmlDevice_t *);
  nvmlReturn_t (*by_pci) (const char *, nvmlDevice_t *);
  nvmlReturn_t (*utilization) (nvmlDevice_t, nvmlUtilization_t *);
  nvmlReturn_t (*memory_v2) (nvmlDevice_t, nvmlMemory_v2_t *);
  nvmlReturn_t (*memory) (nvmlDevice_t, nvmlMemory_t *);
  nvmlReturn_t (*temperature) (nvmlDevice_t, int, unsigned int *);
  nvmlReturn_t (*power) (nvmlDevice_t, unsigned int *);
} TdmNvml;

struct _TdmTelemetry {
  void *library;
  TdmNvml nvml;
  gboolean initialized;        /* nvmlInit succeeded: shutdown owed */
  char *why_not;               /* NULL when available */

  int gpus;                    /* CUDA ordinals covered */
  nvmlDevice_t *devices;       /* [gpus], NULL where no NVML device matched */
  guint interval_ms;

  GMutex lock;                 /* samples, stop */
  GCond wake;
  TdmTelemetrySample *samples; /* [gpus] */
  gboolean stop;
  GThread *thread;
};

#define SYMBOL(t, field, ...)                                                          \
  (*(void **)&(t)->nvml.field =                                                        \
       tdm_library_symbol((t)->library, (const char *const[]){__VA_ARGS__, NULL}))

static const char *
nvml_error(TdmTelemetry *t, nvmlReturn_t code)
{
  const char *text = t->nvml.error_string != NULL ? t->nvml.error_string(code) : NULL;
  return text != NULL ? text : "unknown NVML error";
}

static gboolean
load(TdmTelemetry *t)
{
  t->library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (t->library == NULL) {
    const char *why = dlerror();
    t->why_not = g_strdup_printf("NVML (libnvidia-ml.so.1) could not be loaded: %s",
                                 why != NULL ? why : "not found");
    return FALSE;
  }
  SYMBOL(t, init, "nvmlInit_v2", "nvmlInit");
  SYMBOL(t, shutdown, "nvmlShutdown");
  SYMBOL(t, error_string, "nvmlErrorString");
  SYMBOL(t, get_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
  SYMBOL(t, by_index, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
  SYMBOL(t, by_pci, "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId");
  SYMBOL(t, utilization, "nvmlDeviceGetUtilizationRates");
  SYMBOL(t, memory_v2, "nvmlDeviceGetMemoryInfo_v2");
  SYMBOL(t, memory, "nvmlDeviceGetMemoryInfo");
  SYMBOL(t, temperature, "nvmlDeviceGetTemperature");
  SYMBOL(t, power, "nvmlDeviceGetPowerUsage");
  if (t->nvml.init == NULL || t->nvml.shutdown == NULL || t->nvml.by_index == NULL) {
    t->why_not = g_strdup("NVML (libnvidia-ml.so.1) lacks nvmlInit, nvmlShutdown or "
                          "nvmlDeviceGetHandleByIndex");
    return FALSE;
  }
  nvmlReturn_t res = t->nvml.init();
  if (res != NVML_SUCCESS) {
    t->why_not = g_strdup_printf("nvmlInit failed: %s", nvml_error(t, res));
    return FALSE;
  }
  t->initialized = TRUE;
  return TRUE;
}

/* CUDA ordinal i → NVML device, by PCI bus id where CUDA gave one (CUDA puts the
 * fastest GPU first, NVML goes by bus, and CUDA_VISIBLE_DEVICES renumbers). */
static void
map_devices(TdmTelemetry *t)
{
  GArray *list = tdm_device_list();
  int cuda_gpus = 0;
  for (guint i = 0; i < list->len; i++)
    if (g_array_index(list, TdmDeviceInfo, i).kind == TDM_BACKEND_CUDA)
      cuda_gpus++;

  unsigned int nvml_count = 0;
  if (t->nvml.get_count == NULL || t->nvml.get_count(&nvml_count) != NVML_SUCCESS)
    nvml_count = 0;
  /* A build without CUDA still shows NVML's GPUs, in NVML's order. */
  t->gpus = cuda_gpus > 0 ? cuda_gpus : (int)nvml_count;
  t->devices = g_new0(nvmlDevice_t, MAX(t->gpus, 1));
  t->samples = g_new0(TdmTelemetrySample, MAX(t->gpus, 1));

  for (int i = 0; i < t->gpus; i++) {
    nvmlDevice_t device = NULL;
    const TdmDeviceInfo *info = cuda_gpus > 0 ? &g_array_index(list, TdmDeviceInfo, i) : NULL;
    if (info != NULL && info->pci_bus_id[0] != '\0' && t->nvml.by_pci != NULL &&
        t->nvml.by_pci(info->pci_bus_id, &device) == NVML_SUCCESS)
      t->devices[i] = device;
    else if (t->nvml.by_index((unsigned int)i, &device) == NVML_SUCCESS)
      t->devices[i] = device;
  }
  g_array_unref(list);
}

static TdmTelemetrySample
read_sample(TdmTelemetry *t, nvmlDevice_t device)
{
  TdmTelemetrySample s = {0};
  if (device == NULL)
    return s;
  nvmlUtilization_t util;
  if (t->nvml.utilization != NULL && t->nvml.utilization(device, &util) == NVML_SUCCESS) {
    s.valid_utilization = TRUE;
    s.utilization = util.gpu;
  }
  nvmlMemory_v2_t mem2 = {.version = NVML_MEMORY_V2_VERSION};
  nvmlMemory_t mem;
  if (t->nvml.memory_v2 != NULL && t->nvml.memory_v2(device, &mem2) == NVML_SUCCESS) {
    s.valid_memory = TRUE;
    s.memory_used = (gint64)mem2.used;
    s.memory_total = (gint64)mem2.total;
  } else if (t->nvml.memory != NULL && t->nvml.memory(device, &mem) == NVML_SUCCESS) {
    s.valid_memory = TRUE;
    s.memory_used = (gint64)mem.used;
    s.memory_total = (gint64)mem.total;
  }
  unsigned int value;
  if (t->nvml.temperature != NULL &&
      t->nvml.temperature(device, NVML_TEMPERATURE_GPU, &value) == NVML_SUCCESS) {
    s.valid_temperature = TRUE;
    s.temperature = value;
  }
  if (t->nvml.power != NULL && t->nvml.power(device, &value) == NVML_SUCCESS) {
    s.valid_power = TRUE;
    s.power = value / 1000.0;
  }
  return s;
}

static void
sample_all(TdmTelemetry *t)
{
  /* Read outside the lock: NVML calls can take milliseconds, get() must not wait. */
  TdmTelemetrySample *fresh = g_new0(TdmTelemetrySample, MAX(t->gpus, 1));
  for (int i = 0; i < t->gpus; i++)
    fresh[i] = read_sample(t, t->devices[i]);
  g_mutex_lock(&t->lock);
  memcpy(t->samples, fresh, sizeof(TdmTelemetrySample) * (size_t)t->gpus);
  g_mutex_unlock(&t->lock);
  g_free(fresh);
}

static gpointer
sampler(gpointer data)
{
  TdmTelemetry *t = data;
  g_mutex_lock(&t->lock);
  while (!t->stop) {
    gint64 until = g_get_monotonic_time() + (gint64)t->interval_ms * G_TIME_SPAN_MILLISECOND;
    while (!t->stop && g_cond_wait_until(&t->wake, &t->lock, until))
      ;
    if (t->stop)
      break;
    g_mutex_unlock(&t->lock);
    sample_all(t);
    g_mutex_lock(&t->lock);
  }
  g_mutex_unlock(&t->lock);
  return NULL;
}

TdmTelemetry *
tdm_telemetry_new(guint interval_ms)
{
  TdmTelemetry *t = g_new0(TdmTelemetry, 1);
  g_mutex_init(&t->lock);
  g_cond_init(&t->wake);
  t->interval_ms = MAX(interval_ms, 10);
  if (!load(t))
    return t;
  map_devices(t);
  /* One sample now, so the first get() already has figures. */
  sample_all(t);
  t->thread = g_thread_new("tdm-telemetry", sampler, t);
  return t;
}

void
tdm_telemetry_free(TdmTelemetry *t)
{
  if (t == NULL)
    return;
  if (t->thread != NULL) {
    g_mutex_lock(&t->lock);
    t->stop = TRUE;
    g_cond_signal(&t->wake);
    g_mutex_unlock(&t->lock);
    g_thread_join(t->thread);
  }
  if (t->initialized)
    t->nvml.shutdown();
  if (t->library != NULL)
    dlclose(t->library);
  g_free(t->devices);
  g_free(t->samples);
  g_free(t->why_not);
  g_mutex_clear(&t->lock);
  g_cond_clear(&t->wake);
  g_free(t);
}

gboolean
tdm_telemetry_available(TdmTelemetry *t, const char **why_not)
{
  g_return_val_if_fail(t != NULL, FALSE);
  if (why_not != NULL)
    *why_not = t->why_not;
  return t->why_not == NULL;
}

TdmTelemetrySample
tdm_telemetry_get(TdmTelemetry *t, int gpu)
{
  TdmTelemetrySample s = {0};
  g_return_val_if_fail(t != NULL, s);
  if (gpu < 0 || gpu >= t->gpus)
    return s;
  g_mutex_lock(&t->lock);
  s = t->samples[gpu];
  g_mutex_unlock(&t->lock);
  return s;
}
