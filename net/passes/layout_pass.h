/* layout_pass.h: the layout pass, NetDef -> NetDef (internal): an NCHW net (as Caffe2's
 * zoo writes them) made NHWC end to end, the layout GPU tensor cores read directly.
 *
 * What an op does with 4-D data comes from its schema (`layout`, `layout_inputs`,
 * `layout_outputs`: demitasse_plugin.h's dm_layout_rule), so the pass holds no per-op
 * rules; ops whose role is DM_ROLE_OPTIMIZER update state element by element in place
 * and take any layout. Blobs joined by an elementwise op (a cast, a Relu, a Sum) share a
 * layout; a group is NHWC when an ORDER, FILTER or JOIN op reads or writes one of its
 * blobs in a masked slot. Then:
 *   - every op of the order family gets `order: "NHWC"`; an explicit `axis` of a JOIN
 *     op (Concat, Split) is renumbered for 4-D data (1 -> 3, 2 -> 1, 3 -> 2);
 *   - data entering the NHWC part (a fed input in `fed`, or the output of an op that
 *     writes it in NCHW, such as a DB reader) goes through one Transpose (axes
 *     [0, 2, 3, 1]) into `<name>_nhwc`, which the later ops read;
 *   - a weight (read before written, not fed) is re-laid once, in the init-net addition:
 *     Transpose(w) -> w_nhwc for a filter (M x C x kH x kW -> M x kH x kW x C, Caffe2's
 *     NHWC filter), and, where an FC flattens NHWC data, FCWeightToNHWC(w, filters) ->
 *     w_nhwc (its columns reordered from (C, H*W) to (H*W, C), C counted from the
 *     filters that make the channels); the net (its updates included) then reads and
 *     trains w_nhwc, and the summary lists every such rename. The addition's ops go
 *     before everything already in it (momenta filled in w_nhwc's shape), or right after
 *     the op there that makes the weight (a fold or a cast);
 *   - an external output (or a `keep` blob) in an NHWC group is written as `<name>_nhwc`
 *     and transposed back (axes [0, 3, 1, 2]) at the end of the net, so the net's
 *     interface is unchanged.
 *   - an op whose schema gives no layout rule (SoftmaxWithLoss, Reshape) reading NHWC
 *     data gets it transposed back (axes [0, 3, 1, 2]) into a fresh `<name>_nchw` just
 *     before it, so it computes what it computed in the NCHW net (a 1 x 1 pooled map
 *     into a loss costs nothing; a large map costs a copy, never a wrong result); what it
 *     writes into the NHWC part enters through a Transpose as above;
 *   - with `pad_channels` N > 1, data entering the NHWC part whose only readers are Conv
 *     ops (as X, without a dX; casts between are allowed) enters through
 *     NCHW2NHWCPad instead: transposed, its channels zero-padded to a multiple of N (3 ->
 *     8: tensor cores take whole groups of 8 FP16 channels), and the filters of those
 *     Convs are re-laid by NCHW2NHWCPad too, with zero input channels. The padded input
 *     channels are 0, so the padded filter channels add nothing forward, their gradient
 *     is exactly 0 and (momentum SGD, Adam, weight decay: all 0 at 0) they stay 0; the
 *     real channels' sums gain only zero terms. Other readers (a pool, an external
 *     output, a filter also read elsewhere) leave the data unpadded.
 * An op the pass cannot convert fails it with an error naming the op (index, type,
 * name) and the blob: an op without a layout rule updating NHWC data in place, a slot
 * outside its masks, an elementwise op broadcasting (`broadcast`) or with an `axis`
 * other than 1, an FC whose channel count no filter gives, a JOIN with `add_axis`.
 * Softmax (`axis` 1) is elementwise here: a row from dim 1 holds the same values in
 * either order.
 *
 * The pass marks the net with the argument `layout` ("NHWC"); a marked net is returned
 * unchanged. Nets sharing weights (test nets) are rewritten by calling the pass again
 * with the same summary: the weights already re-laid are renamed the same way.
 */
#ifndef DM_NET_LAYOUT_PASS_H
#define DM_NET_LAYOUT_PASS_H

#include <stddef.h>

#include "core/status.h"
#include "proto/caffe2.pb-c.h"

#define DM_LAYOUT_MARK "layout"

/* Whether the pipeline runs the pass is demitasse.h's dm_train_layout: NHWC runs it,
 * NCHW leaves the net as written, AUTO (the default) is NHWC for a training net that is
 * both painted (mixed precision) and placed on a GPU, when the pass can convert it and
 * the nets sharing its weights; otherwise as written, the reason in the report. */

typedef struct dm_layout_opts {
  const char *const *fed;  /* blobs fed from the host (data, label): never weights */
  size_t n_fed;
  const char *const *keep; /* blobs the caller fetches besides the external outputs */
  size_t n_keep;
  int pad_channels;        /* N > 1: pad image channels feeding Convs to a multiple of N;
                              0, 1: off; DM_LAYOUT_PAD_AUTO (the pipeline's default): 8
                              for a net placed on a GPU, else off */
} dm_layout_opts;

#define DM_LAYOUT_PAD_AUTO (-1)

typedef struct dm_layout_summary {
  size_t ops_total;      /* ops of the nets */
  size_t ops_order;      /* of which set to order NHWC */
  size_t transposes;     /* Transpose ops inserted in the nets */
  char **renamed;        /* weights re-laid by the addition, pairs (old, new): renamed[2k]
                            became renamed[2k + 1] (owned) */
  int *fc;               /* per pair: nonzero for an FC weight (columns), 0 a filter */
  int *pad;              /* per pair: a filter's channels padded to a multiple of this; 0:
                            not padded (its dim 3 is then the NCHW filter's dim 1) */
  size_t padded;         /* entries padded by NCHW2NHWCPad (counted in transposes too) */
  size_t n_renamed;      /* the number of pairs */
  int already;           /* the net was marked already: unchanged */
} dm_layout_summary;

/* Rewrites `net` in place and inserts the weights' re-layouts into `init_add` (NULL: a
 * weight the summary does not already list is refused). Zero the summary before the
 * first call; calls for nets sharing the weights accumulate it. On failure the nets
 * may hold part of the pass; free the summary either way. */
DM_HIDDEN dm_status dm_layout_pass(Caffe2__NetDef *net, const dm_layout_opts *o,
                                   Caffe2__NetDef *init_add, dm_layout_summary *sum);
DM_HIDDEN void dm_layout_summary_free(dm_layout_summary *s);

#endif
