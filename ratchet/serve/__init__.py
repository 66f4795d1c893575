"""`ratchet serve`: runs over HTTP, as Server-Sent Events and AG-UI (ratchet/serve/app.py)."""
