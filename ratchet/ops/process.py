"""Ending a process with its true status.

temporalio can abort at interpreter exit after all work is done (SDK issue #300:
`Fatal Python error: PyGILState_Release`, exit 134, or a silent segfault). Every Ratchet entry
point therefore flushes its output and ends with os._exit once its work is finished and its
clients and workers are closed, so users and CI only ever see the real exit status.
"""

from __future__ import annotations

import logging
import os
import signal
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


def exit_on_closed_pipe() -> NoReturn:
    """End as a Unix tool whose reader went away (`ratchet list | head -1`): killed by SIGPIPE (a
    shell shows status 141), no traceback. Python ignores SIGPIPE so that a write raises
    BrokenPipeError instead; once that has reached the entry point, the default comes back and the
    process sends the signal to itself. What is still buffered for the closed pipe is dropped."""
    logging.shutdown()
    try:
        sys.stderr.flush()
    except Exception:
        pass
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(128 + signal.SIGPIPE)  # not reached: the signal ends the process
