/* grad_ctx_impl.h: what a gradient maker's dm_grad_ctx holds (internal).
 *
 * Gradient makers see their forward op only through the dm_grad_* accessors
 * (demitasse_plugin.h), which live here in core (grad_ctx.c) so that operators/, gpu/
 * and plugins depend on nothing above core. The gradient pass (net/passes/
 * gradient_pass.c) fills the struct for each forward op it differentiates; appending an
 * emitted op to the backward net is the one thing that needs net/ (the op builder, the
 * origin stamps), and the pass hands that in as a callback (dm_grad_host), so calls go
 * one way: the pass calls core, core calls back only through what it was handed.
 */
#ifndef DM_CORE_GRAD_CTX_IMPL_H
#define DM_CORE_GRAD_CTX_IMPL_H

#include "demitasse_plugin.h"
#include "proto/caffe2.pb-c.h"

/* How an emitted op reaches the net: `emit` builds op `type` (in[0..n_in) ->
 * out[0..n_out), no name NULL: core has checked) as a gradient op of `fwd` (its
 * arguments, device and engine copied from it), appends it to the backward net on
 * `self`, and returns it in *op (the net's, so later dm_grad_set_arg_* can edit it). */
typedef struct dm_grad_host {
  void *self;
  dm_status (*emit)(void *self, const Caffe2__OperatorDef *fwd, const char *type, int n_in,
                    const char *const *in, int n_out, const char *const *out,
                    Caffe2__OperatorDef **op);
} dm_grad_host;

struct dm_grad_ctx {
  const Caffe2__OperatorDef *op; /* the forward op */
  const char **out_grads;        /* per output: its gradient's blob (NULL: none) */
  char **in_grads;               /* per input: the blob the pass wants its gradient in */
  char **in_alias;               /* per input: set by dm_grad_set_input_grad, or NULL */
  const char *needed;            /* per input: its gradient is used, or NULL = all are */
  dm_grad_host host;
  Caffe2__OperatorDef *last;     /* the op emitted last (the net's), or NULL */
};

#endif
