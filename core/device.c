/* device.c: the table of device backends (see device.h). */
#include "device.h"

#include <stdatomic.h>
#include <stdio.h>

/* Written once by dm_init (under its pthread_once) before any net exists, read after. */
static const dm_device_ops *_Atomic backends[2];

/* Per thread: a thread runs a workspace, and the executor reads the difference around
 * its own runs. */
static _Thread_local long host_syncs;

long dm_device_host_syncs(void) { return host_syncs; }

void dm_device_note_host_sync(void) { host_syncs++; }

/* Per thread, like the contexts whose memory it stands for: a thread's nets run on its
 * own contexts, so another thread's reallocation cannot move under its graphs. */
static _Thread_local unsigned long thread_epoch;

void dm_device_note_private_realloc(void) { thread_epoch++; }

unsigned long dm_device_private_epoch(const dm_device_ops *dev, int id) {
  return thread_epoch + (dev && dev->private_epoch ? dev->private_epoch(id) : 0);
}

void dm_device_register(dm_device_type type, const dm_device_ops *ops) {
  if ((unsigned)type < 2)
    atomic_store(&backends[type], ops);
}

const dm_device_ops *dm_device_ops_for(dm_device_type type) {
  return (unsigned)type < 2 && type != DM_CPU ? atomic_load(&backends[type]) : NULL;
}

const char *dm_device_str(dm_device_type type, int id, char *buf, size_t cap) {
  if (type == DM_CPU)
    snprintf(buf, cap, "CPU");
  else if (type == DM_CUDA)
    snprintf(buf, cap, "CUDA:%d", id);
  else
    snprintf(buf, cap, "device type %d", (int)type);
  return buf;
}

dm_status dm_device_check(dm_device_type type, int id) {
  if (type == DM_CPU)
    return DM_OK;
  char name[32];
  dm_device_str(type, id, name, sizeof name);
  const dm_device_ops *ops = dm_device_ops_for(type);
  if (!ops)
    return dm_error(DM_ERR_UNSUPPORTED, "placed on %s, but this build has no %s backend "
                                        "(built without CUDA)",
                    name, type == DM_CUDA ? "CUDA" : "such");
  char why[512];
  if (id < 0 || !ops->usable(id, why, sizeof why))
    return dm_error(DM_ERR_UNSUPPORTED, "placed on %s, which cannot run: %s", name,
                    id < 0 ? "negative device id" : why);
  return DM_OK;
}
