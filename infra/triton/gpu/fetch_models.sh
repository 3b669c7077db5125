#!/usr/bin/env bash
# Fill the GPU model repository with weights (production image build; NOT run in CI: it needs the
# Hugging Face Hub and ~30 GB). Requires: huggingface_hub, optimum[onnxruntime-gpu], torch, transformers.
#   infra/triton/gpu/fetch_models.sh [MODELS_DIR]   (default /weights; llm/1/model.json points there: mount it at /weights, outside the model repository)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
hf="${1:-/weights}"
mkdir -p "$hf"

huggingface-cli download intfloat/multilingual-e5-large --local-dir "$hf/multilingual-e5-large"
huggingface-cli download BAAI/bge-reranker-v2-m3 --local-dir "$hf/bge-reranker-v2-m3"
huggingface-cli download Qwen/Qwen2.5-7B-Instruct --local-dir "$hf/Qwen2.5-7B-Instruct"

cp "$hf/multilingual-e5-large/tokenizer.json" "$here/embedder_tokenizer/1/tokenizer.json"
cp "$hf/bge-reranker-v2-m3/tokenizer.json" "$here/reranker_tokenizer/1/tokenizer.json"

# Encoders to ONNX; the embedder gets mean pooling + L2 normalisation inside the graph.
python - "$hf" "$here" <<'PY'
import sys
from pathlib import Path

import torch
from transformers import AutoModel, AutoModelForSequenceClassification

hf, repo = Path(sys.argv[1]), Path(sys.argv[2])


class MeanPooled(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1)


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


def export(module, out, output_name):
    ids = torch.ones((2, 16), dtype=torch.int64)
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}, output_name: {0: "batch"}}
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(module.eval(), (ids, ids), str(out), input_names=["input_ids", "attention_mask"],
                      output_names=[output_name], dynamic_axes=axes, opset_version=17)


export(MeanPooled(AutoModel.from_pretrained(hf / "multilingual-e5-large")),
       repo / "embedder_encoder" / "1" / "model.onnx", "embedding")
export(Logits(AutoModelForSequenceClassification.from_pretrained(hf / "bge-reranker-v2-m3")),
       repo / "reranker_encoder" / "1" / "model.onnx", "logits")
PY
echo "GPU model repository ready: $here (serve it with the full Triton image, e.g. tritonserver:24.10-vllm-python-py3)"
