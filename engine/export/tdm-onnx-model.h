/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-onnx-model.h — private to export/: the network turned into the bytes of an ONNX
 * ModelProto (tdm-onnx-model.c, built only with protobuf-c). Writing them to a file
 * and loading checkpoints is tdm-onnx-export.c's.
 */
#pragma once

#include <glib.h>

#include "tdm-network.h"
#include "tdm-onnx-export.h"

G_BEGIN_DECLS

/* The serialized model; NULL with TDM_ENGINE_ERROR_EXPORT when it cannot be made (a
 * model past protobuf's 2 GB, an allocation that fails). `what` names the model in
 * messages. */
GBytes *tdm_onnx_model_build (const TdmNetwork *net, const float *params, const float *state,
                              const TdmOnnxOptions *options, const char *what,
                              GError **error);

G_END_DECLS
