/* inspect_shapes.c: the shape part of `demitasse inspect`: every blob's dtype and shape
 * and every op's FLOPs and bytes, inferred from the input shapes given with --input and
 * the parameter shapes of an init net (--init) or an output-channels table. */
#include "inspect_shapes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/api.h"

static void human(double v, char *buf, size_t cap) {
  const char *unit[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    u++;
  }
  snprintf(buf, cap, u ? "%.2f%s" : "%.0f%s", v, unit[u]);
}

/* Shapes of what the init net creates, without running it (its fills infer shapes). */
static dm_status shapes_from_init(dm_workspace *ws, const char *init) {
  Caffe2__NetDef *def = NULL;
  DM_TRY(dm_netdef_read(init, &def));
  dm_status s = dm_infer_net_shapes(ws, def, init, NULL, NULL, NULL);
  protobuf_c_message_free_unpacked(&def->base, NULL);
  return s;
}

dm_status dm_inspect_shapes(const Caffe2__NetDef *def, const char *path, const char *init,
                            const char *table_path, const char *const *inputs, size_t n_inputs) {
  dm_workspace *ws = NULL;
  dm_param_table table = {0};
  dm_op_cost *costs = calloc(def->n_op + 1, sizeof *costs);
  if (!costs)
    return DM_NOMEM("op costs");
  dm_status s = dm_workspace_create(&ws);
  for (size_t i = 0; i < n_inputs && s == DM_OK; i++)
    s = dm_parse_input_shape(ws, inputs[i]);
  if (s == DM_OK && init)
    s = shapes_from_init(ws, init);
  if (s == DM_OK && table_path)
    s = dm_param_table_load(table_path, &table);
  if (s == DM_OK)
    s = dm_infer_net_shapes(ws, def, path, dm_param_shapes_hook, &table, costs);
  if (s == DM_OK && table_path)
    s = dm_param_table_check_used(&table);
  if (s == DM_OK) {
    printf("\nshapes:\n");
    for (size_t i = 0; i < dm_workspace_blob_count(ws); i++) {
      const char *name = dm_workspace_blob_name(ws, i);
      const dm_tensor *t = dm_workspace_find(ws, name)->tensor;
      char shape[256];
      printf("  %-40s %-8s %s\n", name, dm_dtype_name(t->dtype), dm_shape_str(t, shape, sizeof shape));
    }
    printf("\ncost per op:\n  %4s %-20s %-28s %12s %12s %12s\n", "#", "type", "name", "FLOPs",
           "read", "written");
    double flops = 0, bytes = 0;
    for (size_t i = 0; i < def->n_op; i++) {
      const Caffe2__OperatorDef *op = def->op[i];
      char f[32], r[32], w[32];
      human(costs[i].flops, f, sizeof f);
      human(costs[i].bytes_read, r, sizeof r);
      human(costs[i].bytes_written, w, sizeof w);
      printf("  %4zu %-20s %-28s %12s %11sB %11sB\n", i, op->type ? op->type : "",
             op->name ? op->name : "", f, r, w);
      flops += costs[i].flops;
      bytes += costs[i].bytes_read + costs[i].bytes_written;
    }
    char f[32], b[32];
    human(flops, f, sizeof f);
    human(bytes, b, sizeof b);
    printf("  total: %s FLOPs, %sB moved\n", f, b);
  }
  dm_param_table_free(&table);
  dm_workspace_destroy(ws);
  free(costs);
  return s;
}
