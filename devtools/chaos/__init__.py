"""Fault-tolerance proofs, run against real processes (docs/RELIABILITY.md).

    python -m devtools.chaos --runs 50       # SIGKILLed workers, a server restart, model faults; audit
    python -m devtools.chaos --hosts 2 --runs 20   # two hosts, one SIGKILLed for good, store outages
    python -m devtools.chaos.hostile         # the hostile-input catalogue, as a table
    python -m devtools.chaos.saga_sweep      # a failure at every step; rollback leaves zero residue

Modules: `stack` (paths, environment, worker processes (devtools.workers), shared helpers),
`supervisor` (the worker killer), `scenarios` (the runs' scripts), `audit` (history against the outside store),
`runner` (make chaos), `hosts` (the two-host scenario, on Postgres and S3), `hostile` with its cases
in `hostile_cases` and `hostile_live`, `saga_sweep`. The test-only tools and profiles these use live in tests/plugins/chaos_tools.py.
"""
