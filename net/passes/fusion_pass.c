/* fusion_pass.c: the inference fusion pass (see net/passes/fusion_pass.h): test-mode SpatialBN folded into
 * the Conv before it, the fold itself a FoldBN op in the init-net addition; then, with
 * post_ops, Conv + Sum/Add, Conv (+ Sum) + Relu or another activation (Clip, Sigmoid,
 * HardSwish, ...; Conv + Sigmoid + Mul as Swish) and FC + Relu made ConvFusion and
 * FCFusion ops (operators/conv_fusion.c). */
#include "net/passes/fusion_pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/netdef_build.h"
#include "operators/conv_args.h"

void dm_fusion_summary_free(dm_fusion_summary *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->n_new_params; i++)
    free(s->new_params[i]);
  free(s->new_params);
  free(s->report);
  memset(s, 0, sizeof *s);
}

static int written_by_net(const Caffe2__NetDef *net, const char *name) {
  for (size_t i = 0; i < net->n_op; i++)
    if (dm_opdef_writes(net->op[i], name))
      return 1;
  return 0;
}

static int uses(const Caffe2__NetDef *net, const char *name) {
  for (size_t i = 0; i < net->n_op; i++)
    if (dm_opdef_reads(net->op[i], name) || dm_opdef_writes(net->op[i], name))
      return 1;
  return dm_str_in_list(name, (const char *const *)net->external_input, net->n_external_input) ||
         dm_str_in_list(name, (const char *const *)net->external_output, net->n_external_output);
}

static int is_type(const Caffe2__OperatorDef *op, const char *type) {
  return op->type && strcmp(op->type, type) == 0;
}

/* Index of the last op before `i` writing `name`, or i when there is none. */
static size_t last_writer(const Caffe2__NetDef *net, size_t i, const char *name) {
  for (size_t j = i; j > 0; j--)
    if (dm_opdef_writes(net->op[j - 1], name))
      return j - 1;
  return i;
}

/* NCHW when the order argument says so or is absent; compares the bytes the argument
 * holds (they need not end in a NUL). */
static int is_nchw(const Caffe2__OperatorDef *op) {
  const Caffe2__Argument *a = dm_opdef_find_arg(op, "order");
  return !a || !a->has_s || (a->s.len == 4 && memcmp(a->s.data, "NCHW", 4) == 0);
}

/* Why the BN at `i` cannot be folded (NULL: it can), with *conv its Conv's index. */
static const char *refusal(const Caffe2__NetDef *net, size_t i, const dm_fusion_opts *o,
                           size_t *conv) {
  const Caffe2__OperatorDef *bn = net->op[i];
  if (dm_opdef_arg_int(bn, "is_test", 0) == 0)
    return "training mode (is_test=0): its statistics are computed per batch";
  if (bn->n_output != 1)
    return "is_test=1 with more than one output";
  if (bn->n_input != 5)
    return "it does not have the 5 inputs X, scale, bias, mean, var";
  if (!is_nchw(bn))
    return "NHWC: the fold is implemented for NCHW only";
  const char *x = bn->input[0], *y = bn->output[0];
  size_t j = i;
  while (j > 0 && !dm_opdef_writes(net->op[j - 1], x))
    j--;
  if (j == 0)
    return "X is not written by an op of the net";
  const Caffe2__OperatorDef *c = net->op[--j];
  if (!c->type || strcmp(c->type, "Conv") != 0)
    return "X is not a Conv's output";
  if (c->n_output != 1 || c->n_input < 2 || c->n_input > 3)
    return "its Conv does not have the form X, W, [b] -> Y";
  if (!is_nchw(c))
    return "its Conv is NHWC: the fold is implemented for NCHW only";
  if (dm_str_in_list(x, (const char *const *)net->external_output, net->n_external_output) ||
      dm_str_in_list(x, o->keep, o->keep ? o->n_keep : 0))
    return "the Conv's output is fetched";
  for (size_t k = 0; k < net->n_op; k++) {
    if (k == i || k == j)
      continue;
    if (dm_opdef_reads(net->op[k], x) || dm_opdef_writes(net->op[k], x))
      return "the Conv's output has another reader or writer";
    if (k > j && k < i && (dm_opdef_reads(net->op[k], y) || dm_opdef_writes(net->op[k], y)))
      return "an op between the Conv and the BN reads or writes the BN's output";
  }
  for (size_t k = 1; k < c->n_input + 4; k++) {
    const char *w = k < c->n_input ? c->input[k] : bn->input[k - c->n_input + 1];
    if (written_by_net(net, w))
      return "a weight (the Conv's W, b or the BN's parameters) is computed by the net";
    if (dm_str_in_list(w, o->fed, o->fed ? o->n_fed : 0))
      return "a weight (the Conv's W, b or the BN's parameters) is fed at each run";
    if (o->params && !dm_str_in_list(w, o->params, o->n_params))
      return "a weight (the Conv's W, b or the BN's parameters) is not made by the init net";
  }
  *conv = j;
  return NULL;
}

/* `base` + `suffix`, made unique among the blobs of the net, the addition and the known
 * weights (a workspace blob of that name would be overwritten). */
static dm_status fresh_name(const Caffe2__NetDef *net, const Caffe2__NetDef *add,
                            const dm_fusion_opts *o, const char *base, const char *suffix,
                            char **out) {
  size_t len = strlen(base) + strlen(suffix) + 24;
  char *name = malloc(len);
  if (!name)
    return DM_NOMEM("a blob name");
  snprintf(name, len, "%s%s", base, suffix);
  for (unsigned n = 1; uses(net, name) || uses(add, name) ||
                      dm_str_in_list(name, o->params, o->params ? o->n_params : 0);
       n++)
    snprintf(name, len, "%s%s_%u", base, suffix, n);
  *out = name;
  return DM_OK;
}

/* Folds the BN at `i` into the Conv at `j`: FoldBN into `add`, the Conv rewired, the BN
 * removed. */
static dm_status fold(Caffe2__NetDef *net, size_t i, size_t j, Caffe2__NetDef *add,
                      const dm_fusion_opts *o, dm_fusion_summary *sum) {
  Caffe2__OperatorDef *bn = net->op[i], *c = net->op[j];
  char *wf = NULL, *bf = NULL;
  dm_status s = fresh_name(net, add, o, bn->output[0], "_folded_w", &wf);
  if (s == DM_OK)
    s = fresh_name(net, add, o, bn->output[0], "_folded_b", &bf);
  if (s == DM_OK) {
    dm_opb b;
    dm_opb_start(&b, "FoldBN");
    dm_opb_input(&b, c->input[1]);
    dm_opb_inputs(&b, (const char *const *)bn->input + 1, 4);
    if (c->n_input == 3)
      dm_opb_input(&b, c->input[2]);
    dm_opb_output(&b, wf);
    dm_opb_output(&b, bf);
    const Caffe2__Argument *eps = dm_opdef_find_arg(bn, "epsilon");
    if (eps)
      dm_opb_copy_arg(&b, eps);
    s = dm_opb_append(&b, add);
  }
  /* The Conv's new names are copied first, so it is rewired whole or not at all. */
  char *wc = NULL, *bc = NULL, *yc = NULL;
  if (s == DM_OK && !((wc = strdup(wf)) && (bc = strdup(bf)) && (yc = strdup(bn->output[0]))))
    s = DM_NOMEM("a blob name");
  if (s == DM_OK && c->n_input == 2) { /* the fused Conv gets a bias */
    char **grown = realloc(c->input, 3 * sizeof *grown);
    if (!grown)
      s = DM_NOMEM("a Conv's inputs");
    else {
      c->input = grown;
      c->input[c->n_input++] = NULL;
    }
  }
  if (s == DM_OK) {
    free(c->input[1]);
    c->input[1] = wc;
    free(c->input[2]);
    c->input[2] = bc;
    free(c->output[0]);
    c->output[0] = yc;
    wc = bc = yc = NULL;
    s = dm_strv_push(&sum->new_params, &sum->n_new_params, wf);
  }
  if (s == DM_OK)
    s = dm_strv_push(&sum->new_params, &sum->n_new_params, bf);
  free(wc);
  free(bc);
  free(yc);
  free(wf);
  free(bf);
  if (s != DM_OK)
    return s;
  protobuf_c_message_free_unpacked(&bn->base, NULL);
  memmove(net->op + i, net->op + i + 1, (net->n_op - i - 1) * sizeof *net->op);
  net->n_op--;
  sum->folded++;
  return DM_OK;
}

/* Post-ops ------------------------------------------------------------------------ */

enum { FUSION_CONV_RELU = 1, FUSION_CONV_SUM = 2, FUSION_CONV_SUM_RELU = 3 };

/* Why op j (a Conv, FC or ConvFusion writing t, its one output) cannot move to i, the
 * pattern's last op, which reads t and writes y, so that the fused op computes y there
 * (NULL: it can). `s_in`: the input of j allowed to be y (a ConvFusion's S; -1: none). */
static const char *move_refusal(const Caffe2__NetDef *net, size_t j, size_t i, const char *y,
                                int s_in, const dm_fusion_opts *o) {
  const Caffe2__OperatorDef *p = net->op[j], *last = net->op[i];
  const char *t = p->output[0];
  int in_place = strcmp(t, y) == 0;
  size_t n_reads = 0;
  for (size_t k = 0; k < last->n_input; k++)
    n_reads += strcmp(last->input[k], t) == 0;
  if (n_reads != 1)
    return "the intermediate blob is more than one of the op's operands";
  if (dm_str_in_list(t, o->fed, o->fed ? o->n_fed : 0))
    return "the intermediate blob is fed at each run";
  if (!in_place &&
      (dm_str_in_list(t, (const char *const *)net->external_output, net->n_external_output) ||
       dm_str_in_list(t, o->keep, o->keep ? o->n_keep : 0)))
    return "the intermediate blob is fetched (an external output or kept)";
  for (size_t k = 0; k < net->n_op; k++) {
    if (k == i || k == j || (in_place && (k < j || k > i)))
      continue;
    if (dm_opdef_reads(net->op[k], t) || dm_opdef_writes(net->op[k], t))
      return in_place ? "an op between them reads or writes the intermediate blob"
                      : "the intermediate blob has another reader or writer";
  }
  for (size_t k = 0; k < p->n_input; k++) {
    if (strcmp(p->input[k], y) == 0 && (int)k != s_in)
      return "the fused op's output would be one of its inputs";
    for (size_t m = j + 1; m < i; m++)
      if (dm_opdef_writes(net->op[m], p->input[k]))
        return "an op between them writes an input of the first (it would read it later)";
  }
  return NULL;
}

/* Why op j cannot be the Conv of a fusion (NULL: it can). */
static const char *conv_refusal(const Caffe2__OperatorDef *c) {
  if (c->n_output != 1 || c->n_input < 2 || c->n_input > 3)
    return "its Conv does not have the form X, W, [b] -> Y";
  return NULL;
}

/* The arguments of a fused activation the fused op takes over. */
static const char *const act_args[] = {"min", "max", "alpha", "beta", "fast_gelu"};

/* An activation other than Relu that ConvFusion fuses (operators/conv_args.h). */
static int is_fused_act(const Caffe2__OperatorDef *op) {
  return !is_type(op, "Relu") && dm_conv_fusable_activation(op->type);
}

/* Sets f's `activation` to `name` and copies act's arguments (act may be NULL). */
static dm_status set_activation(Caffe2__OperatorDef *f, const char *name,
                                const Caffe2__OperatorDef *act) {
  DM_TRY(dm_opdef_set_arg_string(f, "activation", name));
  for (size_t k = 0; act && k < sizeof act_args / sizeof *act_args; k++) {
    const Caffe2__Argument *a = dm_opdef_find_arg(act, act_args[k]);
    if (a && a->has_f)
      DM_TRY(dm_opdef_set_arg_float(f, act_args[k], a->f));
    else if (a && a->has_i)
      DM_TRY(dm_opdef_set_arg_int(f, act_args[k], a->i));
  }
  return DM_OK;
}

/* Makes op j `type` with fusion_type `ft` writing y (and reading S last, when not NULL;
 * with the activation `act_name`, arguments from `act`, when not NULL), moves it to i and
 * removes op i. The op is rewritten on a copy, so on failure the net is unchanged. */
static dm_status fuse_into(Caffe2__NetDef *net, size_t j, size_t i, const char *type,
                           int64_t ft, const char *y, const char *sv, const char *act_name,
                           const Caffe2__OperatorDef *act) {
  ProtobufCMessage *copy = NULL;
  DM_TRY(dm_pb_clone(&net->op[j]->base, &copy));
  Caffe2__OperatorDef *f = (Caffe2__OperatorDef *)copy;
  char *nt = strdup(type), *ny = strdup(y);
  dm_status s = nt && ny ? DM_OK : DM_NOMEM("a fused op");
  if (s == DM_OK)
    s = dm_opdef_set_arg_int(f, "fusion_type", ft);
  if (s == DM_OK && sv)
    s = dm_opdef_add_input(f, sv);
  if (s == DM_OK && act_name)
    s = set_activation(f, act_name, act);
  if (s != DM_OK) {
    free(nt);
    free(ny);
    protobuf_c_message_free_unpacked(copy, NULL);
    return s;
  }
  free(f->type);
  f->type = nt;
  free(f->output[0]);
  f->output[0] = ny;
  protobuf_c_message_free_unpacked(&net->op[j]->base, NULL);
  protobuf_c_message_free_unpacked(&net->op[i]->base, NULL);
  memmove(net->op + j, net->op + j + 1, (i - j - 1) * sizeof *net->op);
  net->op[i - 1] = f;
  memmove(net->op + i, net->op + i + 1, (net->n_op - i - 1) * sizeof *net->op);
  net->n_op--;
  return DM_OK;
}

static void report_post(dm_fusion_summary *sum, size_t *len, size_t i,
                        const Caffe2__OperatorDef *op, const char *why) {
  dm_text_appendf(&sum->report, len, "  op %zu %s '%s' (%s): not fused: %s\n", i, op->type,
                  op->name ? op->name : "", op->n_output ? op->output[0] : "", why);
}

/* The Conv (and S) a Sum or Add at i can take in (NULL: one, at *conv with S at *sv). */
static const char *sum_refusal(const Caffe2__NetDef *net, size_t i, const dm_fusion_opts *o,
                               size_t *conv, const char **sv) {
  const Caffe2__OperatorDef *a = net->op[i];
  if (a->n_input != 2 || a->n_output != 1)
    return "it does not have two operands and one output";
  if (is_type(a, "Add") && dm_opdef_arg_int(a, "broadcast", 0) != 0)
    return "a broadcast Add (only same-shape operands are fused)";
  const char *why = NULL;
  for (int k = 0; k < 2; k++) {
    size_t j = last_writer(net, i, a->input[k]);
    if (j == i || !is_type(net->op[j], "Conv"))
      continue;
    const char *w = conv_refusal(net->op[j]);
    if (!w)
      w = move_refusal(net, j, i, a->output[0], -1, o);
    if (!w) {
      *conv = j;
      *sv = a->input[1 - k];
      return NULL;
    }
    if (!why)
      why = w;
  }
  return why ? why : "neither operand is a Conv's output";
}

/* The op a Relu (or another activation of fused_acts) at i can take in (NULL: one, at
 * *prod, made *type with fusion_type *ft). */
static const char *relu_refusal(const Caffe2__NetDef *net, size_t i, const dm_fusion_opts *o,
                                size_t *prod, const char **type, int64_t *ft) {
  const Caffe2__OperatorDef *r = net->op[i];
  if (r->n_input != 1 || r->n_output != 1)
    return "it does not have the form X -> Y";
  size_t j = last_writer(net, i, r->input[0]);
  if (j == i)
    return "X is not written by an op of the net";
  const Caffe2__OperatorDef *p = net->op[j];
  const char *why = NULL;
  int s_in = -1;
  if (is_type(p, "Conv")) {
    why = conv_refusal(p);
    *type = "ConvFusion", *ft = FUSION_CONV_RELU;
  } else if (is_type(p, "FC") && !is_type(r, "Relu")) {
    return "FCFusion fuses Relu only";
  } else if (is_type(p, "FC")) {
    if (p->n_input != 3 || p->n_output != 1)
      why = "its FC does not have the form X, W, b -> Y";
    *type = "FCFusion", *ft = FUSION_CONV_RELU;
  } else if (is_type(p, "ConvFusion") && dm_opdef_arg_int(p, "fusion_type", 0) == FUSION_CONV_SUM) {
    if (p->n_output != 1 || p->n_input < 3 || p->n_input > 4)
      why = "its ConvFusion does not have the form X, W, [b], S -> Y";
    *type = "ConvFusion", *ft = FUSION_CONV_SUM_RELU, s_in = (int)p->n_input - 1;
  } else {
    return "X is not the output of a Conv, an FC or a Conv + Sum";
  }
  if (!why)
    why = move_refusal(net, j, i, r->output[0], s_in, o);
  *prod = j;
  return why;
}

/* Renames blob `from` to `to` in every op from index `first` on. */
static dm_status rename_from(Caffe2__NetDef *net, size_t first, const char *from, const char *to) {
  for (size_t k = first; k < net->n_op; k++) {
    Caffe2__OperatorDef *op = net->op[k];
    char **lists[2] = {op->input, op->output};
    size_t ns[2] = {op->n_input, op->n_output};
    for (int side = 0; side < 2; side++)
      for (size_t m = 0; m < ns[side]; m++)
        if (strcmp(lists[side][m], from) == 0) {
          char *copy = strdup(to);
          if (!copy)
            return DM_NOMEM("a blob name");
          free(lists[side][m]);
          lists[side][m] = copy;
        }
  }
  return DM_OK;
}

/* A Conv + Sum whose Y is not S gets S copied into Y's buffer before the convolution
 * accumulates onto it (oneDNN's sum post-op): a pass over a large activation per block.
 * When S is made by an earlier op of the net and dies at the fused op (no later op reads
 * or writes it, the caller does not fetch or feed it) and Y is the op's own new blob, Y
 * is renamed S from there on, so that the sum runs in place, onto S's buffer: the ResNet
 * shortcut's usual case. */
static int blob_private(const Caffe2__NetDef *net, const char *b, const dm_fusion_opts *o) {
  return !dm_str_in_list(b, (const char *const *)net->external_output, net->n_external_output) &&
         !dm_str_in_list(b, (const char *const *)net->external_input, net->n_external_input) &&
         !dm_str_in_list(b, o->keep, o->keep ? o->n_keep : 0) &&
         !dm_str_in_list(b, o->fed, o->fed ? o->n_fed : 0);
}

static dm_status sums_in_place(Caffe2__NetDef *net, const dm_fusion_opts *o) {
  for (size_t i = 0; i < net->n_op; i++) {
    Caffe2__OperatorDef *f = net->op[i];
    int64_t ft = dm_opdef_arg_int(f, "fusion_type", 0);
    if (!is_type(f, "ConvFusion") || (ft != FUSION_CONV_SUM && ft != FUSION_CONV_SUM_RELU) ||
        f->n_output != 1 || f->n_input < 3)
      continue;
    const char *y = f->output[0], *sv = f->input[f->n_input - 1];
    /* S must be made by an op before this one at every run: a blob from outside the
     * net (fed, or loaded once by an init net) would be lost for the next run. */
    int ok = strcmp(y, sv) != 0 && blob_private(net, y, o) && blob_private(net, sv, o) &&
             last_writer(net, i, sv) != i;
    for (size_t m = 0; ok && m + 1 < f->n_input; m++)
      ok = strcmp(f->input[m], sv) != 0;
    for (size_t k = 0; ok && k < net->n_op; k++)
      if (k != i)
        ok = !(k > i && (dm_opdef_reads(net->op[k], sv) || dm_opdef_writes(net->op[k], sv))) &&
             !(k < i && (dm_opdef_reads(net->op[k], y) || dm_opdef_writes(net->op[k], y)));
    if (ok) {
      char *from = strdup(y); /* y is op i's string, which the rename replaces */
      dm_status st = from ? rename_from(net, i, from, sv) : DM_NOMEM("a blob name");
      free(from);
      DM_TRY(st);
    }
  }
  return DM_OK;
}

/* The activation y * g(y) is, for the gate op g (NULL: none the pass fuses): Swish for
 * Sigmoid, HardSwish for HardSigmoid with alpha 1/6 and beta 1/2 (ONNX's definition of
 * HardSwish, and how torch exports it below opset 14). */
static const char *gated_activation(const Caffe2__OperatorDef *g) {
  if (is_type(g, "Sigmoid"))
    return "Swish";
  if (!is_type(g, "HardSigmoid"))
    return NULL;
  const Caffe2__Argument *a = dm_opdef_find_arg(g, "alpha"), *b = dm_opdef_find_arg(g, "beta");
  int sixth = a && a->has_f && a->f == (float)(1.0 / 6.0);
  int half = !b || (b->has_f && b->f == 0.5f);
  return sixth && half ? "HardSwish" : NULL;
}

/* Why the Mul at i is not a gated activation over a Conv's output, Conv -> y, g(y) -> s,
 * Mul(y, s) (either order) -> z, that the pass can fuse (NULL: it is not one at all; "":
 * it is, with the Conv at *conv and the gate g at *sig). y is read by the gate and the
 * Mul only, s by the Mul only; neither is fed, fetched or kept; z is a new blob. */
static const char *swish_refusal(const Caffe2__NetDef *net, size_t i, const dm_fusion_opts *o,
                                 size_t *conv, size_t *sig) {
  const Caffe2__OperatorDef *m = net->op[i];
  if (m->n_input != 2 || m->n_output != 1 || strcmp(m->input[0], m->input[1]) == 0)
    return NULL;
  for (int k = 0; k < 2; k++) {
    const char *y = m->input[1 - k], *sv = m->input[k], *z = m->output[0];
    size_t q = last_writer(net, i, sv);
    if (q == i || !gated_activation(net->op[q]) || net->op[q]->n_input != 1 ||
        strcmp(net->op[q]->input[0], y) != 0)
      continue;
    size_t j = last_writer(net, q, y);
    if (j == q || !is_type(net->op[j], "Conv"))
      return "a gated activation (Swish, HardSwish) over a blob that is not a Conv's output";
    const char *why = conv_refusal(net->op[j]);
    if (why)
      return why;
    if (strcmp(z, y) == 0 || strcmp(z, sv) == 0 || strcmp(y, sv) == 0)
      return "a gated activation in place";
    if (!blob_private(net, y, o) || !blob_private(net, sv, o))
      return "the gated activation's intermediate blobs are fed, fetched or kept";
    for (size_t k2 = 0; k2 < net->n_op; k2++) {
      if (k2 != j && k2 != q && k2 != i &&
          (dm_opdef_reads(net->op[k2], y) || dm_opdef_writes(net->op[k2], y) ||
           dm_opdef_reads(net->op[k2], sv) || dm_opdef_writes(net->op[k2], sv)))
        return "the gated activation's intermediate blobs have another reader or writer";
      if (k2 < j && (dm_opdef_reads(net->op[k2], z) || dm_opdef_writes(net->op[k2], z)))
        return "the gated activation's output is an earlier op's blob";
    }
    for (size_t a = 0; a < net->op[j]->n_input; a++) {
      if (strcmp(net->op[j]->input[a], z) == 0)
        return "the fused op's output would be one of its inputs";
      for (size_t b = j + 1; b < i; b++)
        if (dm_opdef_writes(net->op[b], net->op[j]->input[a]))
          return "an op between them writes an input of the Conv (it would read it later)";
    }
    *conv = j, *sig = q;
    return "";
  }
  return NULL;
}

/* Conv -> Sigmoid -> Mul (SiLU) becomes ConvFusion with activation Swish; Conv ->
 * HardSigmoid(1/6, 1/2) -> Mul with activation HardSwish. */
static dm_status swishes(Caffe2__NetDef *net, const dm_fusion_opts *o, dm_fusion_summary *sum,
                         size_t *len) {
  for (size_t i = 0; i < net->n_op;) {
    const Caffe2__OperatorDef *m = net->op[i];
    size_t j = 0, q = 0;
    const char *why = is_type(m, "Mul") ? swish_refusal(net, i, o, &j, &q) : NULL;
    if (!why) { /* not a Swish at all */
      i++;
      continue;
    }
    sum->act_total++;
    if (*why) {
      report_post(sum, len, i, m, why);
      i++;
      continue;
    }
    DM_TRY(fuse_into(net, j, i, "ConvFusion", FUSION_CONV_RELU, m->output[0], NULL,
                     gated_activation(net->op[q]), NULL));
    /* the gate (after the Conv, so one place down now) goes */
    protobuf_c_message_free_unpacked(&net->op[q - 1]->base, NULL);
    memmove(net->op + q - 1, net->op + q, (net->n_op - q) * sizeof *net->op);
    net->n_op--;
    sum->conv_act++;
    i -= 1; /* the fused op is at i - 2; the next op at i - 1 */
  }
  return DM_OK;
}

/* Conv + Sum/Add first (so that a Relu after the sum joins it), then the Swishes (Conv +
 * Sigmoid + Mul, before their Sigmoid is taken for a lone activation), then the Relus and
 * the other activations. */
static dm_status post_ops(Caffe2__NetDef *net, const dm_fusion_opts *o, dm_fusion_summary *sum,
                          size_t *len) {
  for (size_t i = 0; i < net->n_op;) {
    const Caffe2__OperatorDef *a = net->op[i];
    if (!is_type(a, "Sum") && !is_type(a, "Add")) {
      i++;
      continue;
    }
    sum->post_total++;
    size_t j = 0;
    const char *sv = NULL, *why = sum_refusal(net, i, o, &j, &sv);
    if (why) {
      report_post(sum, len, i, a, why);
      i++;
      continue;
    }
    DM_TRY(fuse_into(net, j, i, "ConvFusion", FUSION_CONV_SUM, a->output[0], sv, NULL, NULL));
    sum->conv_sum++; /* op i is gone: the next op is at i */
  }
  DM_TRY(swishes(net, o, sum, len)); /* before the Sigmoids are taken as activations */
  for (size_t i = 0; i < net->n_op;) {
    const Caffe2__OperatorDef *r = net->op[i];
    int relu = is_type(r, "Relu");
    if (!relu && !is_fused_act(r)) {
      i++;
      continue;
    }
    *(relu ? &sum->post_total : &sum->act_total) += 1;
    size_t j = 0;
    const char *type = NULL;
    int64_t ft = 0;
    const char *why = relu_refusal(net, i, o, &j, &type, &ft);
    if (why) {
      report_post(sum, len, i, r, why);
      i++;
      continue;
    }
    DM_TRY(fuse_into(net, j, i, type, ft, r->output[0], NULL, relu ? NULL : r->type, r));
    *(!relu ? &sum->conv_act
      : ft == FUSION_CONV_SUM_RELU ? &sum->conv_sum_relu
      : strcmp(type, "FCFusion") == 0 ? &sum->fc_relu : &sum->conv_relu) += 1;
  }
  return sums_in_place(net, o);
}

dm_status dm_fusion_pass(Caffe2__NetDef *net, const dm_fusion_opts *o,
                         Caffe2__NetDef *init_add, dm_fusion_summary *sum) {
  static const dm_fusion_opts none = {0};
  memset(sum, 0, sizeof *sum);
  if (!net || !init_add)
    return dm_error(DM_ERR_INVALID, "dm_fusion_pass: NULL argument");
  if (!o)
    o = &none;
  for (size_t i = 0; i < net->n_op; i++)
    if (net->op[i]->is_gradient_op)
      return dm_error(DM_ERR_INVALID, "the fusion pass is for inference nets, and op %zu "
                      "('%s') is a gradient op", i, net->op[i]->type ? net->op[i]->type : "");
  size_t len = 0;
  for (size_t i = 0; i < net->n_op;) {
    const Caffe2__OperatorDef *bn = net->op[i];
    if (!bn->type || strcmp(bn->type, "SpatialBN") != 0) {
      i++;
      continue;
    }
    sum->bn_total++;
    size_t j = 0;
    const char *why = refusal(net, i, o, &j);
    if (why) {
      dm_text_appendf(&sum->report, &len, "  op %zu SpatialBN '%s' (%s): not folded: %s\n", i,
                      bn->name ? bn->name : "", bn->n_output ? bn->output[0] : "", why);
      i++;
      continue;
    }
    DM_TRY(fold(net, i, j, init_add, o, sum)); /* removes op i: the next op is at i */
  }
  return o->post_ops ? post_ops(net, o, sum, &len) : DM_OK;
}
