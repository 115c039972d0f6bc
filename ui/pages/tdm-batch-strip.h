/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-batch-strip.h: which samples of the current batch went to which device.
 *
 * One row per device: a bar whose length is the device's shard of the global batch
 * (its size written on it), then thumbnails of the shard's first samples with their
 * labels. It draws what a BATCH event says; the thumbnails' pixels are copied from
 * the training set when the event is set, so the widget holds no dataset. Main-thread
 * only.
 */

#pragma once

#include <gtk/gtk.h>

#include "tdm-dataset.h"
#include "tdm-events.h"

G_BEGIN_DECLS

#define TDM_TYPE_BATCH_STRIP (tdm_batch_strip_get_type ())

G_DECLARE_FINAL_TYPE (TdmBatchStrip, tdm_batch_strip, TDM, BATCH_STRIP, GtkWidget)

/* A row's parts at a given size (tdm_batch_strip_layout). */
typedef struct
{
  graphene_rect_t shard;                              /* the shard bar */
  graphene_rect_t thumb[TDM_BATCH_SAMPLES_SHOWN];     /* `shown` of them */
  int             shown;
  int             size;
} TdmBatchStripRow;

GtkWidget *tdm_batch_strip_new       (void);
/* `train` is the run's training set (for thumbnails and class names); it is read
 * during the call only. */
void       tdm_batch_strip_set_batch (TdmBatchStrip       *self,
                                      const TdmBatchEvent *batch,
                                      const TdmDataset    *train);
void       tdm_batch_strip_clear     (TdmBatchStrip       *self);
/* The row labelled "main" (−1: none), as the run's STARTED event names it. */
/* A row's label: the device as the run's other pages name it (tdm_format_replica). */
void       tdm_batch_strip_set_device_name (TdmBatchStrip *self,
                                            int            device,
                                            const char    *name);
void       tdm_batch_strip_set_main_device (TdmBatchStrip *self,
                                            int            device);
int        tdm_batch_strip_get_devices (TdmBatchStrip     *self);
/* The label of a shown sample, or −1. */
int        tdm_batch_strip_get_label (TdmBatchStrip       *self,
                                      int                  device,
                                      int                  sample);
/* A shown sample's class name as last drawn over its thumbnail: whole, or cut with
 * "…" to the thumbnail's width; `width` and `room` (may be NULL) get its drawn width
 * and the room it had. NULL before it was drawn. */
const char *tdm_batch_strip_get_caption (TdmBatchStrip    *self,
                                         int               device,
                                         int               sample,
                                         double           *width,
                                         double           *room);
/* The tooltip over a point of the widget: the whole class name of the thumbnail
 * there; NULL off the thumbnails. */
char      *tdm_batch_strip_get_tooltip_at (TdmBatchStrip  *self,
                                           double          x,
                                           double          y);
/* One TdmBatchStripRow per device at width × height. */
GArray    *tdm_batch_strip_layout    (TdmBatchStrip       *self,
                                      double               width,
                                      double               height);

G_END_DECLS
