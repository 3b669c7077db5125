"""Hindsight's benchmarks and the chaos run: harnesses kept apart from the services they drive.

Each benchmark is one module with a ``main(argv) -> int`` (or ``main_<name>(...)``) that the
``hindsight`` CLI (``services/cli/main.py``) only wires to a command; each prints JSON lines. Shared
pieces, so that a new benchmark is a short file:

- :mod:`bench.common`: JSON line output, rounding, load average, latency percentiles, scratch
  directories, the LoCoMo data path;
- :mod:`bench.stack`: the embedded default started for a run, and :class:`bench.stack.IngestProbe`
  (publish ~1 KB events at a steady rate and time each one until it is searchable);
- :mod:`bench.synth`: the synthetic-but-realistic memory generator (real e5 vectors of a cached pool
  of real texts, many users with skewed activity), query sets and ingest texts;
- ``bench/data/``: labelled data sets of the benchmarks (e.g. the guard set);
- :mod:`bench.workload`: distinct checksummed interaction events and malformed records, published
  at a steady rate (chaos run, load benchmark, fault tests);
- :mod:`bench.procs`: the pipeline as separate service processes (:class:`bench.procs.Pipeline`,
  :class:`bench.procs.ServiceProcess`) and the fault-injecting vector store;
- :mod:`bench.verify`: what the stores and topics hold for a workload (exactly-once check).

Benchmarks: :mod:`bench.recall` (quality on LoCoMo vs baselines), :mod:`bench.scale` (recall latency
at 10k/100k memories, ingest-to-searchable), :mod:`bench.inference` (embedder/reranker via Triton vs
in-process), :mod:`bench.load` (sustained offered load), :mod:`bench.chaos` (faults lose nothing),
:mod:`bench.serve` (recall through HTTP and MCP vs in-process; idle CPU), :mod:`bench.guard` (the
guard on its labelled set), :mod:`bench.updates` (version chains, conflicts and lessons on bilingual
update scenarios), :mod:`bench.broker` (the embedded broker candidates side by side), :mod:`bench.idle`
(CPU of an idle ``hindsight up``). :mod:`bench.clients` is the HTTP/MCP load generator
``bench.serve`` runs as a child process; :mod:`bench.up` runs ``hindsight up`` as a child process
(restart tests too).
"""
