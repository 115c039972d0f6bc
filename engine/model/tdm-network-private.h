/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-network-private.h — what the spec parser (tdm-network-spec.c), the network built
 * from its items (tdm-network-build.c) and the naming of the result
 * (tdm-network-names.c) share. Not for anything else.
 */
#pragma once

#include "tdm-network.h"

/* Sets every layer's name (TdmLayer.name). */
void tdm_network_assign_names (TdmNetwork *net);
/* The spec that parses back to net. */
char *tdm_network_canonical_spec (const TdmNetwork *net);

/* Blocks nest at most this deep. */
#define MAX_DEPTH 16

typedef enum { ITEM_LAYER, ITEM_BEGIN, ITEM_END } ItemType;

/* One item of a parsed spec. */
typedef struct {
  ItemType type;
  char *text;                  /* the layer's token (ITEM_LAYER) */
  int position;                /* 1-based, in reading order of the text */
} Item;

/* The spec's items in order (an array of Item that frees their texts); NULL with
 * the error when the text is not a spec. */
GArray *tdm_network_parse_items (const char *spec, GError **error);
/* One layer token into layer->kind and its numbers (fc's, conv's outputs in
 * *features); shapes come later. */
gboolean tdm_network_parse_token (const char *token, int position, TdmLayer *layer,
                                  int *features, GError **error);
/* A spec that is one word naming no layer is a network's name: the words that say
 * so (the nearest built-in, and the list); NULL when it is not such a word. */
char *tdm_network_unknown (const char *spec);
/* Sets the error for item `position`, `token`, and the reason; returns FALSE. */
gboolean tdm_network_spec_error (GError **error, const char *token, int position,
                                 const char *format, ...) G_GNUC_PRINTF (4, 5);
