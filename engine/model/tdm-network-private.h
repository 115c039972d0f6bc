/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-network-private.h — what the spec parser (tdm-network-spec.c) and the naming of
 * its result (tdm-network-names.c) share. Not for anything else.
 */
#pragma once

#include "tdm-network.h"

/* Sets every layer's name (TdmLayer.name). */
void tdm_network_assign_names (TdmNetwork *net);
/* The spec that parses back to net. */
char *tdm_network_canonical_spec (const TdmNetwork *net);
