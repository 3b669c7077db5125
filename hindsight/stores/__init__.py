"""Store adapters (vector, working memory, access log, ...), one module per store.

Nothing is re-exported here on purpose: importing one adapter must not import every store client.
Import from the module, e.g. ``from hindsight.stores.vector import MemoryFilter, VectorStore``.
"""
