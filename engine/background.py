"""Background threads yield the CPU to the foreground (the inspector's GUI thread, a CLI's main one).

`lower_thread_priority()` makes the calling thread a background thread for the OS scheduler:
Linux nice +10, which the threads it then starts inherit (the embedder's pool, for one). On
other systems it does nothing. Used by ui/tasks workers and the engine's own re-embed thread.
"""

from __future__ import annotations

import os
import sys
import threading

BACKGROUND_NICE = 10

_local = threading.local()


def lower_thread_priority() -> None:
    """Lower the calling thread to BACKGROUND_NICE (never raises it; Linux only; once per thread)."""
    if sys.platform.startswith("linux") and not getattr(_local, "lowered", False):
        try:
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, max(os.getpriority(os.PRIO_PROCESS, tid), BACKGROUND_NICE))
        except OSError:
            pass  # a sandbox may refuse; the work runs all the same
        _local.lowered = True
