"""Ending a process with its true status.

temporalio can abort at interpreter exit after all work is done (SDK issue #300:
`Fatal Python error: PyGILState_Release`, exit 134, or a silent segfault). Every Ratchet entry
point therefore flushes its output and ends with os._exit once its work is finished and its
clients and workers are closed, so users and CI only ever see the real exit status.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn


def exit_now(status: int) -> NoReturn:
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed pipe must not change the status
            pass
    os._exit(status)
