"""The life cycle the local services share (broker, HDFS, Spark standalone daemons).

Each runs as a child in a session of its own, dies with this process (``die_with_parent``),
and is stopped as a whole process group: SIGTERM first, SIGKILL if it hangs.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any


def die_with_parent() -> list[str]:
    """A command prefix that makes Linux SIGTERM the child when this process dies.

    util-linux's setpriv sets the parent-death signal after fork, so no Python code runs
    between fork and exec (a preexec_fn could deadlock beside Spark's JVM threads); a JVM
    that ``spark-class`` execs keeps it.
    """
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []


def stop_group(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> str:
    """Stop ``proc``'s process group and say how it ended: "SIGTERM" (an orderly stop),
    "SIGKILL" (it hung), "exited" (it had ended already) or "gone"."""
    if proc.poll() is not None:
        return "exited"
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout)
        return "SIGTERM"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "SIGKILL"
    except ProcessLookupError:
        return "gone"


def serve(service: AbstractContextManager[Any], banner: Callable[[Any], str]) -> int:
    """Run a service in the foreground until Ctrl-C or SIGTERM (the ``main`` of each module)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with service as running:
        print(f"{banner(running)}; Ctrl-C stops it", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


__all__ = ["die_with_parent", "serve", "stop_group"]
