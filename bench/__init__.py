"""Benchmarks and harnesses (they drive the services; the services never import them)."""
