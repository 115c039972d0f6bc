/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-replica.h — one copy of the network on one device, and its training step.
 *
 * A replica owns its parameters and gradients (one flat buffer each, laid out as the
 * TdmNetwork says), what the backward pass reads of the forward for up to `capacity`
 * samples, one scratch workspace sized by the largest single layer (its columns or a
 * whole convolution's scratch), the few buffers the inference pass rotates through for up to
 * `eval_capacity` samples, and a copy of the dataset resident on its device as uint8
 * (on the CPU, the caller's own: tdm_replica_shares_datasets()). It computes forward and backward passes
 * for a shard of a batch; it does not communicate and does not update parameters
 * (tdm-communicator.h and tdm-optimizer.h do).
 */
#pragma once

#include <glib.h>
#include "tdm-backend.h"
#include "tdm-dataset.h"
#include "tdm-network.h"

G_BEGIN_DECLS

typedef struct _TdmReplica TdmReplica;

/* Called during backward when the gradients in [offset, offset + count) are final,
 * from the last layer to the first, so their all-reduce can start early. */
typedef void (*TdmGradsReady) (TdmReplica *replica, size_t offset, size_t count,
                               gpointer user_data);

/* Synchronized batch normalization: buffer[0, count) (device memory) ← its sum over
 * every replica, done before the call returns as far as this replica's later
 * operations can tell. Called in the same order on every replica (forward: twice per
 * BN, backward: once). FALSE when the collective failed; the step then stops. */
typedef gboolean (*TdmBnReduce) (TdmReplica *replica, float *buffer, size_t count,
                                 gpointer user_data);

/* Called between a training step's forward and backward passes (the trainer times
 * the two apart on sampled steps). Like grads_ready, it rules out graph replay. */
typedef void (*TdmForwardDone) (TdmReplica *replica, gpointer user_data);

/* Called at the end of a training step's body, after backward: the trainer's update
 * (clipping, the optimizer) issued there joins the step's graph. It may issue device
 * operations only: no upload, download or synchronize, which a graph cannot hold. */
typedef void (*TdmStepTail) (TdmReplica *replica, gpointer user_data);

/* How a replica's training steps ran: eagerly (each operation issued from the host),
 * captured into a graph and launched, or a graph replayed. */
typedef struct {
  guint64 eager, captured, replayed;
} TdmStepCounts;

struct _TdmReplica {
  TdmBackend *backend;          /* not owned */
  const TdmNetwork *net;        /* not owned */
  int capacity;                 /* samples per step at most */
  int eval_capacity;            /* samples per evaluation or prediction chunk at most */
  float *params;                /* device: parameter_count floats */
  float *grads;                 /* device: parameter_count floats */
  float *state;                 /* device: state_count floats (BN running statistics) */
  TdmMetrics *metrics;          /* device: summed loss and correct count */

  /* What a step draws and how it normalizes; the trainer sets these. */
  guint64 seed;                 /* augmentation and dropout streams */
  guint32 epoch;                /* the epoch the step's samples belong to */
  int augment_pad;              /* random crop: shift up to this many pixels */
  TdmFlip augment_flip;         /* NEVER or RANDOM in training */
  gboolean photo;               /* training batches through gather_photo instead, with
                                 * photo_augment (its flip is augment_flip; its erasing
                                 * fill follows input_affine) */
  TdmPhotoAugment photo_augment;
  gboolean test_flip;           /* evaluation averages the logits of x and its mirror */
  int test_shift;               /* and of x shifted this many pixels up, down, left and
                                 * right (zero-filled), each mirrored too with
                                 * test_flip; 0: no translations */
  float smoothing;              /* label smoothing of the training loss */
  const uint8_t *frozen;        /* [layer_count] or NULL: frozen layers' BN runs with its
                                 * running statistics, in training too */
  int backward_stop;            /* backward computes layers [backward_stop, end) only:
                                 * the ones below are frozen (0: all) */
  gboolean normalize;           /* inputs go through input_affine after every gather */
  TdmChannelAffine input_affine;/* per channel: (x / 255 − mean) / std as x · mul + add */
  int global_count;             /* samples of the whole batch over every replica (sync
                                 * BN's row count); 0: this step's count */
  TdmBnReduce bn_reduce;        /* synchronized BN when set (tdm_replica_sync_bn) */
  gpointer bn_reduce_data;
  int bn_slot, bn_slot_count;   /* synchronized BN: this replica's statistics slot, of
                                 * how many (every replica's, tdm-bn-moments.h) */

  /* private */
  float **acts;                 /* [layer_count + 1]: input, then each layer's output
                                 * (none for a first conv run with its pool as one) */
  void **argmax;                /* [layer_count]: max and global max pools, elements of
                                 * TdmLayerBuffers.argmax_size */
  float **cols;                 /* [layer_count]: im2col columns of convs, projections:
                                 * the one column workspace (`columns`), or NULL */
  float **conv_work;            /* [layer_count]: the scratch of convs the backend runs
                                 * whole (conv_forward): the one `conv_scratch`, or NULL */
  float *columns;               /* the one workspace: the largest layer's columns at the
                                 * larger of the two capacities, or the largest whole
                                 * convolution's scratch if more; backward builds a
                                 * conv's columns again instead of keeping them */
  float *conv_scratch;          /* the same buffer, as a whole convolution's scratch */
  size_t columns_bytes;         /* its size, for the backend's convolution engine */
  size_t columns_needed;        /* the most of it any convolution needed so far */
  size_t columns_limit;         /* its upper bound (the plan's), which the convolution
                                 * engine's choices keep within */
  size_t columns_bound;         /* the most bytes of columns a chunk of samples holds
                                 * where the replica composes a conv itself
                                 * (tdm_conv_columns_bound() of its backend's kind
                                 * and precision) */
  float **infer_acts;           /* [layer_count + 1]: the inference pass's acts, each one
                                 * of the rotating `infer` buffers (tdm-replica-infer.c) */
  void **infer_argmax;          /* [layer_count]: the inference pass's argmax scratch */
  float **infer_proj_conv, **infer_proj_bn; /* [layer_count]: its projections' outputs */
  float **infer;                /* [infer_count]: eval_capacity × the widest activation */
  int infer_count;              /* 2 + the deepest nesting of residual blocks */
  void *infer_pool;             /* the argmax of the widest max pool, eval_capacity */
  gboolean inferring;           /* the inference buffers are in place (infer_begin) */
  float **bn_work;              /* [layer_count]: bn and projections: the backward's
                                 * sums (2·C), mean and invstd (2·C), one statistics
                                 * slot (TDM_BN_SLOT_FLOATS) */
  float *bn_slots;              /* synchronized BN: bn_slot_count slots for the widest
                                 * BN, shared by the layers in turn */
  float **proj_conv, **proj_bn; /* [layer_count]: a projection's conv and bn outputs (the
                                 * latter grad_b in training) */
  float **skip_grad;            /* [layer_count]: RES_END: the gradient of the skip path,
                                 * in its nesting level's buffer of skip_levels (skip_low
                                 * before window_split), of the type and count
                                 * tdm_replica_layer_buffers() says */
  size_t *skip_grad_bytes;      /* [layer_count]: RES_END: the bytes of the buffer from
                                 * skip_grad on (a projection's compact input gradient
                                 * may lie past its start: projection_share()) */
  float **skip_levels;          /* one skip-gradient buffer per level of nesting (the
                                 * high window's, TdmGradientWindows) */
  float *skip_low;              /* the low window's, in the arena (NULL: none) */
  uint32_t **relu_bits;         /* [layer_count]: a block's end: its ReLU's mask as bits,
                                 * where TdmLayerBuffers.relu_bits says (the training's
                                 * forward writes it, the backward reads it) */
  float *tta_logits;            /* test-time flip averaging */
  void *arena;                  /* the activation arena: every buffer above from acts to
                                 * tta_logits lives in it (tdm-replica-private.h) */
  size_t arena_bytes;           /* its size */
  gboolean start_sums;          /* a block's start makes the sums of the bn below it
                                 * (tdm_replica_start_sums(), decided when made) */
  gboolean stem_bn;             /* the stem's conv and its bn go back in two passes where
                                 * the backend takes them (tdm_replica_stem_bn(), decided
                                 * when made) */
  guint64 stem_bn_runs;         /* backward walks that took those two passes (a replayed
                                 * step graph repeats them uncounted): for tests */
  const char *stem_way;         /* the stem's way back as last logged (NULL: not yet) */
  gboolean stores_bf16;         /* activations stored as bf16 where their readers take
                                 * it (tdm_replica_stores_bf16(), decided when made) */
  size_t bn_store;              /* bytes a sample at most of a bn's bf16 output stored
                                 * for the conv after it (tdm_replica_bn_store(), decided
                                 * when made) */
  uint16_t *params16;           /* --precision bf16: the parameters as bf16, rounded
                                 * once per forward pass for every conv's products
                                 * (NULL without bf16) */
  gboolean reduce_failed;
  float *grad_a, *grad_b;       /* ping-pong buffers for activation gradients: the two
                                 * halves of one region, a write wider than a half at
                                 * grad_a while nothing else lives there; the region of
                                 * the window the layer at hand uses
                                 * (tdm_replica_use_window()) */
  size_t grad_half_bytes;       /* bytes of each half */
  int window_split;             /* the layers before it use the low window
                                 * (TdmGradientWindows.split) */
  float *grad_high, *grad_low;  /* the windows' regions: the high one apart, the low one
                                 * in the arena (NULL: none) */
  size_t half_high, half_low;   /* their halves' bytes */
  int32_t *labels;              /* device: the shard's labels */
  int32_t *indices;             /* device: the shard's sample indices */
  uint8_t *train_images, *train_labels;   /* device copies of the datasets (on the CPU,
                                           * the caller's datasets themselves) */
  uint8_t *test_images, *test_labels;
  int sample_size;
  TdmGradsReady grads_ready;
  gpointer grads_ready_data;
  TdmForwardDone forward_done;
  gpointer forward_done_data;
  TdmStepTail step_tail;        /* the step's last part, in its graph where it has one */
  gpointer step_tail_data;
  volatile gint *abort_flag;    /* checked between layers on slow backends */
  int ops_per_step;             /* backend operations of one step's body (graph or not) */
  TdmStepCounts steps;
  int step_graph_ops;           /* operations the last step ran from a graph (0: eager) */
  int step_captured_ops;        /* operations the last step issued into a new graph */
  GHashTable *graph_ops;        /* graph key → operations it holds */
  GHashTable *shapes_met;       /* step sizes that have run eagerly once */
  gboolean capturing;           /* a step's body is being captured */
  gboolean capture_spoiled;     /* ... and wanted a larger workspace meanwhile */
};

/* Allocates everything on the backend's device and uploads both datasets. Fails with
 * TDM_ENGINE_ERROR_OUT_OF_MEMORY naming the device and the bytes needed. Evaluation
 * chunks of up to `capacity` samples too. */
TdmReplica *tdm_replica_new (TdmBackend *backend, const TdmNetwork *net, int capacity,
                             const TdmDataset *train, const TdmDataset *test,
                             GError **error);
/* The same with evaluation and prediction chunks of up to eval_capacity samples
 * (tdm_replica_eval_capacity() chooses one that fits). */
TdmReplica *tdm_replica_new_sized (TdmBackend *backend, const TdmNetwork *net, int capacity,
                                   int eval_capacity, const TdmDataset *train,
                                   const TdmDataset *test, GError **error);
/* The same with a column workspace of `columns_bytes` instead of the plan's upper bound
 * (0: the upper bound): what an earlier run of the same configuration needed after its
 * convolutions were chosen (tdm_replica_fit_workspace()), or TDM_REPLICA_WORKSPACE_START
 * for a first run whose pre-warm sizes it. A convolution that needs more grows it. */
#define TDM_REPLICA_WORKSPACE_START ((size_t)1 << 20)
TdmReplica *tdm_replica_new_planned (TdmBackend *backend, const TdmNetwork *net,
                                     int capacity, int eval_capacity, size_t columns_bytes,
                                     const TdmDataset *train, const TdmDataset *test,
                                     GError **error);

/* After the convolution engine has chosen a way for every convolution the replica
 * runs (the pre-warm meets each shape once), the column workspace shrinks to the most
 * that the chosen ways need (cuDNN's plans their workspace, im2col its columns, our own
 * kernels none; TdmConvArgs.work_needed), where that is less. Nothing happens on a
 * backend without a convolution engine (the CPU), whose columns are always used, or
 * before any convolution ran. FALSE with the device's error when the new buffer cannot
 * be had. Captured step graphs are dropped with the old buffer (the backend's rule). */
gboolean tdm_replica_fit_workspace (TdmReplica *replica, GError **error);

/* A replica's buffers on its device, in bytes, by kind, datasets aside: the one rule
 * that tdm_replica_new_sized() allocates by and the memory estimate (tdm-memory.h)
 * reports. */
typedef struct {
  size_t parameters;   /* parameters, BN state, the bf16 copy of the parameters */
  size_t gradients;
  size_t activations;  /* training: the input and what backward reads of each layer */
  size_t workspace;    /* the one workspace (columns or a convolution's scratch), BN's
                        * small buffers, skip gradients, the two gradient buffers,
                        * labels, indices, metrics */
  size_t inference;    /* the inference pass's rotating buffers, its pools' argmax and
                        * the test-time views' logits */
  size_t columns;      /* of workspace: the column workspace alone, at its upper bound
                        * (the widest layer's columns at the larger capacity; in chunks on
                        * a GPU: tdm-replica-plan.c's tdm_replica_column_workspace()) */
} TdmReplicaPlan;
TdmReplicaPlan tdm_replica_plan (const TdmNetwork *net, TdmBackendKind kind,
                                 TdmPrecision precision, int capacity, int eval_capacity);
/* A plan's bytes, all its kinds together (columns are of the workspace): the replica's
 * part of the memory estimate's total (tdm-memory.h), datasets aside. */
size_t tdm_replica_plan_total (const TdmReplicaPlan *plan);

/* The evaluation chunk for a replica training `capacity` samples a step: at most
 * `wanted` (the configured --eval-batch, or the test set if smaller), and no larger
 * than lets the inference pass's buffers, with what they widen the column workspace
 * by, stay within what training keeps for backward (its activations), or
 * TDM_EVAL_BUDGET_FLOOR bytes when that is more, and widens the column workspace by
 * no more than that floor: a GPU training a large batch evaluates in chunks about its
 * shard, a CPU at batch 8 in a few dozen samples (the same throughput there), and
 * evaluation never holds more than training does. Where columns are built in chunks
 * (a GPU, tdm-conv-columns.h) no larger than the training's shard, unless the chunk's
 * inference buffers take no more than the floor. At least 1. */
#define TDM_EVAL_BUDGET_FLOOR ((size_t)64 << 20)
int tdm_replica_eval_capacity (const TdmNetwork *net, TdmBackendKind kind,
                               TdmPrecision precision, int capacity, int wanted);
void tdm_replica_free (TdmReplica *replica);

/* Whether a replica on a backend of this kind reads the caller's datasets where they
 * are (a CPU's memory is the host's: a copy per CPU worker would only double it)
 * instead of keeping a copy on its device. The datasets must then outlive it. */
gboolean tdm_replica_shares_datasets (TdmBackendKind kind);

/* Whether a bf16 run stores the activations it can as bf16 (tdm_replica_layer_buffers()):
 * yes, unless the environment says TANDEM_BF16_ACTIVATIONS=0 (benchmarks and tests of
 * the float32 storage). Read when a replica is made or a plan computed, never by the
 * passes: set it before the replicas are made. */
gboolean tdm_replica_bf16_activations (void);
/* Whether a replica makes a bn's backward sums in the pass of the block start above it
 * (add_relu_backward_bn_sums_bf16, the same bits): yes where its backend has the op,
 * unless the environment says TANDEM_START_SUMS=0 (tests and benchmarks of the two
 * passes). Read when a replica is made, never by the passes. */
gboolean tdm_replica_start_sums (void);
/* Whether a replica takes the stem's conv and its bn back in two passes
 * (tdm_backend_stem_bn_sums(), tdm_backend_stem_bn_dx_wgrad(): the stem's output made
 * again as they go) where the stem keeps no output (a bf16 run's CIFAR stem) and its
 * backend takes the shape (the CUDA backend, until its kernels have run on a GPU, only with
 * TANDEM_STEM_BN=1): yes, unless the environment says TANDEM_STEM_BN=0 (tests and
 * A/B benchmarks of the four steps they replace: the stem's forward again, the bn's sums,
 * its input gradient, the conv's weight gradient). Read when a replica is made, never by
 * the passes. */
gboolean tdm_replica_stem_bn (void);
/* Which bn outputs that the conv after it could normalize as it reads them (a bn
 * prologue) a replica of net on a backend of this kind, in this precision, training
 * `capacity` samples a step stores instead, as bf16, for that conv to read as a stored
 * input both ways (no normalized copies in its forward and weight gradient, at the cost
 * of the buffers): those of at most the returned bytes a sample. The environment says,
 * TANDEM_BN_STORE: 0 none (0), `all` every one (G_MAXSIZE), a number N those whose
 * output at `capacity` samples takes at most N MiB; unset, the largest of those outputs'
 * sizes a sample whose stored outputs grow the training's plan (tdm_replica_plan() with
 * no evaluation chunk, its tdm_replica_plan_total()) by at most 1/TDM_BN_STORE_GROWTH of
 * its total with none stored, or 0 where none does (0 at once where nothing can be
 * stored: a float32 run, no bf16 storage); anything else is warned about once and read
 * as unset. Read when a replica is made or a plan computed, never by the passes.
 * A quarter: storing every one grows the benchmark's ResNets' plans by 18–24 % and ran
 * them 1–3.6 % faster on an H100, under PyTorch eager's peak (bench/NOTES.md, twentieth
 * session); a network whose plan would grow more keeps the rest as copies. */
#define TDM_BN_STORE_GROWTH 4
size_t tdm_replica_bn_store (const TdmNetwork *net, TdmBackendKind kind,
                             TdmPrecision precision, int capacity);
/* Whether tdm_replica_bn_store() follows its automatic rule (TANDEM_BN_STORE unset or
 * malformed): then a replica the device has no room for with the stored outputs is made
 * without them (tdm_replica_new_planned()). */
gboolean tdm_replica_bn_store_automatic (void);
/* Whether a replica made now on a backend of this kind, in this precision, stores
 * activations as bf16: a bf16 run on a kind whose operations read and write them so
 * (tdm_backend_kind_has_bn_bf16_input(), tdm_backend_kind_has_bf16_blocks()), unless
 * tdm_replica_bf16_activations() says no. A replica keeps the answer it was made with
 * (its field stores_bf16), and its plan is computed with the same. */
gboolean tdm_replica_stores_bf16 (TdmBackendKind kind, TdmPrecision precision);

/* Bytes of the parameters' bfloat16 copy a replica keeps (params16, rounded once per
 * forward pass for its convolutions): under --precision bf16 on any backend (the
 * weights then need no room in a conv's columns, so whether a conv takes bf16 columns
 * does not depend on the batch: tdm-replica-private.h's bn_output_to_conv()), else 0. */
size_t tdm_replica_params16_bytes (const TdmNetwork *net, TdmBackendKind kind,
                                   TdmPrecision precision);

/* The buffers a replica keeps for layer i, in elements: per sample (times the
 * replica's capacity) unless said otherwise. tdm_replica_new() allocates exactly these,
 * and the memory estimate (tdm-memory.h) sums them: a new layer's buffers are one
 * case here. */
typedef struct {
  size_t output;        /* elements of output_type: the layer's output, kept for backward */
  TdmDtype output_type; /* float32, or bf16 in a run that stores activations so
                         * (tdm_replica_stores_bf16()): a conv's output that only the bn
                         * after it reads, a residual block's input and output where
                         * their readers take bf16: half the bytes. A bn that ends a
                         * residual block keeps no output: the block's end computes it
                         * as it adds */
  size_t argmax;      /* elements of argmax_size bytes: a max pool's chosen inputs */
  size_t argmax_size; /* a byte where a pool's window has ≤ 256 positions (maxpool2d's
                       * index within the window), else int32 (tdm-backend.h) */
  size_t columns;     /* floats: a convolution's im2col columns, built in the one column
                       * workspace (the largest layer's, not a sum) */
  size_t bn_work;     /* floats, not per sample: a BN's batch statistics and sums */
  size_t skip;        /* elements of skip_type: a residual block's skip gradient, in one
                       * buffer per level of nesting (the level's largest in bytes) */
  TdmDtype skip_type; /* bf16 where the block's gradients are kept so in a run that
                       * stores activations as bf16: its output gradient itself; a
                       * projection's then float32, only the pixels its stride reads */
  size_t projection;  /* elements of projection_type: a projection's conv output, kept
                       * (its BN's output needs no buffer: the forward writes it into
                       * the second gradient buffer for the block's add) */
  TdmDtype projection_type; /* the conv output's: bf16 where output_type would be */
  size_t conv_work;   /* floats, not per sample: the scratch of a convolution that a
                       * backend of this kind runs whole (tdm_backend_conv_work_floats()),
                       * which then has no columns; one scratch, the largest layer's */
  size_t relu_bits;   /* elements of a bit, in whole 32-bit words for the capacity: a
                       * residual block's end whose ReLU's output is stored as bf16, that
                       * ReLU's mask for backward (tdm-relu-bits.h) */
} TdmLayerBuffers;

/* The buffers depend on the kind of backend: one that runs a convolution whole needs
 * its scratch and no columns for it; and on the precision: a bf16 run composes every
 * convolution from columns. */
TdmLayerBuffers tdm_replica_layer_buffers (const TdmNetwork *net, int i, TdmBackendKind kind,
                                           TdmPrecision precision);

/* Per sample, in bytes, each of the two buffers backward passes gradients through:
 * the largest gradient it writes, as written (bf16 where a bf16 run's reader takes it;
 * not max_activation: a fused first conv's output has no gradient), or the largest
 * float32 scratch the passes keep there, whichever is more. */
size_t tdm_replica_gradient_bytes (const TdmNetwork *net, TdmBackendKind kind,
                                   TdmPrecision precision);

/* Forward and backward over the training samples `indices[0, count)` (host memory),
 * writing gradients of (sum of losses) · grad_scale into replica->grads and adding
 * the loss and correct count into replica->metrics, then step_tail where set. Uses a
 * captured graph on devices that have them: a step size's first step runs eagerly
 * (the convolution engine meets its shapes and the workspace grows to what they need,
 * which allocates), the next captures, later ones replay (replica->steps counts
 * them). */
void tdm_replica_train_step (TdmReplica *replica, const int32_t *indices, int count,
                             float grad_scale);

/* Forward only over test samples [first, first + count), adding into metrics (BN with
 * running statistics, no dropout), and the logits scored left in
 * tdm_replica_outputs(): with test_flip and test_shift, the mean of the logits of
 * every view of each image (tdm_replica_test_views() of them: the image, its mirror,
 * its four shifted copies and theirs). Translations are built on the host from the
 * gathered batch (two host copies of it while the chunk is evaluated). */
void tdm_replica_evaluate (TdmReplica *replica, int first, int count);
/* The same over training samples samples[0, count) (a held-out validation split:
 * evaluated as test samples are, never trained on). */
void tdm_replica_evaluate_train (TdmReplica *replica, const int32_t *samples, int count);

/* How many views of each test image the evaluation averages: 1, 2 (flip), 5
 * (shifts) or 10 (both). */
int tdm_replica_test_views (const TdmReplica *replica);

/* The training-mode loss (batch statistics, dropout, augmentation and smoothing as in
 * a step) over training samples indices[0, count), added into metrics, with no
 * backward pass and the running statistics left alone: for gradient checks. */
void tdm_replica_train_loss (TdmReplica *replica, const int32_t *indices, int count);

/* Synchronized BN: the hook that all-reduces (sums) BN's small buffers over every
 * replica, and this replica's place among them: each BN forward writes its
 * statistics into slot `slot` of slot_count and all-reduces them once. Allocates the
 * slots (a few kB); FALSE with error when that fails. */
gboolean tdm_replica_sync_bn (TdmReplica *replica, TdmBnReduce reduce, gpointer data,
                              int slot, int slot_count, GError **error);

/* A step's collectives without samples: a replica whose shard is empty still takes
 * part in synchronized BN's all-reduces (with zeros), then zeroes its gradients. */
void tdm_replica_train_idle (TdmReplica *replica);

/* Forward only over test samples [first, first + count), copying the network's
 * outputs (count × classes logits) to host memory; metrics are left alone. */
void tdm_replica_predict (TdmReplica *replica, int first, int count, float *logits);

/* The network's outputs (logits, samples × classes, device memory) of the last
 * evaluation or prediction: the predictions for its samples. */
const float *tdm_replica_outputs (const TdmReplica *replica);

/* Reads and clears the metrics (waits for the device). */
TdmMetrics tdm_replica_take_metrics (TdmReplica *replica);

G_END_DECLS
