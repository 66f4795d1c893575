"""Benchmarks: Ratchet against the raw Temporal SDK floor (`make bench`, `python -m bench`).

Kept light on purpose: worker processes import `bench.floor` or `bench.plugin` only, so the floor
worker never pays for Ratchet's imports.
"""
