/* tdm-backend.h — one table of tensor operations per kind of device.
 *
 * A TdmBackend is one device as the engine computes on it: the CPU (OpenBLAS and plain
 * C loops) or one CUDA GPU (cuBLAS and kernels/ on a stream of its own). Replicas,
 * optimizers and communicators call these operations and know nothing of the device.
 *
 * Conventions shared by every backend:
 * - Pointers are device pointers obtained from tdm_backend_alloc(); float32 row-major.
 * - Activations are NHWC (sample, row, column, channel); a flat feature vector is the
 *   same as H = W = 1. Weights: Linear [out, in], as PyTorch's; Conv2d [out, kh, kw,
 *   in], the order of im2col's columns (each tap a contiguous run of channels), where
 *   PyTorch has [out, in, kh, kw]: checkpoints hold PyTorch's layout, and the trainer
 *   permutes on save and load (tdm_layer_weight_to_torch() in tdm-network.h).
 * - Operations are asynchronous on the device's stream and return nothing. The first
 *   failure is kept in the backend (a sticky error, as CUDA keeps its own) and reported
 *   by tdm_backend_check(); later operations after a failure do nothing.
 * - Gradients are written, not accumulated, unless an operation says otherwise.
 */
#pragma once

#include <glib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

G_BEGIN_DECLS

typedef struct _TdmBackend TdmBackend;

typedef enum {
  TDM_BACKEND_CPU,
  TDM_BACKEND_CUDA,
} TdmBackendKind;

/* The sizes conv_pool_forward and conv_pool_backward take: kh·kw·c taps, out
 * channels. */
#define TDM_CONV_POOL_TAPS 32
#define TDM_CONV_POOL_OUT 256

typedef enum {
  TDM_PRECISION_FP32,   /* full float32 GEMMs (default) */
  TDM_PRECISION_TF32,   /* TensorFloat-32 GEMMs where the device has them */
} TdmPrecision;

/* The fields that every step's loss and accuracy are summed into, on the device. */
typedef struct {
  double loss_sum;      /* sum of per-sample cross-entropy */
  double correct;       /* samples whose arg-max equals the label */
} TdmMetrics;

typedef struct {
  /* Memory. alloc/free go through the device's byte counter. */
  void *(*alloc) (TdmBackend *b, size_t bytes, GError **error);
  void (*free) (TdmBackend *b, void *ptr);
  void (*upload) (TdmBackend *b, void *dst, const void *src, size_t bytes);
  void (*download) (TdmBackend *b, void *dst, const void *src, size_t bytes); /* waits */
  void (*copy) (TdmBackend *b, void *dst, const void *src, size_t bytes);
  void (*zero) (TdmBackend *b, void *ptr, size_t bytes);
  void (*synchronize) (TdmBackend *b);

  /* C[m×n] = alpha · op(A) · op(B) + beta · C, row-major, op = transpose when set. */
  void (*gemm) (TdmBackend *b, bool trans_a, bool trans_b, int m, int n, int k,
                float alpha, const float *a, int lda, const float *bm, int ldb,
                float beta, float *c, int ldc);

  /* y[o, c, i] += bias[c] over outer × channels × inner, then max(y, 0) when relu. */
  void (*bias_forward) (TdmBackend *b, float *y, const float *bias,
                        int outer, int channels, int inner, bool relu);
  /* dbias[c] = Σ over outer and inner of dy[o, c, i]. */
  void (*bias_backward) (TdmBackend *b, float *dbias, const float *dy,
                         int outer, int channels, int inner);
  /* y = max(x, 0); in place allowed. */
  void (*relu_forward) (TdmBackend *b, float *y, const float *x, size_t n);
  /* dx = y > 0 ? dy : 0 where y is the ReLU's output; in place (dx == dy) allowed. */
  void (*relu_backward) (TdmBackend *b, float *dx, const float *dy, const float *y, size_t n);

  /* Convolution by GEMM, stride 1. x is n×h×w×c (NHWC); the output is
   * n×oh×ow where oh = h + 2·pad − kh + 1, ow likewise. col has one row per output
   * pixel (n·oh·ow rows) and kh·kw·c columns ordered (ky, kx, channel), the order of
   * the conv weight's rows, so that out = col · Wᵀ. Padding reads as zero. */
  void (*im2col) (TdmBackend *b, float *col, const float *x,
                  int n, int h, int w, int c, int kh, int kw, int pad);
  /* dx = the sum of col's entries back onto the pixels they were read from. */
  void (*col2im) (TdmBackend *b, float *dx, const float *col,
                  int n, int h, int w, int c, int kh, int kw, int pad);

  /* Max pooling, window = stride = k, floor division: y is n×(h/k)×(w/k)×c.
   * argmax holds, per output, the index into x of the chosen input (the first
   * maximum, windows scanned row by row). When bias is not NULL, y += bias[channel]
   * after the max, then y = max(y, 0) when relu: the bias and ReLU of the conv layer
   * before the pool, which commute with the max (both are monotonic) and so cost a
   * quarter of the passes over the conv's output. */
  void (*maxpool_forward) (TdmBackend *b, float *y, int32_t *argmax, const float *x,
                           const float *bias, bool relu, int n, int h, int w, int c, int k);
  /* dx (n×h×w×c) = dy scattered through argmax, zero elsewhere. When y (the pool's
   * output) is not NULL, only where y > 0: the ReLU folded into maxpool_forward, whose
   * gradient is dy where the chosen input was positive, which is where y is. When
   * dbias is not NULL it receives the folded bias's gradient, dbias[ch] = the sum of
   * dx over every pixel of channel ch. */
  void (*maxpool_backward) (TdmBackend *b, float *dx, float *dbias, const float *dy,
                            const int32_t *argmax, const float *y, int n, int h, int w,
                            int c, int k);

  /* A network's first layer when it is a small convolution followed by a max pool:
   * the conv (stride 1, weights wt [out, kh, kw, c]), its bias, its ReLU when relu,
   * and the pool (window = stride = pk), in one pass. y and argmax are what
   * maxpool_forward with the bias and ReLU folded in would give from the conv's
   * output, n×oh×ow×out, and argmax indexes that output, which is never stored. For
   * kh·kw·c <= TDM_CONV_POOL_TAPS and out <= TDM_CONV_POOL_OUT: with so few taps,
   * im2col and a GEMM would move as many floats as they multiply. */
  void (*conv_pool_forward) (TdmBackend *b, float *y, int32_t *argmax, const float *x,
                             const float *wt, const float *bias, bool relu, int n, int h,
                             int w, int c, int out, int kh, int kw, int pad, int pk);
  /* Its parameter gradients from dy, the gradient of y: dwt and dbias as the conv's
   * weight and bias gradients would be after maxpool_backward (with the ReLU mask
   * when relu). No input gradient: a first layer needs none. */
  void (*conv_pool_backward) (TdmBackend *b, float *dwt, float *dbias, const float *dy,
                              const int32_t *argmax, const float *y, const float *x,
                              bool relu, int n, int h, int w, int c, int out, int kh,
                              int kw, int pad, int pk);

  /* Softmax cross-entropy over rows × classes logits with int32 labels. Adds the
   * rows' loss sum and correct count into *metrics (device memory). When dlogits is
   * not NULL it receives (softmax − onehot) · grad_scale. */
  void (*softmax_xent) (TdmBackend *b, const float *logits, const int32_t *labels,
                        int rows, int classes, float grad_scale,
                        float *dlogits, TdmMetrics *metrics);

  /* x[i, :] = images[indices[i], :] · scale as float; y[i] = labels[indices[i]].
   * images is uint8, sample_size bytes a sample, already in HWC order. */
  void (*gather) (TdmBackend *b, float *x, int32_t *y, const uint8_t *images,
                  const uint8_t *labels, const int32_t *indices, int count,
                  int sample_size, float scale);

  /* Optimizers over the flat parameter buffer; g += weight_decay · p first. */
  void (*sgd_update) (TdmBackend *b, float *p, const float *g, size_t n,
                      float lr, float weight_decay);
  void (*momentum_update) (TdmBackend *b, float *p, const float *g, float *velocity,
                           size_t n, float lr, float momentum, float weight_decay);
  /* Chainer's Adam: m, v moments; p −= lr_t · m / (sqrt(v) + eps), with lr_t the
   * bias-corrected step alpha · sqrt(1 − beta2ᵗ) / (1 − beta1ᵗ) computed by the caller. */
  void (*adam_update) (TdmBackend *b, float *p, const float *g, float *m, float *v,
                       size_t n, float lr_t, float beta1, float beta2, float eps,
                       float weight_decay);

  /* y += x; y *= alpha. For communicators. */
  void (*add) (TdmBackend *b, float *y, const float *x, size_t n);
  void (*scale) (TdmBackend *b, float *y, float alpha, size_t n);

  /* Optional (NULL on the CPU): record the operations issued between begin and end
   * into a graph that launch replays; key tells graphs of different shapes apart. */
  gboolean (*graph_begin) (TdmBackend *b, int key);
  void (*graph_end) (TdmBackend *b, int key);
  gboolean (*graph_launch) (TdmBackend *b, int key);

  void (*destroy) (TdmBackend *b);
} TdmBackendOps;

struct _TdmBackend {
  const TdmBackendOps *ops;
  TdmBackendKind kind;
  int device_index;           /* CUDA ordinal, or 0 for the CPU */
  char *name;                 /* "cpu", "cuda:0" — used in messages */
  TdmPrecision precision;
  size_t bytes_in_use;        /* what Tandem holds on this device, exactly */
  size_t bytes_peak;
  guint64 operations;         /* operations issued (≈ kernels launched), for floors */
  volatile gint *abort_flag;  /* when set and non-zero, long CPU operations stop early */
  GError *error;              /* the first failure, sticky */
  GMutex error_lock;
};

/* Creates the backend for one device: "cpu" or "cuda:N". Several backends may share
 * one GPU (each has its own stream). */
TdmBackend *tdm_backend_new (const char *device, TdmPrecision precision, GError **error);
void tdm_backend_free (TdmBackend *b);

/* Backend constructors; the CUDA one exists only in builds with CUDA. */
TdmBackend *tdm_backend_cpu_new (GError **error);
TdmBackend *tdm_backend_cuda_new (int ordinal, TdmPrecision precision, GError **error);
size_t tdm_backend_cuda_own_bytes (int ordinal);
gboolean tdm_backend_cuda_available (void);

/* Bytes a backend for `device` ("cpu", "cuda:N") allocates for itself when created, on
 * its byte counter: cuBLAS's workspace and scratch on a GPU, nothing on the CPU. For
 * the memory estimate (tdm-memory.h); 0 for devices this build cannot open. */
size_t tdm_backend_own_bytes (const char *device);

/* Convenience wrappers that read like calls. */
void *tdm_backend_alloc (TdmBackend *b, size_t bytes, GError **error);
void tdm_backend_release (TdmBackend *b, void *ptr);

/* Records a failure (first one wins) from any backend code. printf-style message. */
void tdm_backend_fail (TdmBackend *b, int code, const char *format, ...) G_GNUC_PRINTF (3, 4);
/* Waits for the device, then returns FALSE with the sticky error if one occurred. */
gboolean tdm_backend_check (TdmBackend *b, GError **error);
/* The same without waiting: errors of work still queued show up at a later check.
 * For hot loops, where waiting every step would stall the device's queue. */
gboolean tdm_backend_check_queued (TdmBackend *b, GError **error);
gboolean tdm_backend_failed (TdmBackend *b);

/* Shape checks every backend makes before a GEMM or a convolution's operations; a
 * bad shape becomes the sticky error (naming the operation) and FALSE. */
gboolean tdm_backend_check_gemm (TdmBackend *b, bool trans_a, bool trans_b, int m, int n,
                                 int k, int lda, int ldb, int ldc);
gboolean tdm_backend_check_conv (TdmBackend *b, const char *op, int n, int h, int w, int c,
                                 int kh, int kw, int pad);
gboolean tdm_backend_check_conv_pool (TdmBackend *b, const char *op, int n, int h, int w,
                                      int c, int out, int kh, int kw, int pad, int pk);

G_END_DECLS
