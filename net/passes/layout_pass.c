/* layout_pass.c: the layout pass (see net/passes/layout_pass.h): an NCHW net made NHWC, from the
 * layout rules in the op schemas. lp_plan_build (layout_plan.c, on layout_groups.c's
 * groups) decides everything (groups of blobs sharing a layout, refusals, where data
 * enters and leaves, which weights to re-lay, which data enters padded) from the net
 * without changing it, so a refused net is returned as it was; lp_plan_apply
 * (layout_apply.c) then rewrites it as planned. What an op is comes from its schema
 * alone (layout, layout_inputs/outputs, value_copy, grad_slots), so a plugin's op takes
 * part like a built-in one; the pass names only the ops it emits. */
#include "net/passes/layout_pass.h"

#include <stdlib.h>
#include <string.h>

#include "net/netdef_build.h"
#include "net/passes/layout_internal.h"

void dm_layout_summary_free(dm_layout_summary *s) {
  if (!s)
    return;
  for (size_t i = 0; i < 2 * s->n_renamed; i++)
    free(s->renamed[i]);
  free(s->renamed);
  free(s->fc);
  free(s->pad);
  memset(s, 0, sizeof *s);
}

dm_status dm_layout_pass(Caffe2__NetDef *net, const dm_layout_opts *o, Caffe2__NetDef *add,
                         dm_layout_summary *sum) {
  static const dm_layout_opts none = {0};
  if (!net || !sum)
    return dm_error(DM_ERR_INVALID, "dm_layout_pass: NULL argument");
  if (!o)
    o = &none;
  if (dm_netdef_find_arg(net, DM_LAYOUT_MARK)) {
    sum->already = 1;
    return DM_OK;
  }
  lp_plan P = {0};
  dm_status s = lp_plan_build(&P, net, o);
  if (s == DM_OK)
    s = lp_plan_apply(&P, net, o, add, sum);
  sum->ops_total += net->n_op;
  lp_plan_free(&P);
  return s;
}
