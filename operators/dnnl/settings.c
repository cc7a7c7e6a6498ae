/* settings.c: the oneDNN engine's settings, read from the environment at init (see
 * settings.h). */
#include "settings.h"

#include <stdlib.h>

static dm_dnnl_settings settings; /* written once, under dm_init's once; read after */

void dm_dnnl_settings_load(void) {
  settings.no_winograd = getenv("DEMITASSE_NO_WINOGRAD") != NULL;
}

const dm_dnnl_settings *dm_dnnl_settings_get(void) { return &settings; }
