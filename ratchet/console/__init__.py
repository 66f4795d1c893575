"""`ratchet console`: a web app for the people around an agent (ratchet/console/app.py): runs,
a run's conversation, checkpoints and rollback plans, an approvals inbox, actions as forms.
Server-rendered pages over `ratchet.client` only, on the `ratchet serve` stack (Starlette, uvicorn)."""
