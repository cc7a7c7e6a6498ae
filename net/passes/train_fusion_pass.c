/* train_fusion_pass.c: the training fusion pass (see net/passes/train_fusion_pass.h): training-mode SpatialBN
 * (+ Sum/Add with Z) + Relu made SpatialBNRelu / SpatialBNAddRelu, Conv + Relu made
 * ConvFusion (fusion_type 1) and FC + Relu FCFusion, before the gradient pass. */
#include "net/passes/train_fusion_pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/netdef_build.h"

void dm_train_fusion_summary_free(dm_train_fusion_summary *s) {
  if (!s)
    return;
  free(s->report);
  memset(s, 0, sizeof *s);
}

static int is_type(const Caffe2__OperatorDef *op, const char *type) {
  return op->type && strcmp(op->type, type) == 0;
}

static int touches(const Caffe2__OperatorDef *op, const char *name) {
  return dm_opdef_reads(op, name) || dm_opdef_writes(op, name);
}

/* The first op after `from` that reads or writes `name`, or n_op. */
static size_t first_use(const Caffe2__NetDef *net, size_t from, const char *name) {
  size_t k = from + 1;
  while (k < net->n_op && !touches(net->op[k], name))
    k++;
  return k;
}

/* One match: the head op (BN, Conv or FC) at j, the Sum/Add at a (BN with add only), the
 * Relu at r; the head's Y t, the sum s (t without add), Z, the Relu's output y. bn: the
 * head is a BN (its outputs past Y are its statistics). */
typedef struct pattern {
  size_t j, a, r;
  int add, bn;
  const char *t, *s, *z, *y;
} pattern;

static int in_pattern(const pattern *p, size_t k) {
  return k == p->j || k == p->r || (p->add && k == p->a);
}

/* Why the matched pattern cannot be fused (NULL: it can), written into why[cap]. The
 * rules are the same for every head: the fused op reads the head's inputs and writes its
 * outputs (Y being the Relu's) where the Relu was. */
static const char *check(const Caffe2__NetDef *net, const pattern *p,
                         const dm_train_fusion_opts *o, char *why, size_t cap) {
  const Caffe2__OperatorDef *h = net->op[p->j];
  const char *hd = p->bn ? "BN" : h->type, *mids = p->bn ? "the BN's Y or the sum" : "Y";
  const char *mid[2] = {p->t, p->add && strcmp(p->s, p->t) != 0 ? p->s : NULL};
  for (int m = 0; m < 2; m++) {
    if (!mid[m] || strcmp(mid[m], p->y) == 0)
      continue; /* the Relu's output is the fused op's: checked below */
    if (dm_str_in_list(mid[m], (const char *const *)net->external_output,
                       net->n_external_output) ||
        dm_str_in_list(mid[m], o->keep, o->keep ? o->n_keep : 0)) {
      snprintf(why, cap, "an intermediate blob (%s) is fetched (an external output or kept)",
               mids);
      return why;
    }
    if (dm_str_in_list(mid[m], o->fed, o->fed ? o->n_fed : 0)) {
      snprintf(why, cap, "an intermediate blob (%s) is fed at each run", mids);
      return why;
    }
    for (size_t k = 0; k < net->n_op; k++)
      if (!in_pattern(p, k) && touches(net->op[k], mid[m])) {
        snprintf(why, cap, "an intermediate blob (%s) has another reader or writer", mids);
        return why;
      }
  }
  for (size_t i = 0; i < h->n_input; i++)
    if (strcmp(p->y, h->input[i]) == 0) {
      snprintf(why, cap, "the Relu's output is one of the %s's inputs", hd);
      return why;
    }
  for (size_t i = 1; i < h->n_output; i++)
    if (strcmp(p->y, h->output[i]) == 0)
      return "the Relu's output is one of the BN's statistics outputs";
  for (size_t k = p->j + 1; k < p->r; k++) {
    const Caffe2__OperatorDef *op = net->op[k];
    if (in_pattern(p, k))
      continue;
    /* Before the Sum, Z (the Relu's output over Z) may still be made or read. */
    if (touches(op, p->y) && !(p->add && k < p->a && strcmp(p->y, p->z) == 0)) {
      snprintf(why, cap, "an op between the %s and the Relu reads or writes the Relu's output",
               hd);
      return why;
    }
    for (size_t i = 0; i < h->n_input; i++)
      if (dm_opdef_writes(op, h->input[i])) {
        snprintf(why, cap, "an op between the %s and the Relu writes one of the %s's inputs",
                 hd, hd);
        return why;
      }
    for (size_t i = 1; i < h->n_output; i++)
      if (touches(op, h->output[i]))
        return "an op between the BN and the Relu reads or writes one of the BN's statistics "
               "outputs";
    if (p->add && k > p->a && dm_opdef_writes(op, p->z))
      return "an op between the Sum/Add and the Relu writes Z";
  }
  return NULL;
}

/* The reasons whose report names the op they are about (p->r: its index). */
static const char *const read_by_other = "Y is read first by an op other than a Relu, Sum or Add";
static const char *const sum_read_by_other = "the sum is read first by an op other than a Relu";

/* Matches the pattern from the training BN at j (NULL: *p is one; else why not). */
static const char *match(const Caffe2__NetDef *net, size_t j, pattern *p) {
  const Caffe2__OperatorDef *bn = net->op[j];
  if (bn->n_input != 5 || bn->n_output != 5)
    return "it does not have the training form X, scale, bias, mean, var -> Y, running_mean, "
           "running_var, saved_mean, saved_inv_std";
  memset(p, 0, sizeof *p);
  p->bn = 1;
  p->j = p->a = j;
  p->t = p->s = bn->output[0];
  size_t k = first_use(net, j, p->t);
  if (k == net->n_op || !dm_opdef_reads(net->op[k], p->t))
    return "Y is not read by a later op before it is written again";
  const Caffe2__OperatorDef *op = net->op[k];
  if (is_type(op, "Sum") || is_type(op, "Add")) {
    if (op->n_input != 2 || op->n_output != 1)
      return "the Sum/Add reading Y does not have two operands and one output";
    if (is_type(op, "Add") && dm_opdef_arg_int(op, "broadcast", 0) != 0)
      return "the Add reading Y broadcasts (only same-shape operands are fused)";
    if (strcmp(op->input[0], op->input[1]) == 0)
      return "the Sum/Add adds Y to itself";
    p->add = 1;
    p->a = k;
    p->s = op->output[0];
    p->z = op->input[strcmp(op->input[0], p->t) == 0 ? 1 : 0];
    k = first_use(net, k, p->s);
    if (k == net->n_op || !dm_opdef_reads(net->op[k], p->s))
      return "the sum is not read by a later op before it is written again";
    op = net->op[k];
    p->r = k;
    if (!is_type(op, "Relu"))
      return sum_read_by_other;
  } else if (!is_type(op, "Relu")) {
    p->r = k;
    return read_by_other;
  }
  if (op->n_input != 1 || op->n_output != 1)
    return "the Relu does not have the form X -> Y";
  p->r = k;
  p->y = op->output[0];
  return NULL;
}

/* Matches Conv/FC + Relu from the head at j: 1 when the head's Y is read first by a Relu
 * (*p filled), 0 when not (nothing to report: most Convs feed a BN). */
static int match_relu(const Caffe2__NetDef *net, size_t j, pattern *p) {
  const Caffe2__OperatorDef *h = net->op[j];
  if (h->n_output != 1 || h->n_input < 2 || h->n_input > 3 ||
      (is_type(h, "FC") && h->n_input != 3))
    return 0; /* not a form ConvFusion / FCFusion takes (the schemas refuse it anyway) */
  memset(p, 0, sizeof *p);
  p->j = p->a = j;
  p->t = p->s = h->output[0];
  size_t k = first_use(net, j, p->t);
  if (k == net->n_op || !is_type(net->op[k], "Relu") || net->op[k]->n_input != 1 ||
      net->op[k]->n_output != 1 || strcmp(net->op[k]->input[0], p->t) != 0)
    return 0;
  p->r = k;
  p->y = net->op[k]->output[0];
  return 1;
}

static int used(const Caffe2__NetDef *net, const char *name) {
  for (size_t i = 0; i < net->n_op; i++)
    if (touches(net->op[i], name))
      return 1;
  return dm_str_in_list(name, (const char *const *)net->external_input, net->n_external_input) ||
         dm_str_in_list(name, (const char *const *)net->external_output, net->n_external_output);
}

/* Replaces the pattern by the fused op at the Relu's place. The op is built on a copy of
 * the BN first, so on failure the net is unchanged. */
static dm_status fuse(Caffe2__NetDef *net, const pattern *p) {
  ProtobufCMessage *copy = NULL;
  DM_TRY(dm_pb_clone(&net->op[p->j]->base, &copy));
  Caffe2__OperatorDef *f = (Caffe2__OperatorDef *)copy;
  size_t len = strlen(p->t) + 32;
  const char *ft = p->bn ? (p->add ? "SpatialBNAddRelu" : "SpatialBNRelu")
                   : is_type(f, "FC") ? "FCFusion" : "ConvFusion";
  char *type = strdup(ft), *y = strdup(p->y);
  char *reserve = p->bn ? malloc(len) : NULL;
  dm_status s = type && y && (reserve || !p->bn) ? DM_OK : DM_NOMEM("a fused op");
  if (s == DM_OK && !p->bn)
    s = dm_opdef_set_arg_int(f, "fusion_type", 1); /* IDEEP's FUSION_CONV_RELU */
  if (s == DM_OK && p->bn) {
    snprintf(reserve, len, "%s_reserve", p->t);
    for (unsigned n = 1; used(net, reserve); n++)
      snprintf(reserve, len, "%s_reserve_%u", p->t, n);
    s = dm_opdef_add_output(f, reserve);
  }
  if (s == DM_OK && p->add)
    s = dm_opdef_add_input(f, p->z);
  free(reserve);
  if (s != DM_OK) {
    free(type);
    free(y);
    protobuf_c_message_free_unpacked(copy, NULL);
    return s;
  }
  free(f->type);
  f->type = type;
  free(f->output[0]);
  f->output[0] = y;
  protobuf_c_message_free_unpacked(&net->op[p->r]->base, NULL);
  net->op[p->r] = f;
  size_t gone[2] = {p->add ? p->a : p->j, p->j}; /* the later first */
  for (int g = 0; g < (p->add ? 2 : 1); g++) {
    protobuf_c_message_free_unpacked(&net->op[gone[g]]->base, NULL);
    memmove(net->op + gone[g], net->op + gone[g] + 1,
            (net->n_op - gone[g] - 1) * sizeof *net->op);
    net->n_op--;
  }
  return DM_OK;
}

dm_status dm_train_fusion_pass(Caffe2__NetDef *net, const dm_train_fusion_opts *o,
                               dm_train_fusion_summary *sum) {
  static const dm_train_fusion_opts none = {0};
  memset(sum, 0, sizeof *sum);
  if (!net)
    return dm_error(DM_ERR_INVALID, "dm_train_fusion_pass: NULL argument");
  if (!o)
    o = &none;
  for (size_t i = 0; i < net->n_op; i++)
    if (net->op[i]->is_gradient_op)
      return dm_error(DM_ERR_INVALID, "the training fusion pass runs before the gradient pass, "
                      "and op %zu ('%s') is a gradient op", i,
                      net->op[i]->type ? net->op[i]->type : "");
  size_t len = 0;
  char buf[160];
  for (size_t i = 0; i < net->n_op;) {
    const Caffe2__OperatorDef *h = net->op[i];
    pattern p;
    const char *why;
    if (is_type(h, "Conv") || is_type(h, "FC")) {
      if (!match_relu(net, i, &p)) {
        i++;
        continue;
      }
      if ((why = check(net, &p, o, buf, sizeof buf))) {
        dm_text_appendf(&sum->report, &len, "  op %zu %s '%s' (%s): not fused with its Relu: "
                        "%s\n", i, h->type, h->name ? h->name : "", h->output[0], why);
        i++;
        continue;
      }
      int fc = is_type(h, "FC");
      DM_TRY(fuse(net, &p)); /* op i is gone: the next op is at i */
      *(fc ? &sum->fc_relu : &sum->conv_relu) += 1;
      continue;
    }
    if (!is_type(h, "SpatialBN") || dm_opdef_arg_int(h, "is_test", 0) != 0) {
      i++;
      continue;
    }
    sum->bn_total++;
    why = match(net, i, &p);
    if (!why)
      why = check(net, &p, o, buf, sizeof buf);
    if (why) {
      dm_text_appendf(&sum->report, &len, "  op %zu SpatialBN '%s' (%s): not fused: %s", i,
                      h->name ? h->name : "", h->n_output ? h->output[0] : "", why);
      if (why == read_by_other || why == sum_read_by_other)
        dm_text_appendf(&sum->report, &len, " (op %zu, %s)", p.r,
                        net->op[p.r]->type ? net->op[p.r]->type : "");
      dm_text_appendf(&sum->report, &len, "\n");
      i++;
      continue;
    }
    DM_TRY(fuse(net, &p)); /* op i is gone: the next op is at i */
    *(p.add ? &sum->bn_add_relu : &sum->bn_relu) += 1;
  }
  return DM_OK;
}
