#!/bin/sh
# install_test.sh: checks that an installed Demitasse is usable through pkg-config alone.
# It runs `meson install --destdir TMP` for the build under test, then, with nothing but
# `pkg-config --cflags --libs demitasse` (PKG_CONFIG_SYSROOT_DIR=TMP maps the installed
# prefix into TMP; no -I or -L into the source or build tree):
#  (a) builds README.md's embedding example and runs it against the installed
#      libdemitasse.so on a tiny net (FC 784 -> 10, Softmax) written here and converted to
#      .pb by the installed CLI, checking `prob` against a softmax computed in double;
#  (b) builds tests/plugins/swish_plugin.c as a plugin (--cflags only, as README says: a
#      plugin leaves the dm_* symbols to its host) and a host linked with --libs that
#      loads it with dm_plugin_load and runs a one-op Swish net;
#  (c) builds the plugin README shows (the first ```c block under "## Writing an
#      operator plugin", as it stands) and runs it through the same host.
#
# README extraction: the FIRST ```c block under "## Embedding" (up to the next "## "
# heading) is the example. Only the first: later blocks there may be other examples
# needing other nets. A fragment (no main) is wrapped: its #include lines go to the top,
# the rest becomes the body of a function, after definitions of what the fragment
# assumes the host has (`pixels`, 784 floats, and `use(data, numel)`). A block with its
# own main() is built as it is and run with the net files in its working directory. No
# block, or one that does not compile or run, fails the test: README must stay true.
#
# usage: install_test.sh BUILDDIR SOURCEDIR PREFIX LIBDIR BINDIR SANITIZE MESON CC...
#   LIBDIR and BINDIR absolute (as installed, before DESTDIR); SANITIZE is b_sanitize
#   ("none" or e.g. "address,undefined": a host of a sanitized library must link the
#   sanitizer runtime first); CC is the compiler command, possibly several words.
# Exit 77 (skipped) only when cc or pkg-config is missing.
set -u
build=$1 src=$2 prefix=$3 libdir=$4 bindir=$5 sanitize=$6 meson=$7
shift 7
CC=${*:-cc}

command -v pkg-config >/dev/null 2>&1 || { echo "SKIP: no pkg-config (./setup.sh installs it)"; exit 77; }
set -- $CC
command -v "$1" >/dev/null 2>&1 || { echo "SKIP: no C compiler ($1)"; exit 77; }

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
dest=$T/dest

# ---------------------------------------------------------------- install
"$meson" install -C "$build" --no-rebuild --destdir "$dest" --quiet >"$T/install.log" 2>&1 ||
  { cat "$T/install.log"; fail "meson install --destdir failed"; }
for f in "$libdir/libdemitasse.so" "$bindir/demitasse"; do
  [ -e "$dest$f" ] || fail "not installed: $f"
done
pc=$(find "$dest" -name demitasse.pc | head -1)
[ -n "$pc" ] || fail "no demitasse.pc installed under $prefix"
echo "installed: $(cd "$dest" && find . -name 'demitasse*' -o -name 'libdemitasse*' | sort | tr '\n' ' ')"

# pkg-config sees only the installed tree. The ALLOW_SYSTEM_* variables keep pkgconf from
# dropping flags that name system directories (prefix=/usr) before the sysroot applies.
PKG_CONFIG_PATH=$(dirname "$pc")
PKG_CONFIG_LIBDIR=$PKG_CONFIG_PATH
PKG_CONFIG_SYSROOT_DIR=$dest
PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1
PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
export PKG_CONFIG_PATH PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_ALLOW_SYSTEM_CFLAGS PKG_CONFIG_ALLOW_SYSTEM_LIBS
cflags=$(pkg-config --cflags demitasse) || fail "pkg-config --cflags demitasse"
libs=$(pkg-config --libs demitasse) || fail "pkg-config --libs demitasse"
echo "pkg-config --cflags --libs demitasse: $cflags $libs"
for flag in $cflags $libs; do
  case $flag in
    -I*|-L*) case ${flag#-?} in "$dest"/*) ;; *) fail "$flag is outside the installed tree" ;; esac ;;
  esac
done
case " $libs " in *" -ldemitasse "*) ;; *) fail "pkg-config --libs has no -ldemitasse: $libs" ;; esac

san=""
[ "$sanitize" = none ] || [ -z "$sanitize" ] || san="-fsanitize=$sanitize"
LD_LIBRARY_PATH=$dest$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
# Compiled in $T, away from the source tree, so no header can come from there.
cd "$T" || exit 1
# $CC, $cflags, $libs and $san are word lists: split on purpose.
compile() { # out source extra-args...
  out=$1 in=$2
  shift 2
  # shellcheck disable=SC2086
  $CC -std=c17 -Wall -Wextra -Werror $san "$in" -o "$out" "$@" >"$T/cc.log" 2>&1 ||
    { cat "$T/cc.log"; fail "cc $in with pkg-config's flags"; }
}

# The first ```c block under the README heading $1 (exit status 1 when there is none).
readme_block() {
  awk -v want="$1" '
    /^## / { in_sec = ($0 == want); if (in_block) exit; next }
    in_sec && !in_block && /^```c[[:space:]]*$/ { in_block = 1; found = 1; next }
    in_block && /^```/ { exit }
    in_block { print }
    END { if (!found) exit 1 }
  ' "$src/README.md"
}

# ---------------------------------------------------------------- (a) README example
readme_block "## Embedding" >"$T/block.c" && [ -s "$T/block.c" ] ||
  fail "README.md: no \`\`\`c block under \"## Embedding\""

# The net the example runs: data (1, 784) -> FC (W = 0.001 everywhere, b_j = 0.25 j) ->
# Softmax -> prob (1, 10). Written as text, converted to the .pb files the README names.
cat >init_net.pbtxt <<'EOF'
name: "install_test_init"
op { output: "w" type: "ConstantFill" arg { name: "shape" ints: [10, 784] } arg { name: "value" f: 0.001 } }
op { output: "b" type: "GivenTensorFill" arg { name: "shape" ints: 10 }
     arg { name: "values" floats: [0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.25] } }
EOF
cat >predict_net.pbtxt <<'EOF'
name: "install_test_predict"
op { input: "data" input: "w" input: "b" output: "fc" type: "FC" }
op { input: "fc" output: "prob" type: "Softmax" }
EOF
for n in init_net predict_net; do
  "$dest$bindir/demitasse" convert $n.pbtxt $n.pb >"$T/convert.log" 2>&1 ||
    { cat "$T/convert.log"; fail "installed demitasse convert $n.pbtxt $n.pb"; }
done

if grep -q 'main[[:space:]]*(' "$T/block.c"; then
  cp "$T/block.c" example.c
else
  {
    echo '/* README.md "## Embedding", first C block, wrapped by tests/install/install_test.sh. */'
    grep '^[[:space:]]*#' "$T/block.c"
    cat <<'EOF'
#include <math.h>
#include <stdint.h>
#include <stdio.h>

static float pixels[784];
static int used, bad;

/* What the README's host does with the result: here, compare with a softmax in double. */
static void use(const void *data, int64_t numel) {
  const float *p = data;
  double x = 0, fc[10], sum = 0;
  used++;
  if (numel != 10) {
    fprintf(stderr, "prob has %lld values, expected 10\n", (long long)numel);
    bad = 1;
    return;
  }
  for (int i = 0; i < 784; i++)
    x += pixels[i];
  for (int j = 0; j < 10; j++)
    sum += exp(fc[j] = 0.001 * x + 0.25 * j);
  for (int j = 0; j < 10; j++) {
    double want = exp(fc[j]) / sum;
    if (fabs(p[j] - want) > 1e-5 + 1e-4 * want) {
      fprintf(stderr, "prob[%d] = %.7g, expected %.7g\n", j, p[j], want);
      bad = 1;
    }
  }
}

static void readme_example(void) {
EOF
    grep -v '^[[:space:]]*#' "$T/block.c"
    cat <<'EOF'
}

int main(void) {
  for (int i = 0; i < 784; i++)
    pixels[i] = (float)(i % 7) / 7.0f;
  readme_example();
  if (used != 1 || bad) {
    fprintf(stderr, "README example: %s\n", used ? "wrong prob" : "use() was never reached");
    return 1;
  }
  printf("README embedding example: prob matches the reference\n");
  return 0;
}
EOF
  } >example.c
fi
# shellcheck disable=SC2086
compile example example.c $cflags $libs -lm
./example >"$T/example.log" 2>&1 || { cat example.c "$T/example.log"; fail "README example run"; }
cat "$T/example.log"
# It must have run on the installed library, not one from the build tree.
if command -v ldd >/dev/null 2>&1; then
  ldd ./example | grep -q "$dest$libdir/libdemitasse.so" ||
    { ldd ./example; fail "example does not load $dest$libdir/libdemitasse.so"; }
fi

# ---------------------------------------------------------------- (b) plugin
cp "$src/tests/plugins/swish_plugin.c" swish.c
# shellcheck disable=SC2086
compile swish.so swish.c -shared -fPIC $cflags -lm
cat >plugin_host.c <<'EOF'
/* Loads the Swish plugin through the installed libdemitasse.so and runs one Swish op. */
#include <demitasse.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  static const char net_text[] = "name: 'swish' op { input: 'x' output: 'y' type: 'Swish' }";
  const float x[5] = {-3.0f, -0.5f, 0.0f, 1.0f, 4.0f};
  const int64_t dims[1] = {5};
  dm_workspace *ws = NULL;
  dm_net *net = NULL;
  const dm_tensor *y = NULL;
  if (argc != 2 || dm_plugin_load(argv[1]) != DM_OK || dm_workspace_create(&ws) != DM_OK ||
      dm_workspace_create_net_bytes(ws, net_text, strlen(net_text), 1, &net) != DM_OK ||
      dm_workspace_feed(ws, "x", DM_FLOAT, 1, dims, x) != DM_OK || dm_net_run(net) != DM_OK ||
      dm_workspace_fetch(ws, "y", &y) != DM_OK) {
    fprintf(stderr, "plugin host: %s\n", dm_last_error());
    dm_workspace_destroy(ws);
    return 1;
  }
  int bad = dm_tensor_numel(y) != 5;
  const float *py = dm_tensor_data(y);
  for (int i = 0; !bad && i < 5; i++) {
    double want = x[i] / (1.0 + exp(-(double)x[i]));
    if (fabs(py[i] - want) > 1e-6 + 1e-6 * fabs(want)) {
      fprintf(stderr, "y[%d] = %.7g, expected %.7g\n", i, py[i], want);
      bad = 1;
    }
  }
  dm_workspace_destroy(ws);
  if (!bad)
    printf("plugin: Swish from %s matches the reference\n", argv[1]);
  return bad;
}
EOF
# shellcheck disable=SC2086
compile plugin_host plugin_host.c $cflags $libs -lm
./plugin_host "$T/swish.so" || fail "the installed library did not run the plugin's Swish"

# ---------------------------------------------------------------- (c) README's plugin
# The complete plugin README shows under "## Writing an operator plugin", built as it
# stands and run by the same host (in its own process: both plugins register Swish).
readme_block "## Writing an operator plugin" >readme_swish.c && [ -s readme_swish.c ] ||
  fail "README.md: no \`\`\`c block under \"## Writing an operator plugin\""
# shellcheck disable=SC2086
compile readme_swish.so readme_swish.c -shared -fPIC $cflags -lm
./plugin_host "$T/readme_swish.so" || fail "README's plugin did not run"
echo "PASS"
