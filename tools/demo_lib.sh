# tools/demo_lib.sh: what demo.sh and demo_gpt.sh share, sourced from the repository root.
# demo_binary: sets dm to the demitasse to run: DM_DEMO_BIN (a built one: no setup, no
# build, as the tests run the demos), else ./setup.sh, a build in build/, and its binary.
# demo_precision ARGS...: sets precision to fp32, fp16 or bf16 from the train flags.
demo_binary() {
  dm=${DM_DEMO_BIN:-}
  if [ -z "$dm" ]; then
    ./setup.sh
    [ -d build ] || meson setup build >/dev/null
    ninja -C build >/dev/null
    dm=./build/tools/demitasse
  fi
}

demo_precision() {
  precision=fp32
  for a in "$@"; do
    case $a in
    --fp16) precision=fp16 ;;
    --bf16) precision=bf16 ;;
    esac
  done
}
