/* op_message.c: a kernel's error message made to name the op's blobs.
 *
 * Kernels and shape inference write their messages with the slot names their schema's
 * doc uses ("X, W (M x C/group x kH x kW), [b (M)] -> Y": "W is 3-D; Conv takes a 4-D
 * filter"). A user knows the net by its blob names, and a net has many Convs, so the
 * message ends naming the blob of each slot it mentions ("(W is blob 'conv2_w')"). The
 * slot names are read from the doc once per message, so every op, a plugin's included,
 * gets this without editing its messages. A DOUBLE or integer blob where a float is
 * wanted also gets the NumPy conversion that fixes it, since a float64 .npy is the usual
 * way such a blob arrives.
 */
#include "op_message.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define MAX_SLOTS 32
#define MAX_SLOT_NAME 32

typedef struct slot {
  char name[MAX_SLOT_NAME];
  int output; /* 0: input slot, 1: output slot */
  int index;
} slot;

static int ident(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Skips a parenthesised group at p (nested), returning the character after it. */
static const char *skip_parens(const char *p) {
  int depth = 0;
  for (; *p; p++) {
    if (*p == '(')
      depth++;
    else if (*p == ')' && --depth <= 0)
      return p + 1;
  }
  return p;
}

/* The slot names of a doc "A, B (..), [c] -> Y, [Z (..)]: prose". An item is a name,
 * optionally followed by a parenthesised note and brackets; the first item that is not
 * (prose such as "Y = X W^T + b") ends that side's list. Returns the number found. */
static int doc_slots(const char *doc, slot *out, int cap) {
  int n = 0;
  const char *arrow = strstr(doc, "->");
  for (int side = 0; side < 2 && n < cap; side++) {
    const char *p = side ? (arrow ? arrow + 2 : NULL) : doc;
    if (!p)
      break;
    for (int index = 0; n < cap; index++) {
      while (*p == ' ' || *p == '[')
        p++;
      if (side == 0 && p == arrow)
        break;
      const char *s = p;
      while (ident(*p))
        p++;
      size_t len = (size_t)(p - s);
      while (*p == ' ')
        p++;
      if (*p == '(')
        p = skip_parens(p);
      while (*p == ']' || *p == ' ')
        p++;
      int bare = len > 0 && len < MAX_SLOT_NAME && isalpha((unsigned char)*s) &&
                 (*p == ',' || *p == '\0' || *p == ';' || *p == '.' || *p == ':' ||
                  (p[0] == '-' && p[1] == '>'));
      if (bare) {
        memcpy(out[n].name, s, len);
        out[n].name[len] = '\0';
        out[n].output = side;
        out[n].index = index;
        n++;
      }
      if (bare && *p == ',') {
        p++;
        continue;
      }
      if (side == 1 || !arrow)
        break; /* the outputs end at the first non-name, and so do inputs without "->" */
      /* "X0, X1, ... (same shape)": skip to the next item or the arrow */
      while (*p && *p != ',' && p != arrow)
        p++;
      if (p == arrow)
        break;
      if (*p == ',')
        p++;
      else
        break;
    }
  }
  return n;
}

/* The blob bound to a slot, or NULL where this op has no such slot. */
static const dm_blob *slot_blob(const dm_op_ctx *ctx, const slot *s) {
  /* an op still being instantiated may have its blob arrays partly filled */
  if (s->output)
    return ctx->out && s->index < ctx->n_out ? ctx->out[s->index] : NULL;
  return ctx->in && s->index < ctx->n_in ? ctx->in[s->index] : NULL;
}

/* Appends printf-style text to buf at *k, truncating at cap. */
static void put(char *buf, size_t cap, size_t *k, const char *text, size_t len) {
  if (*k + 1 >= cap)
    return;
  if (len > cap - 1 - *k)
    len = cap - 1 - *k;
  memcpy(buf + *k, text, len);
  *k += len;
  buf[*k] = '\0';
}

/* Is the quote at msg[i] a quotation mark rather than an apostrophe ("B's")? */
static int is_quote(const char *msg, size_t i) {
  return msg[i] == '\'' && !(i > 0 && ident(msg[i - 1]) && ident(msg[i + 1]));
}

/* Copies msg, then names the blob of each slot it mentions, in the order of mention:
 * "W is 2x3x3; ..." + " (W is blob 'conv1_filter')". Appended rather than inserted, so
 * the kernel's own sentence stays as written (and as tests and users grep for it).
 * Skipped: words inside quotes (blob names the kernel gave), slots already followed by
 * their name ("X0 'a'"), and blobs named like their slot. */
static void name_slots(const dm_op_ctx *ctx, const char *msg, char *out, size_t cap) {
  slot slots[MAX_SLOTS];
  int n = ctx->schema && ctx->schema->doc ? doc_slots(ctx->schema->doc, slots, MAX_SLOTS) : 0;
  unsigned long named = 0; /* bit i: slot i already named */
  size_t k = 0;
  int quoted = 0, listed = 0;
  out[0] = '\0';
  put(out, cap, &k, msg, strlen(msg));
  for (size_t i = 0; msg[i];) {
    if (is_quote(msg, i))
      quoted = !quoted;
    if (quoted || !ident(msg[i]) || (i > 0 && ident(msg[i - 1]))) {
      i++;
      continue;
    }
    size_t len = 0;
    while (ident(msg[i + len]))
      len++;
    int already = msg[i + len] == ' ' && msg[i + len + 1] == '\''; /* "X0 'a'" */
    for (int s = 0; s < n; s++) {
      const dm_blob *b = slot_blob(ctx, &slots[s]);
      if ((named >> s & 1) || !b || strlen(slots[s].name) != len ||
          memcmp(slots[s].name, msg + i, len) != 0)
        continue;
      named |= 1ul << s;
      if (already || strcmp(b->name, slots[s].name) == 0)
        break;
      put(out, cap, &k, listed ? ", " : " (", 2);
      put(out, cap, &k, slots[s].name, len);
      put(out, cap, &k, " is blob '", 10);
      put(out, cap, &k, b->name, strlen(b->name));
      put(out, cap, &k, "'", 1);
      listed = 1;
      break;
    }
    i += len;
  }
  if (listed)
    put(out, cap, &k, ")", 1);
}

/* The NumPy fix for a blob whose dtype a float op refuses: a float64 input anywhere, or
 * an integer first input (X) where the message asks for FLOAT. */
static void dtype_hint(const dm_op_ctx *ctx, dm_status s, const char *msg, char *out,
                       size_t cap) {
  size_t k = strlen(out);
  if (s != DM_ERR_TYPE)
    return;
  for (int i = 0; ctx->in && i < ctx->n_in; i++) {
    const dm_blob *b = ctx->in[i];
    if (!b)
      continue;
    dm_dtype t = b->tensor ? b->tensor->dtype : DM_UNDEFINED;
    int integer = t == DM_INT64 || t == DM_INT32 || t == DM_INT16 || t == DM_INT8 ||
                  t == DM_UINT8 || t == DM_UINT16;
    if (t != DM_DOUBLE && !(i == 0 && integer && strstr(msg, "FLOAT")))
      continue;
    char hint[512];
    int len = snprintf(hint, sizeof hint,
                       " (blob '%s' is %s; if it came from a NumPy array x, save "
                       "x.astype(np.float32) instead)",
                       b->name, t == DM_DOUBLE ? "float64 (DOUBLE)" : dm_dtype_name(t));
    if (len > 0)
      put(out, cap, &k, hint, (size_t)len < sizeof hint ? (size_t)len : sizeof hint - 1);
    return;
  }
}

void dm_op_message_annotate(const dm_op_ctx *ctx, dm_status s, const char *msg, char *out,
                            size_t cap) {
  if (!cap)
    return;
  name_slots(ctx, msg, out, cap);
  dtype_hint(ctx, s, msg, out, cap);
}
