/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-cudnn.h — cuDNN 9, loaded at run time: dlopen("libcudnn.so.9") and the handful of
 * its types, constants and functions that the convolution engine uses, declared here by
 * hand with cuDNN's own names and values (cudnn_graph.h), so Tandem builds without
 * cudnn.h and runs, trains and passes its tests where the library is missing. The
 * library loads its sublibraries (graph, engines, heuristics) itself.
 *
 * TANDEM_CUDNN=0 in the environment hides it (the run then behaves as on a machine
 * without it); TANDEM_CUDNN_LIBRARY names another file to open. Only the loader: the
 * graphs built from it are tdm-backend-cuda-conv-cudnn.c's.
 */
#pragma once

#include <cuda_runtime_api.h>
#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef int cudnnStatus_t;
#define CUDNN_STATUS_SUCCESS 0
/* A status's category (cuDNN 9 numbers sub-codes within each thousand): bad parameters
 * and not supported are a refusal, the others a failure. */
#define CUDNN_STATUS_BAD_PARAM 2000
#define CUDNN_STATUS_NOT_SUPPORTED 3000
#define CUDNN_STATUS_CATEGORY(full_error_code) ((full_error_code) / 1000 * 1000)
typedef struct cudnnContext *cudnnHandle_t;
typedef void *cudnnBackendDescriptor_t;

/* cudnnDataType_t */
#define CUDNN_DATA_FLOAT 0
#define CUDNN_DATA_BFLOAT16 9
#define CUDNN_DATA_INT64 10

/* cudnnConvolutionMode_t: CROSS_CORRELATION is what deep-learning frameworks call a
 * convolution (no flip of the filter). */
#define CUDNN_CROSS_CORRELATION 1

/* cudnnPointwiseMode_t: the per-element operations a fused graph applies (x · scale,
 * + shift, max(·, 0)). */
#define CUDNN_POINTWISE_ADD 0
#define CUDNN_POINTWISE_MUL 1
#define CUDNN_POINTWISE_RELU_FWD 100

/* cudnnBackendDescriptorType_t */
#define CUDNN_BACKEND_POINTWISE_DESCRIPTOR 0
#define CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR 1
#define CUDNN_BACKEND_ENGINE_DESCRIPTOR 2
#define CUDNN_BACKEND_ENGINECFG_DESCRIPTOR 3
#define CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR 4
#define CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR 5
#define CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR 7
#define CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR 8
#define CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR 10
#define CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR 11
#define CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR 12
#define CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR 13
#define CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR 15
#define CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR 16
#define CUDNN_BACKEND_TENSOR_DESCRIPTOR 17

/* cudnnBackendAttributeType_t */
#define CUDNN_TYPE_HANDLE 0
#define CUDNN_TYPE_DATA_TYPE 1
#define CUDNN_TYPE_BOOLEAN 2
#define CUDNN_TYPE_INT64 3
#define CUDNN_TYPE_FLOAT 4
#define CUDNN_TYPE_DOUBLE 5
#define CUDNN_TYPE_VOID_PTR 6
#define CUDNN_TYPE_CONVOLUTION_MODE 7
#define CUDNN_TYPE_HEUR_MODE 8
#define CUDNN_TYPE_KNOB_TYPE 9
#define CUDNN_TYPE_NUMERICAL_NOTE 11
#define CUDNN_TYPE_POINTWISE_MODE 14
#define CUDNN_TYPE_BACKEND_DESCRIPTOR 15
#define CUDNN_TYPE_BEHAVIOR_NOTE 19

/* cudnnBackendAttributeName_t */
#define CUDNN_ATTR_POINTWISE_MODE 0
#define CUDNN_ATTR_POINTWISE_MATH_PREC 1
#define CUDNN_ATTR_CONVOLUTION_COMP_TYPE 100
#define CUDNN_ATTR_CONVOLUTION_CONV_MODE 101
#define CUDNN_ATTR_CONVOLUTION_DILATIONS 102
#define CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES 103
#define CUDNN_ATTR_CONVOLUTION_POST_PADDINGS 104
#define CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS 105
#define CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS 106
#define CUDNN_ATTR_ENGINEHEUR_MODE 200
#define CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH 201
#define CUDNN_ATTR_ENGINEHEUR_RESULTS 202
#define CUDNN_ATTR_ENGINECFG_ENGINE 300
#define CUDNN_ATTR_ENGINECFG_KNOB_CHOICES 302
#define CUDNN_ATTR_EXECUTION_PLAN_HANDLE 400
#define CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG 401
#define CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE 402
#define CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE 600
#define CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE 601
#define CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA 700
#define CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA 701
#define CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC 702
#define CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W 703
#define CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X 704
#define CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y 705
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA 706
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA 707
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC 708
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W 709
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX 710
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY 711
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA 712
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA 713
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC 714
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW 715
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X 716
#define CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY 717
#define CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR 750
#define CUDNN_ATTR_OPERATION_POINTWISE_XDESC 751
#define CUDNN_ATTR_OPERATION_POINTWISE_BDESC 752
#define CUDNN_ATTR_OPERATION_POINTWISE_YDESC 753
#define CUDNN_ATTR_OPERATIONGRAPH_HANDLE 800
#define CUDNN_ATTR_OPERATIONGRAPH_OPS 801
#define CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT 900
#define CUDNN_ATTR_TENSOR_DATA_TYPE 901
#define CUDNN_ATTR_TENSOR_DIMENSIONS 902
#define CUDNN_ATTR_TENSOR_STRIDES 903
#define CUDNN_ATTR_TENSOR_UNIQUE_ID 906
#define CUDNN_ATTR_TENSOR_IS_VIRTUAL 907
#define CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS 1000
#define CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS 1001
#define CUDNN_ATTR_VARIANT_PACK_WORKSPACE 1003
#define CUDNN_ATTR_KNOB_INFO_TYPE 1200
#define CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE 1201
#define CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE 1202
#define CUDNN_ATTR_KNOB_INFO_STRIDE 1203
#define CUDNN_ATTR_ENGINE_OPERATION_GRAPH 1300
#define CUDNN_ATTR_ENGINE_GLOBAL_INDEX 1301
#define CUDNN_ATTR_ENGINE_KNOB_INFO 1302
#define CUDNN_ATTR_ENGINE_NUMERICAL_NOTE 1303
#define CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE 1305

/* cudnnBackendHeurMode_t */
#define CUDNN_HEUR_MODE_INSTANT 0
#define CUDNN_HEUR_MODE_B 1
#define CUDNN_HEUR_MODE_FALLBACK 2
#define CUDNN_HEUR_MODE_A 3

/* cudnnBackendKnobType_t: an engine's tuning parameters (tile sizes, stages, split-K,
 * swizzle, CGA tiles…), each an int64 in [minimum, maximum] by a stride; 44 types
 * (CUDNN_KNOB_TYPE_COUNTS), the most an engine can have. Their names are cuDNN's enum. */
#define CUDNN_KNOB_TYPE_COUNTS 44

/* cudnnBackendNumericalNote_t */
#define CUDNN_NUMERICAL_NOTE_TENSOR_CORE 0
#define CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS 1
#define CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION 2
#define CUDNN_NUMERICAL_NOTE_FFT 3
#define CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC 4
#define CUDNN_NUMERICAL_NOTE_WINOGRAD 5
#define CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4 6
#define CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6 7
#define CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13 8

/* cudnnBackendBehaviorNote_t */
#define CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION 0

typedef struct _TdmCudnnApi {
  size_t version;              /* cudnnGetVersion(): 91900 for 9.19.0 */
  char *path;                  /* the file that was opened, for the log */

  size_t (*get_version) (void);
  const char *(*get_error_string) (cudnnStatus_t status);
  /* Optional (cuDNN 9.0 and later): the last failure's own words. */
  void (*get_last_error_string) (char *message, size_t max_size);
  cudnnStatus_t (*create) (cudnnHandle_t *handle);
  cudnnStatus_t (*destroy) (cudnnHandle_t handle);
  cudnnStatus_t (*set_stream) (cudnnHandle_t handle, cudaStream_t stream);
  cudnnStatus_t (*create_descriptor) (int type, cudnnBackendDescriptor_t *descriptor);
  cudnnStatus_t (*destroy_descriptor) (cudnnBackendDescriptor_t descriptor);
  cudnnStatus_t (*finalize) (cudnnBackendDescriptor_t descriptor);
  cudnnStatus_t (*set_attribute) (cudnnBackendDescriptor_t descriptor, int name, int type,
                                  int64_t count, const void *elements);
  cudnnStatus_t (*get_attribute) (cudnnBackendDescriptor_t descriptor, int name, int type,
                                  int64_t requested, int64_t *count, void *elements);
  cudnnStatus_t (*execute) (cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                            cudnnBackendDescriptor_t variant_pack);
  /* Optional: whether the sublibraries match the one loaded. */
  cudnnStatus_t (*graph_version_check) (void);

  void *library;
} TdmCudnn;

/* The process's cuDNN, loaded on first use (thread-safe), or NULL when it is hidden,
 * missing or unusable; the first call logs which (tdm_cudnn_why_not() keeps it).
 * TANDEM_CUDNN=0 is read at every call, so a run (or a test) can hide a library already
 * loaded: plans built before keep working, no new ones are made. */
const TdmCudnn *tdm_cudnn_get (void);
/* Why tdm_cudnn_get() returned NULL, in words naming the library; NULL when it did
 * not (or was not asked yet). */
const char *tdm_cudnn_why_not (void);

/* Opens `library` (a file name or path) as tdm_cudnn_get() does, honouring
 * TANDEM_CUDNN=0: the loaded table, or NULL with *why_not set (free it). For tests;
 * tdm_cudnn_close() releases the result. */
TdmCudnn *tdm_cudnn_open (const char *library, char **why_not);
void tdm_cudnn_close (TdmCudnn *cudnn);

/* cuDNN's name for a status, with its last error message where the library has one;
 * free the result. */
char *tdm_cudnn_describe (const TdmCudnn *cudnn, cudnnStatus_t status);

G_END_DECLS
