/* shared_fetch_host.c: the calls the Python package (python/demitasse) is built on, seen
 * through <demitasse.h> only: dm_workspace_fetch_shared (no copy, outlives the blob and
 * the workspace, keeps its values when a run or a feed writes the blob again),
 * dm_net_destroy (a net run once and freed, its blobs kept) and dm_netdef_add_gradient
 * (the gradient pass on a NetDef in memory). */
#include <demitasse.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "host_expect.h"

/* Scale(x) -> y, as text: y = 2 x. */
static const char *scale_net = "name: \"scale\"\n"
                               "op { type: \"Scale\" input: \"x\" output: \"y\"\n"
                               "     arg { name: \"scale\" f: 2 } }\n";

static void fetch_shared(void) {
  dm_workspace *ws = NULL;
  if (dm_workspace_create(&ws) != DM_OK) {
    EXPECT(0, "dm_workspace_create");
    return;
  }
  int64_t dims[1] = {3};
  float x[3] = {1, 2, 3};
  EXPECT(dm_workspace_feed(ws, "x", DM_FLOAT, 1, dims, x) == DM_OK, "feed x");
  dm_tensor *snap = NULL;
  EXPECT(dm_workspace_fetch_shared(ws, "x", &snap) == DM_OK, "fetch_shared x");
  const dm_tensor *blob = NULL;
  dm_workspace_fetch(ws, "x", &blob);
  EXPECT(dm_tensor_data(snap) == dm_tensor_data(blob), "no copy: the blob's own data");
  /* A feed of the same size must not write into the shared storage. */
  float x2[3] = {7, 8, 9};
  EXPECT(dm_workspace_feed(ws, "x", DM_FLOAT, 1, dims, x2) == DM_OK, "feed x again");
  EXPECT(((const float *)dm_tensor_data(snap))[0] == 1, "the fetched values kept");
  dm_workspace_fetch(ws, "x", &blob);
  EXPECT(((const float *)dm_tensor_data(blob))[0] == 7, "the blob has the new values");
  dm_tensor_destroy(snap);

  /* A run that writes the blob again likewise; then the net is destroyed, the blob kept. */
  dm_net *net = NULL;
  EXPECT(dm_workspace_create_net_bytes(ws, scale_net, strlen(scale_net), 1, &net) == DM_OK,
         "create scale");
  EXPECT(dm_net_run(net) == DM_OK, "run scale");
  dm_tensor *y = NULL;
  EXPECT(dm_workspace_fetch_shared(ws, "y", &y) == DM_OK, "fetch_shared y");
  EXPECT(dm_workspace_feed(ws, "x", DM_FLOAT, 1, dims, x) == DM_OK, "feed x once more");
  EXPECT(dm_net_run(net) == DM_OK, "run scale again");
  EXPECT(dm_net_destroy(net) == DM_OK, "dm_net_destroy");
  EXPECT(dm_workspace_has_blob(ws, "y"), "y stays after its net is destroyed");
  EXPECT(dm_net_destroy(NULL) == DM_OK, "dm_net_destroy(NULL)");
  EXPECT(dm_workspace_fetch_shared(ws, "nope", &snap) == DM_ERR_NOT_FOUND && !snap,
         "a missing blob");
  EXPECT(dm_workspace_fetch_shared(NULL, "x", &snap) == DM_ERR_INVALID &&
             strstr(dm_last_error(), "ws"), "NULL ws named");
  EXPECT(dm_workspace_fetch_shared(ws, "", &snap) == DM_ERR_INVALID, "an empty name");
  /* The fetched tensor outlives its workspace, with the values of the first run. */
  dm_workspace_destroy(ws);
  const float *yv = dm_tensor_data(y);
  EXPECT(dm_tensor_numel(y) == 3 && yv[0] == 14 && yv[2] == 18,
         "y after the workspace: %g %g", yv ? yv[0] : -1.0, yv ? yv[2] : -1.0);
  dm_tensor_destroy(y);
  dm_tensor_destroy(NULL);
}

/* Scale(x) -> loss is an 18-byte binary NetDef written by hand (field 2: op; op field 1:
 * input, 2: output, 4: type). */
static void add_gradient(void) {
  static const uint8_t net[] = {0x12, 0x10, 0x0a, 0x01, 'x',  0x12, 0x04, 'l', 'o', 's',
                                's',  0x22, 0x05, 'S',  'c',  'a',  'l',  'e'};
  const char *losses[1] = {"loss"};
  void *out = NULL;
  size_t n = 0;
  EXPECT(dm_netdef_add_gradient(net, sizeof net, losses, 1, &out, &n) == DM_OK, "gradient");
  /* The backward net names the seed and X's gradient. */
  EXPECT(out && memmem(out, n, "loss_autogen_grad", 17) && memmem(out, n, "x_grad", 6),
         "the gradient ops are there (%zu bytes)", n);
  dm_free(out);
  EXPECT(dm_netdef_add_gradient(net, sizeof net, losses, 0, &out, &n) == DM_ERR_INVALID,
         "no losses");
  EXPECT(dm_netdef_add_gradient(net, 0, losses, 1, &out, &n) == DM_ERR_PARSE, "0 bytes");
  static const uint8_t junk[] = {0xff, 0xff, 0xff};
  EXPECT(dm_netdef_add_gradient(junk, sizeof junk, losses, 1, &out, &n) == DM_ERR_PARSE && !out,
         "junk bytes");
  const char *nobody[1] = {"nobody"};
  EXPECT(dm_netdef_add_gradient(net, sizeof net, nobody, 1, &out, &n) != DM_OK && !out,
         "a loss no op writes");
  dm_free(NULL);
}

int main(void) {
  fetch_shared();
  add_gradient();
  if (failures)
    fprintf(stderr, "%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
