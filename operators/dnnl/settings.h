/* settings.h: the oneDNN engine's settings from the environment, read once when the
 * library initialises (dm_register_dnnl_ops, under dm_init's once), so that no kernel
 * reads the environment while it runs and every op of a process sees the same values
 * (internal). */
#ifndef DM_OPERATORS_DNNL_SETTINGS_H
#define DM_OPERATORS_DNNL_SETTINGS_H

#include "core/status.h"

typedef struct dm_dnnl_settings {
  int no_winograd; /* DEMITASSE_NO_WINOGRAD set (any value): every convolution direct */
} dm_dnnl_settings;

/* Reads the environment into the settings (register.c, at init). */
DM_HIDDEN void dm_dnnl_settings_load(void);
/* The settings as loaded (the defaults before that). */
DM_HIDDEN const dm_dnnl_settings *dm_dnnl_settings_get(void);

#endif
