"""Inference backends behind small interfaces (DESIGN.md section 7; docs/inference.md).

- :mod:`~hindsight.inference.embedder`: ``Embedder``, the in-process e5 backend, ``build_embedder``;
- :mod:`~hindsight.inference.reranker`: ``Reranker``, the in-process stand-in, ``build_reranker``;
- :mod:`~hindsight.inference.llm`: ``LLM``, the in-process stand-in, ``build_llm``;
- :mod:`~hindsight.inference.triton_embedder`, :mod:`~hindsight.inference.triton_reranker`,
  :mod:`~hindsight.inference.llm_triton`: the same interfaces over Triton (HTTP or gRPC), sharing
  :mod:`~hindsight.inference.triton_client` (readiness, batching limits, errors, retries);
- :mod:`~hindsight.inference.llm_openai`: the LLM over any OpenAI-compatible server;
- :mod:`~hindsight.inference.triton_server`: runs the bundled ``tritonserver`` on a model repository;
- :mod:`~hindsight.inference.embedder_eval`: the embedder comparison (evidence recall@10 on LoCoMo).

Nothing here creates a client or loads a model at import time.
"""
