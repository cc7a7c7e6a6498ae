/* run_inputs.c: see run_inputs.h. */
#include "run_inputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/netdef_build.h"

static void free_list(char **v, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
}

/* net's inputs (read before written), in the order first read. */
static dm_status net_inputs(const Caffe2__NetDef *net, char ***in, size_t *n_in) {
  char **written = NULL;
  size_t n_written = 0;
  dm_status s = DM_OK;
  for (size_t i = 0; i < net->n_op && s == DM_OK; i++) {
    const Caffe2__OperatorDef *op = net->op[i];
    for (size_t k = 0; k < op->n_input && s == DM_OK; k++) {
      const char *b = op->input[k];
      if (!dm_str_in_list(b, (const char *const *)written, n_written) &&
          !dm_str_in_list(b, (const char *const *)*in, *n_in))
        s = dm_strv_push(in, n_in, b);
    }
    for (size_t k = 0; k < op->n_output && s == DM_OK; k++)
      if (!dm_str_in_list(op->output[k], (const char *const *)written, n_written))
        s = dm_strv_push(&written, &n_written, op->output[k]);
  }
  free_list(written, n_written);
  return s;
}

static int made_by(const char *blob, const Caffe2__NetDef *const *inits, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (size_t o = 0; inits[i] && o < inits[i]->n_op; o++)
      if (dm_str_in_list(blob, (const char *const *)inits[i]->op[o]->output,
                         inits[i]->op[o]->n_output))
        return 1;
  return 0;
}

/* The inputs nothing makes (the ones to feed), comma-separated, into buf. */
static void list_feedable(char *const *in, size_t n_in, const Caffe2__NetDef *const *inits,
                          size_t n_inits, char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n_in && at < cap; i++)
    if (!made_by(in[i], inits, n_inits)) {
      int w = snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", in[i]);
      at += w > 0 ? (size_t)w : 0;
    }
  if (!buf[0])
    snprintf(buf, cap, "none (the init net makes every blob it reads)");
}

/* Whether any op of net reads or writes blob. */
static int mentions(const Caffe2__NetDef *net, const char *blob) {
  for (size_t i = 0; i < net->n_op; i++)
    if (dm_str_in_list(blob, (const char *const *)net->op[i]->input, net->op[i]->n_input) ||
        dm_str_in_list(blob, (const char *const *)net->op[i]->output, net->op[i]->n_output))
      return 1;
  return 0;
}

dm_status dm_run_check_fed(const Caffe2__NetDef *net, const Caffe2__NetDef *const *inits,
                           size_t n_inits, const char *const *fed, size_t n_fed) {
  for (size_t i = 0; i < n_fed; i++) {
    if (mentions(net, fed[i]) ||
        dm_str_in_list(fed[i], (const char *const *)net->external_input, net->n_external_input))
      continue;
    char **in = NULL, list[512];
    size_t n_in = 0;
    DM_TRY(net_inputs(net, &in, &n_in));
    list_feedable(in, n_in, inits, n_inits, list, sizeof list);
    free_list(in, n_in);
    return dm_error(DM_ERR_NOT_FOUND,
                    "--input '%s': the net has no blob '%s'; the inputs to feed are: %s",
                    fed[i], fed[i], list);
  }
  return DM_OK;
}

void dm_run_missing_hint(const Caffe2__NetDef *net, const Caffe2__NetDef *const *inits,
                         size_t n_inits, const char *const *fed, size_t n_fed, char *buf,
                         size_t cap) {
  buf[0] = '\0';
  char **in = NULL;
  size_t n_in = 0;
  if (net_inputs(net, &in, &n_in) != DM_OK) {
    free_list(in, n_in);
    return;
  }
  int have_init = 0;
  for (size_t i = 0; i < n_inits; i++)
    have_init = have_init || inits[i];
  for (size_t i = 0; i < n_in && !buf[0]; i++) {
    if (dm_str_in_list(in[i], fed, n_fed) || made_by(in[i], inits, n_inits))
      continue;
    if (have_init)
      snprintf(buf, cap, "the net reads '%s', which the init net does not make: feed it "
               "(--input %s=FILE.npy), or check that --init is this net's", in[i], in[i]);
    else
      snprintf(buf, cap, "the net reads '%s', which nothing makes or feeds: pass --init with "
               "the net's init net (it makes the weights), or --input %s=FILE.npy", in[i], in[i]);
  }
  free_list(in, n_in);
}
