"""Benchmarks and harnesses that drive Hindsight from outside (kept apart from the services they drive).

Each module prints JSON lines; the ``hindsight bench ...`` commands only wire them.
"""
