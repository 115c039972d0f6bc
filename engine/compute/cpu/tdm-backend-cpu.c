/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-backend-cpu.c — the CPU backend: its memory, its table of operations (each
 * family in a file of its own, tdm-backend-cpu-private.h lists them), the choice of
 * the loops built for this CPU's instruction set (tdm-cpu-kernels.c), and its life
 * cycle. It is a real backend (classroom laptops and CI train on it) and the reference
 * the CUDA backend is tested against. It is not multi-threaded itself: one instance
 * belongs to one CPU worker thread, and the trainer decides how many threads OpenBLAS
 * may use. */
#include "tdm-backend-cpu-private.h"
#include "tdm-i18n.h"
#include "tdm-backend-cpu-winograd.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define TDM_CPU_ALIGN 64
#define TDM_CPU_MAGIC G_GUINT64_CONSTANT(0x74646d2d63707521)

/* Kept in the TDM_CPU_ALIGN bytes in front of every allocation, so that free knows
 * the size to take off the counter without a shared table, and can refuse pointers
 * that some other backend handed out. */
typedef struct {
  guint64 magic;
  size_t bytes;
  const TdmBackend *owner;
  gboolean mapped;             /* from mmap, returned with munmap */
} TdmCpuBlock;

/* Blocks from this size on are mapped directly and unmapped when freed. Through
 * malloc they would not be given back: glibc raises its mmap threshold to the size of
 * the largest mapped block freed (up to 32 MiB), so the next run's buffers come from
 * the heaps of the arenas of its new threads, which keep what is freed: the window's
 * memory grew from 163 to 269 MiB over 40 runs (bench-cycles, bench/NOTES.md).
 * AddressSanitizer builds keep malloc, whose redzones catch overflows. */
#if defined(__SANITIZE_ADDRESS__)
#define TDM_CPU_MAP_BYTES ((size_t)-1)
#else
#define TDM_CPU_MAP_BYTES ((size_t)256 << 10)
#endif

G_STATIC_ASSERT(sizeof(TdmCpuBlock) <= TDM_CPU_ALIGN);

/* Memory */

/* Makes a fresh mapping resident and written now: a replica allocates its buffers
 * once, before training, and would otherwise take a fault on each first touch inside
 * the first steps (PyTorch's caching allocator likewise has its blocks resident from
 * its warm-up). In 2 MiB pages where the kernel has them (transparent huge pages, on
 * request): 512 times fewer faults and TLB entries. On a virtual machine that shadows
 * the guest's page tables, a 4 KiB page first written by the program costs a fault in
 * the hypervisor even after MAP_POPULATE (the kernel cleared it through its own
 * mapping): there the first resnet step on cpu:2 took 2.7 CPU-seconds instead of 0.8,
 * and a pass writing 512 MiB ran 3× slower in 4 KiB pages than in 2 MiB ones in every
 * later step too (bench/NOTES.md). Writing the pages (MADV_POPULATE_WRITE, or one store
 * a page where the kernel predates it) fills both tables. */
static void
map_in(void *base, size_t bytes)
{
#ifdef MADV_HUGEPAGE
  madvise(base, bytes, MADV_HUGEPAGE);
#endif
#ifdef MADV_POPULATE_WRITE
  if (madvise(base, bytes, MADV_POPULATE_WRITE) == 0)
    return;
#endif
  const size_t page = 4096;
  volatile char *p = base;
  for (size_t at = 0; at < bytes; at += page)
    p[at] = 0;
}

static void *
cpu_alloc(TdmBackend *b, size_t bytes, GError **error)
{
  void *base = NULL;
  gboolean mapped = bytes >= TDM_CPU_MAP_BYTES;

  /* Objects past PTRDIFF_MAX are not valid C objects; refusing them here also keeps
   * sanitizer allocators from aborting on absurd requests. Mappings are page-aligned,
   * more than TDM_CPU_ALIGN asks. */
  gboolean ok = bytes <= (size_t)PTRDIFF_MAX - TDM_CPU_ALIGN;
  if (ok && mapped) {
    base = mmap(NULL, TDM_CPU_ALIGN + bytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ok = base != MAP_FAILED;
    if (ok)
      map_in(base, TDM_CPU_ALIGN + bytes);
  } else if (ok) {
    ok = posix_memalign(&base, TDM_CPU_ALIGN, TDM_CPU_ALIGN + bytes) == 0;
  }
  if (!ok) {
    char *human = g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
    g_set_error(error, TDM_ENGINE_ERROR, TDM_ENGINE_ERROR_OUT_OF_MEMORY,
                _("%s: out of memory: cannot allocate %zu bytes (%s); %zu bytes in use"),
                b->name, bytes, human, __atomic_load_n(&b->bytes_in_use, __ATOMIC_RELAXED));
    g_free(human);
    return NULL;
  }

  /* TANDEM_CPU_POISON=1 fills every new buffer with NaN bit patterns, so that a pass
   * reading memory nothing wrote shows as NaN on the CPU as it would on a GPU (whose
   * fresh memory holds whatever was there). */
  if (g_getenv("TANDEM_CPU_POISON") != NULL)
    memset((char *)base + TDM_CPU_ALIGN, 0xff, bytes);

  TdmCpuBlock *block = base;
  block->magic = TDM_CPU_MAGIC;
  block->bytes = bytes;
  block->owner = b;
  block->mapped = mapped;

  size_t in_use = __atomic_add_fetch(&b->bytes_in_use, bytes, __ATOMIC_RELAXED);
  size_t peak = __atomic_load_n(&b->bytes_peak, __ATOMIC_RELAXED);
  while (in_use > peak
         && !__atomic_compare_exchange_n(&b->bytes_peak, &peak, in_use, TRUE,
                                         __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ;
  return (char *)base + TDM_CPU_ALIGN;
}

static void
cpu_free(TdmBackend *b, void *ptr)
{
  if (ptr == NULL)
    return;
  TdmCpuBlock *block = (TdmCpuBlock *)((char *)ptr - TDM_CPU_ALIGN);
  if (block->magic != TDM_CPU_MAGIC || block->owner != b) {
    g_critical("%s: free of %p, which this backend did not allocate", b->name, ptr);
    return;
  }
  block->magic = 0;
  __atomic_sub_fetch(&b->bytes_in_use, block->bytes, __ATOMIC_RELAXED);
  if (block->mapped)
    munmap(block, TDM_CPU_ALIGN + block->bytes);
  else
    free(block);
}

static void
cpu_upload(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  memcpy(dst, src, bytes);
}

static void
cpu_download(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  memcpy(dst, src, bytes);
}

static void
cpu_copy(TdmBackend *b, void *dst, const void *src, size_t bytes)
{
  memmove(dst, src, bytes);
}

static void
cpu_zero(TdmBackend *b, void *ptr, size_t bytes)
{
  memset(ptr, 0, bytes);
}

static void
cpu_synchronize(TdmBackend *b)
{
}

/* Life cycle */

const TdmCpuWinogradGemm *
tdm_cpu_winograd_gemm(TdmBackend *b)
{
  return tdm_cpu_kernels_of(b)->winograd;
}

static void
cpu_destroy(TdmBackend *b)
{
  if (b->bytes_in_use != 0)
    g_warning("%s: backend destroyed with %zu bytes still allocated", b->name,
              b->bytes_in_use);
  tdm_cpu_gemm_bf16_scratch_free(((TdmBackendCpu *)b)->gemm_bf16);
  g_free(b->name);
  g_clear_error(&b->error);
  g_mutex_clear(&b->error_lock);
  g_free((TdmBackendCpu *)b);
}

const TdmCpuKernels *
tdm_cpu_kernels_pick(void)
{
  /* The copies this CPU runs, from the plainest to the best. */
  const TdmCpuKernels *runs[3];
  int count = 0;
  runs[count++] = &tdm_cpu_kernels_generic;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    runs[count++] = &tdm_cpu_kernels_avx2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
      runs[count++] = &tdm_cpu_kernels_avx512;
  }
#endif
  const char *wanted = g_getenv("TANDEM_CPU_KERNELS");
  for (int i = 0; wanted != NULL && i < count; i++)
    if (g_str_equal(wanted, runs[i]->name))
      return runs[i];
  return runs[count - 1];
}

static const TdmBackendOps tdm_backend_cpu_ops = {
  .alloc = cpu_alloc,
  .free = cpu_free,
  .upload = cpu_upload,
  .download = cpu_download,
  .copy = cpu_copy,
  .zero = cpu_zero,
  .synchronize = cpu_synchronize,
  .gemm = tdm_cpu_gemm,
  .bias_forward = tdm_cpu_bias_forward,
  .bias_backward = tdm_cpu_bias_backward,
  .relu_forward = tdm_cpu_relu_forward,
  .relu_backward = tdm_cpu_relu_backward,
  .im2col = tdm_cpu_im2col,
  .col2im = tdm_cpu_col2im,
  .conv_forward = tdm_cpu_conv_forward,
  .conv_backward = tdm_cpu_conv_backward,
  .maxpool_forward = tdm_cpu_maxpool_forward,
  .maxpool_backward = tdm_cpu_maxpool_backward,
  .conv_pool_forward = tdm_cpu_conv_pool_forward,
  .conv_pool_backward = tdm_cpu_conv_pool_backward,
  .softmax_xent = tdm_cpu_softmax_xent,
  .gather = tdm_cpu_gather,
  .gather_augment = tdm_cpu_gather_augment,
  .gather_photo = tdm_cpu_gather_photo,
  .bn_moments = tdm_cpu_bn_moments,
  .bn_stats = tdm_cpu_bn_stats,
  .bn_forward = tdm_cpu_bn_forward,
  .bn_forward_eval = tdm_cpu_bn_forward_eval,
  .bn_backward_sums = tdm_cpu_bn_backward_sums,
  .bn_backward_dx = tdm_cpu_bn_backward_dx,
  .bn_backward_dx_bf16 = tdm_cpu_bn_backward_dx_bf16,
  .maxpool2d_forward = tdm_cpu_maxpool2d_forward,
  .maxpool2d_backward = tdm_cpu_maxpool2d_backward,
  .avgpool2d_forward = tdm_cpu_avgpool2d_forward,
  .avgpool2d_backward = tdm_cpu_avgpool2d_backward,
  .channel_affine = tdm_cpu_channel_affine,
  .avgpool_forward = tdm_cpu_avgpool_forward,
  .avgpool_backward = tdm_cpu_avgpool_backward,
  .global_avgpool_forward = tdm_cpu_global_avgpool_forward,
  .global_avgpool_backward = tdm_cpu_global_avgpool_backward,
  .global_maxpool_forward = tdm_cpu_global_maxpool_forward,
  .global_maxpool_backward = tdm_cpu_global_maxpool_backward,
  .dropout_forward = tdm_cpu_dropout_forward,
  .dropout_backward = tdm_cpu_dropout_backward,
  .sgd_update = tdm_cpu_sgd_update,
  .sgd_momentum_update = tdm_cpu_sgd_momentum_update,
  .weight_decay = tdm_cpu_weight_decay,
  .momentum_update = tdm_cpu_momentum_update,
  .adam_update = tdm_cpu_adam_update,
  .clip_norm = tdm_cpu_clip_norm,
  .deviation = tdm_cpu_deviation,
  .add = tdm_cpu_add,
  .scale = tdm_cpu_scale,
  .to_bf16 = tdm_cpu_to_bf16,
  .from_bf16 = tdm_cpu_from_bf16,
  .relu_backward_bf16 = tdm_cpu_relu_backward_bf16,
  .add_out_bf16 = tdm_cpu_add_out_bf16,
  .add_strided_bf16 = tdm_cpu_add_strided_bf16,
  .add_relu_backward_bf16 = tdm_cpu_add_relu_backward_bf16,
  .add_relu_backward_bn_sums_bf16 = tdm_cpu_add_relu_backward_bn_sums_bf16,
  .maxpool_forward_bf16 = tdm_cpu_maxpool_forward_bf16,
  .maxpool2d_forward_bn = tdm_cpu_maxpool2d_forward_bn,
  .maxpool_backward_bf16 = tdm_cpu_maxpool_backward_bf16,
  .bn_forward_bf16 = tdm_cpu_bn_forward_bf16,
  .bn_forward_eval_bf16 = tdm_cpu_bn_forward_eval_bf16,
  .bn_relu_add_bf16 = tdm_cpu_bn_relu_add_bf16,
  .im2col_bf16 = tdm_cpu_im2col_bf16,
  .im2col_bf16_bn = tdm_cpu_im2col_bf16_bn,
  .gemm_bf16 = tdm_cpu_gemm_bf16,
  .gemm_bf16_out = tdm_cpu_gemm_bf16_out,
  .col2im_bf16 = tdm_cpu_col2im_bf16,
  .stem_bn_takes = tdm_cpu_stem_bn_takes,
  .stem_bn_sums = tdm_cpu_stem_bn_sums,
  .stem_bn_dx_wgrad = tdm_cpu_stem_bn_dx_wgrad,
  .graph_begin = NULL,
  .graph_end = NULL,
  .graph_launch = NULL,
  .destroy = cpu_destroy,
};

TdmBackend *
tdm_backend_cpu_new(GError **error)
{
  TdmBackendCpu *cpu = g_new0(TdmBackendCpu, 1);
  TdmBackend *b = &cpu->parent;

  b->ops = &tdm_backend_cpu_ops;
  b->kind = TDM_BACKEND_CPU;
  b->device_index = 0;
  b->name = tdm_device_id_dup_name(TDM_DEVICE_CPU);
  b->precision = TDM_PRECISION_FP32;
  g_mutex_init(&b->error_lock);
#if TDM_CPU_X86
  cpu->have_avx = __builtin_cpu_supports("avx");
#endif
  cpu->kernels = tdm_cpu_kernels_pick();
  /* The one-instruction bf16 products belong to the AVX-512 loops, so that
   * TANDEM_CPU_KERNELS=avx2 or generic also picks the widening products. */
  cpu->bf16_dot = g_str_equal(cpu->kernels->name, "avx512") && tdm_cpu_gemm_bf16_has_dot();
  return b;
}
