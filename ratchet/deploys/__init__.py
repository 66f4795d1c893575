"""Deploying new builds to running agents: worker deployments, ramps and their guard
(docs/OPERATIONS.md, "Deploying a new version")."""
