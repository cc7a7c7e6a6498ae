/* dist_api.c: the C API's data-parallel calls (demitasse.h, "Data parallelism") over the
 * library's MPI layer (operators/mpi/mpi_common.h); without MPI each call says so.
 *
 * dm_workspace_broadcast agrees before it moves data: rank `root` broadcasts each blob's
 * dtype and dims, every rank checks its own blob against them, and one all-reduce of the
 * failures tells every rank whether all of them can take the data. So a rank whose blob
 * differs makes every rank fail with the blob's name, and none waits for a broadcast that
 * never comes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demitasse.h"

#include "api.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "dm_config.h"

uint64_t dm_fingerprint(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  if (h == 0)
    h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

#if DM_HAVE_MPI
#include "operators/mpi/mpi_common.h"

dm_status dm_dist_init(int *rank, int *size) {
  DM_TRY(dm_init());
  return dm_mpi_init(rank, size);
}

dm_status dm_dist_finalize(void) { return dm_mpi_finalize(); }

dm_status dm_dist_set_timeout(double seconds) {
  if (!(seconds > 0))
    return dm_error(DM_ERR_INVALID, "the data-parallel timeout must be positive, got %g",
                    seconds);
  dm_mpi_set_timeout(seconds);
  return DM_OK;
}

int dm_dist_rank(void) { return dm_mpi_ready() ? dm_mpi_rank() : 0; }
int dm_dist_size(void) { return dm_mpi_ready() ? dm_mpi_size() : 1; }
void dm_dist_abort(int code) { dm_mpi_abort(code); }

dm_status dm_dist_mean(double *values, size_t n) {
  if (n == 0)
    return DM_OK;
  if (!values)
    return dm_error(DM_ERR_INVALID, "dm_dist_mean: NULL values");
  DM_TRY(dm_mpi_allreduce_sum(values, n, DM_DOUBLE, "the values to average"));
  for (size_t i = 0; i < n; i++)
    values[i] /= dm_mpi_size();
  return DM_OK;
}

/* Whether every rank says ok (each passes its own verdict). */
static dm_status all_ok(int ok, int *all) {
  double bad = ok ? 0 : 1;
  DM_TRY(dm_mpi_allreduce_max(&bad, 1, "the ranks' verdicts"));
  *all = bad == 0;
  return DM_OK;
}

/* Root's list of its blob names, as one buffer of NUL-terminated names, on every rank. */
static dm_status root_names(dm_workspace *ws, int root, char **buf, size_t *len) {
  uint64_t n = 0;
  if (dm_mpi_rank() == root)
    for (size_t i = 0; i < dm_workspace_blob_count(ws); i++)
      n += strlen(dm_workspace_blob_name(ws, i)) + 1;
  DM_TRY(dm_mpi_bcast(&n, sizeof n, root, "the blob list's size"));
  if (!(*buf = malloc(n ? n : 1)))
    return DM_NOMEM("the blob list");
  if (dm_mpi_rank() == root) {
    size_t off = 0;
    for (size_t i = 0; i < dm_workspace_blob_count(ws); i++) {
      const char *name = dm_workspace_blob_name(ws, i);
      memcpy(*buf + off, name, strlen(name) + 1);
      off += strlen(name) + 1;
    }
  }
  *len = n;
  return dm_mpi_bcast(*buf, n, root, "the blob list");
}

/* One blob from root to every rank; with skip_empty, nothing when root's is empty. */
static dm_status bcast_blob(dm_workspace *ws, const char *name, int root, int skip_empty) {
  const int me = dm_mpi_rank();
  dm_blob *b = dm_workspace_find(ws, name);
  dm_tensor *t = b ? b->tensor : NULL;
  int64_t meta[2 + DM_MAX_DIMS] = {0};
  if (me == root && t) {
    meta[0] = t->dtype;
    meta[1] = t->ndim;
    memcpy(meta + 2, t->dims, sizeof t->dims);
  }
  DM_TRY(dm_mpi_bcast(meta, sizeof meta, root, "a blob's dtype and shape"));
  if (skip_empty && meta[0] == DM_UNDEFINED)
    return DM_OK;
  int ok = t && t->dtype == (dm_dtype)meta[0] && t->dtype != DM_UNDEFINED &&
           t->dtype != DM_STRING && t->ndim == meta[1] &&
           memcmp(t->dims, meta + 2, sizeof t->dims) == 0;
  int all = 0;
  DM_TRY(all_ok(ok, &all));
  if (!all)
    return dm_error(DM_ERR_SHAPE,
                    "broadcast of blob '%s' from rank %d: some rank lacks it or holds another "
                    "dtype or shape (here: %s)",
                    name, root,
                    !t ? "missing" : ok ? "as on the root" : "different");
  /* Device tensors go through the host. */
  int id = 0;
  dm_device_type dev = dm_tensor_device(t, &id);
  dm_tensor *host = t;
  if (dev != DM_CPU) {
    if (!(host = dm_tensor_new(t->limit)))
      return DM_NOMEM("a host copy");
    dm_status s = dm_tensor_copy_to(host, DM_CPU, 0, t);
    if (s != DM_OK) {
      dm_tensor_free(host);
      return s;
    }
  }
  size_t bytes = (size_t)host->numel * dm_dtype_size(host->dtype);
  void *data = me == root ? (void *)dm_tensor_data(host) : dm_tensor_mutable_data(host);
  char what[300];
  snprintf(what, sizeof what, "blob '%s'", name);
  dm_status s = data || bytes == 0 ? dm_mpi_bcast(data, bytes, root, what)
                                   : dm_error(DM_ERR_NOMEM, "reading blob '%s'", name);
  if (s == DM_OK && host != t && me != root)
    s = dm_tensor_copy_to(t, dev, id, host);
  if (host != t)
    dm_tensor_free(host);
  return s;
}

static dm_status broadcast_entered(dm_workspace *ws, const char *const *names, size_t n,
                                   int root) {
  if (!dm_mpi_ready())
    return dm_error(DM_ERR_INVALID, "dm_workspace_broadcast: call dm_dist_init first");
  if (root < 0 || root >= dm_mpi_size())
    return dm_error(DM_ERR_INVALID, "broadcast root %d: there are %d ranks", root,
                    dm_mpi_size());
  if (names) {
    for (size_t i = 0; i < n; i++)
      DM_TRY(bcast_blob(ws, names[i], root, 0));
    return DM_OK;
  }
  char *buf = NULL;
  size_t len = 0;
  dm_status s = root_names(ws, root, &buf, &len);
  for (size_t off = 0; s == DM_OK && off < len; off += strlen(buf + off) + 1)
    s = bcast_blob(ws, buf + off, root, 1);
  free(buf);
  return s;
}

dm_status dm_workspace_broadcast(dm_workspace *ws, const char *const *names, size_t n,
                                 int root) {
  if (!ws)
    return dm_error(DM_ERR_INVALID, "dm_workspace_broadcast: NULL workspace");
  DM_TRY(dm_workspace_enter(ws, "dm_workspace_broadcast"));
  return dm_workspace_leave_with(ws, broadcast_entered(ws, names, n, root));
}

dm_status dm_dist_agree(const char *what, const dm_dist_fact *facts, size_t n) {
  if (!dm_mpi_ready() || dm_mpi_size() < 2 || n == 0)
    return DM_OK;
  const int size = dm_mpi_size(), me = dm_mpi_rank();
  int64_t *all = calloc((size_t)size * n, sizeof *all); /* (size, n): rank r's row r */
  if (!all)
    return DM_NOMEM("the ranks' facts");
  for (size_t k = 0; k < n; k++)
    all[(size_t)me * n + k] = facts[k].value;
  /* A sum of rows that are 0 but one's own is every rank's values (an all-gather). */
  dm_status s = dm_mpi_allreduce_sum(all, (size_t)size * n, DM_INT64, what);
  if (s != DM_OK) {
    free(all);
    return s;
  }
  char msg[1536];
  size_t len = 0;
  for (size_t k = 0; k < n && len < sizeof msg; k++) {
    int differs = 0;
    for (int r = 1; r < size; r++)
      differs |= all[(size_t)r * n + k] != all[k];
    if (!differs)
      continue;
    len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%s:", len ? "; " : "",
                            facts[k].name);
    for (int r = 0; r < size && len < sizeof msg; r++) {
      int64_t v = all[(size_t)r * n + k];
      len += (size_t)(facts[k].hex
                          ? snprintf(msg + len, sizeof msg - len, "%s rank %d %016llx",
                                     r ? "," : "", r, (unsigned long long)v)
                          : snprintf(msg + len, sizeof msg - len, "%s rank %d %lld",
                                     r ? "," : "", r, (long long)v));
    }
  }
  free(all);
  if (len == 0)
    return DM_OK;
  return dm_error(DM_ERR_INVALID,
                  "the %d data-parallel ranks differ in %s, which must be the same on every "
                  "rank (nothing was trained): %s",
                  size, what, msg);
}

#else /* without MPI */

dm_status dm_dist_agree(const char *what, const dm_dist_fact *facts, size_t n) {
  (void)what;
  (void)facts;
  (void)n;
  return DM_OK;
}

static dm_status no_mpi(const char *call) {
  return dm_error(DM_ERR_UNSUPPORTED, "%s: this build has no MPI (install libopenmpi-dev and "
                                      "rebuild)", call);
}

dm_status dm_dist_init(int *rank, int *size) {
  if (rank)
    *rank = 0;
  if (size)
    *size = 1;
  return no_mpi("dm_dist_init");
}
dm_status dm_dist_finalize(void) { return DM_OK; }
dm_status dm_dist_set_timeout(double seconds) {
  (void)seconds;
  return no_mpi("dm_dist_set_timeout");
}
int dm_dist_rank(void) { return 0; }
int dm_dist_size(void) { return 1; }
void dm_dist_abort(int code) { (void)code; }
dm_status dm_dist_mean(double *values, size_t n) {
  (void)values;
  (void)n;
  return no_mpi("dm_dist_mean");
}
dm_status dm_workspace_broadcast(dm_workspace *ws, const char *const *names, size_t n,
                                 int root) {
  (void)ws;
  (void)names;
  (void)n;
  (void)root;
  return no_mpi("dm_workspace_broadcast");
}
#endif
