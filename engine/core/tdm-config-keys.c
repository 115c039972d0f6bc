/* SPDX-License-Identifier: GPL-3.0-or-later */
/* tdm-config-keys.c — which keys a configuration's JSON may hold, for telling a typo in
 * a hand-written --config file from a setting (tdm_config_json_unknown_key). Not the
 * reader: tdm_config_from_json() reads the keys it knows and leaves the rest.
 */
#include "tdm-config.h"
#include "tdm-error.h"
#include "tdm-json.h"

/* The keys are what the writer writes, with every optional field set: the writer is
 * the one list of them. */
static GHashTable *
known_keys(void)
{
  g_autoptr(TdmConfig) full = tdm_config_new();
  full->val_split = 0.1;
  full->save_best_path = g_strdup("best");
  full->save_every = 1;
  full->early_stop = 1;
  full->init_path = g_strdup("init");
  full->freeze = g_strsplit("a", ",", -1);
  full->lr_scale = g_strsplit("a=1", ",", -1);
  full->schedule = TDM_SCHEDULE_PLATEAU;
  full->accumulate = 2;
  full->clip_grad_norm = 1;
  full->crop_scale[0] = full->crop_scale[1] = 1;
  full->jitter[0] = 0.1;
  full->erase = 0.1;
  g_autofree char *json = tdm_config_to_json(full);
  g_autoptr(JsonNode) root = tdm_json_parse(json, -1, TDM_ENGINE_ERROR_INVALID_OPTION, NULL);
  GHashTable *keys = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GList) members = json_object_get_members(json_node_get_object(root));
  for (GList *m = members; m != NULL; m = m->next)
    g_hash_table_add(keys, g_strdup(m->data));
  return keys;
}

char *
tdm_config_json_unknown_key(const char *json)
{
  g_return_val_if_fail(json != NULL, NULL);
  g_autoptr(JsonNode) root = tdm_json_parse(json, -1, TDM_ENGINE_ERROR_INVALID_OPTION, NULL);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root))
    return NULL;
  g_autoptr(GHashTable) keys = known_keys();
  g_autoptr(GList) members = json_object_get_members(json_node_get_object(root));
  for (GList *m = members; m != NULL; m = m->next)
    if (!g_hash_table_contains(keys, m->data))
      return g_strdup(m->data);
  return NULL;
}
