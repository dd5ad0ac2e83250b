"""Separate OS processes that share no files: each in its own mount namespace with a private /tmp.

The multi-process proof of the handover protocol (tests/integration/test_handover_processes.py)
runs the planner and every pipeline as a process of its own, as on separate hosts of a
cluster: ``unshare -rm`` gives each a new user and mount namespace, in which a fresh tmpfs
is mounted over ``/tmp`` (Spark's local dirs, Java's hsperfdata, the checkpoints: all
there) and becomes the working directory and ``$HOME``. The checkout (``read_only``, by
default the repository root with ``.venv`` and ``.jvm``) is remounted read-only inside, so
the only thing two such processes share is the network: the Kafka broker and the store in it.

Each process is the leader of a session and process group of its own
(``start_new_session``): ``stop()``/``cont()``/``kill()`` signal the whole group with
``os.killpg``, so a SIGSTOP freezes the Python driver and its Spark JVM together, as a GC
pause or a frozen VM would. Output (stdout and stderr) goes to a log file the test prints
when it fails. The kernel SIGKILLs the process when the thread that started it dies
(``setpriv --pdeathsig``, set inside the namespace so that the credential change of
``unshare -r`` does not clear it), and Spark's JVM exits when its driver's pipe closes.

    require_namespaces()                      # NamespaceError with the reason, never a skip
    with NamespacedProcess("pipeline-a", [sys.executable, "-m", "..."], log_path) as proc:
        proc.stop(); ...; proc.cont()
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from spark_lag_assign import jvm
from spark_lag_assign.errors import SparkLagAssignError

#: runs inside the new namespaces: private /tmp, read-only checkout, then the command. The
#: read-only directories are opened before the tmpfs hides /tmp, and bound back from those
#: descriptors, so a checkout that itself lives under /tmp stays reachable.
_SCRIPT = r"""
set -e
n=3
for dir in $SLA_READ_ONLY; do eval "exec $n<\"\$dir\""; n=$((n + 1)); done
mount -t tmpfs -o "size=$SLA_TMPFS_SIZE,mode=1777" tmpfs /tmp
n=3
for dir in $SLA_READ_ONLY; do
    mkdir -p "$dir"
    mount --no-canonicalize --bind "/proc/self/fd/$n" "$dir"
    mount -o remount,bind,ro "$dir"
    eval "exec $n<&-"
    n=$((n + 1))
done
mkdir -p /tmp/home
cd /tmp
export HOME=/tmp/home TMPDIR=/tmp
exec $SLA_PDEATHSIG "$@"
"""


class NamespaceError(SparkLagAssignError):
    """Mount namespaces cannot be created here (no ``unshare``, user namespaces disabled, ...)."""


def _unshare() -> str:
    found = shutil.which("unshare")
    if not found:
        raise NamespaceError("unshare (util-linux) is not installed: the multi-process tests need it")
    return found


def check_namespaces(timeout: float = 20.0) -> str | None:
    """None if a process can get a user+mount namespace with a private tmpfs here, else why not."""
    try:
        unshare = _unshare()
    except NamespaceError as exc:
        return str(exc)
    probe = (
        'exec 3<"$1" && mount -t tmpfs -o size=1m tmpfs /tmp && touch /tmp/probe && mkdir -p "$1" '
        '&& mount --no-canonicalize --bind /proc/self/fd/3 "$1" && mount -o remount,bind,ro "$1"'
    )
    try:
        done = subprocess.run(
            [unshare, "-rm", "sh", "-c", probe, "sh", str(jvm.REPO_ROOT)], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`unshare -rm` could not run: {exc}"
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        return (
            f"`unshare -rm` with a tmpfs on /tmp and a read-only bind mount failed: {why} "
            "(user namespaces disabled? see sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces)"
        )
    return None


def require_namespaces() -> None:
    """Raise ``NamespaceError`` (with the reason) unless namespaces work here: a test that
    needs them must fail, not pass, where they are missing."""
    reason = check_namespaces()
    if reason is not None:
        raise NamespaceError(reason)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of a process from /proc, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    return fields[0], int(fields[2])


def group_members(pgid: int) -> list[int]:
    """Every live process of a process group (zombies excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] == pgid and stat[0] not in ("Z", "X"):
                found.append(int(entry))
    return sorted(found)


class NamespacedProcess:
    """One command in its own user+mount namespace, session and process group (module docstring).

    ``argv`` runs with ``/tmp`` a private tmpfs of ``tmpfs_size`` (also its working directory
    and ``$HOME``) and the ``read_only`` directories remounted read-only; ``env`` is added
    to this process's environment. Output goes to ``log_path`` (appended).
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: str | os.PathLike[str],
        *,
        env: Mapping[str, str] | None = None,
        tmpfs_size: str = "1g",
        read_only: Sequence[str | os.PathLike[str]] | None = None,
    ) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = Path(log_path)
        self.env = dict(env or {})
        self.tmpfs_size = tmpfs_size
        self.read_only = [str(Path(p).resolve()) for p in (read_only if read_only is not None else [jvm.REPO_ROOT])]
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None

    # -- life cycle

    def start(self) -> NamespacedProcess:
        if self.proc is not None:
            raise NamespaceError(f"{self.name} was started already")
        setpriv = shutil.which("setpriv")
        env = {
            **os.environ,
            **self.env,
            "SLA_TMPFS_SIZE": self.tmpfs_size,
            "SLA_READ_ONLY": " ".join(self.read_only),
            "SLA_PDEATHSIG": f"{setpriv} --pdeathsig KILL --" if setpriv else "",
            "PYTHONDONTWRITEBYTECODE": "1",  # nothing written next to the (read-only) sources
            "PYTHONUNBUFFERED": "1",
        }
        if any(" " in d for d in self.read_only):
            raise NamespaceError(f"read-only directories must not contain spaces: {self.read_only}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            out.write(f"=== {self.name}: {' '.join(self.argv)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [_unshare(), "-rm", "sh", "-c", _SCRIPT, "sh", *self.argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        self.started_at = time.monotonic()
        return self

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise NamespaceError(f"{self.name} was never started")
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def members(self) -> list[int]:
        """The live processes of its group: the driver, Spark's JVM, Python workers."""
        return group_members(self.pid) if self.proc is not None else []

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the whole process group."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)

    def stop(self) -> None:
        """SIGSTOP the whole group: driver and JVM freeze together."""
        self.signal(signal.SIGSTOP)

    def cont(self) -> None:
        self.signal(signal.SIGCONT)

    def kill(self) -> int:
        """SIGKILL the whole group and reap the leader; returns its exit status."""
        self.signal(signal.SIGKILL)
        assert self.proc is not None
        return self.proc.wait()

    def stopped(self) -> bool:
        """True when every live process of the group is stopped (state T)."""
        members = self.members()
        states = [s for s in (_stat(pid) for pid in members) if s is not None]
        return bool(states) and all(state == "T" for state, _ in states)

    def wait_stopped(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.stopped():
            if not self.alive:
                raise NamespaceError(f"{self.name} exited ({self.poll()}) instead of stopping; see {self.log_path}")
            if time.monotonic() > deadline:
                raise NamespaceError(f"{self.name} did not stop within {timeout:g}s; see {self.log_path}")
            time.sleep(0.05)

    def wait(self, timeout: float | None = None) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM the group (after a SIGCONT, in case it is stopped) and wait; SIGKILL after ``timeout``."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.signal(signal.SIGCONT)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)  # the driver: it ends its JVM itself
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.signal(signal.SIGKILL)  # whatever of the group outlived its leader
        return self.proc.wait()

    def close(self) -> None:
        """Kill whatever is left of the group (cleanup; use ``terminate`` for an orderly end)."""
        if self.proc is not None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)

    # -- output

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def __enter__(self) -> NamespacedProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "not started" if self.proc is None else (f"exited {self.poll()}" if not self.alive else f"pid {self.pid}")
        return f"NamespacedProcess({self.name}, {state})"


__all__ = ["NamespaceError", "NamespacedProcess", "check_namespaces", "group_members", "require_namespaces"]
