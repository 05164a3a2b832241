"""Child processes that never outlive paperchat: a free port, a spawn tied to our life, a clean stop.

:func:`spawn_kept` starts a child from a keeper thread, with ``PR_SET_PDEATHSIG`` on Linux so the kernel
sends it SIGTERM when paperchat dies without running any Python (SIGKILL, a crash); the kernel ties that to
the *thread* that forked, so the keeper lives exactly as long as the child. :func:`stop_process_group`
ends a child and everything it started; :func:`stop_process` ends one process (the tests use it too).
:func:`guard_signals` has SIGTERM and SIGHUP stop a child first, then do what they did before.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (another program may still take it before we bind it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def die_with_parent_preexec() -> Callable[[], None] | None:
    """On Linux, a preexec_fn making the child get SIGTERM when its parent (thread) dies; else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()

    def die_with_parent() -> None:  # runs in the child between fork and exec: keep it minimal
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return die_with_parent


def spawn_kept(argv: list[str], **popen_kwargs: Any) -> tuple[subprocess.Popen[bytes], threading.Thread]:
    """Popen from a daemon thread that then waits for the child, so PR_SET_PDEATHSIG (which fires when
    the forking *thread* ends) fires only when the whole process goes away, or after the child ended.

    Whatever Popen raises (``OSError`` for a program that cannot run) is raised here, in the caller's thread.
    """
    spawned: dict[str, Any] = {}
    ready = threading.Event()

    def keep() -> None:
        try:
            spawned["proc"] = subprocess.Popen(argv, **popen_kwargs)
        except BaseException as e:  # handed to the caller
            spawned["error"] = e
            return
        finally:
            ready.set()
        with contextlib.suppress(Exception):
            spawned["proc"].wait()

    keeper = threading.Thread(target=keep, name="paperchat-llm-server-keeper", daemon=True)
    keeper.start()
    ready.wait()
    if "error" in spawned:
        raise spawned["error"]
    return spawned["proc"], keeper


def stop_process(proc: subprocess.Popen, timeout: float = 20.0) -> int | None:
    """SIGTERM (a clean shutdown), then SIGKILL if it does not go within ``timeout`` s; returns the exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode


def stop_process_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the child's process group, wait up to ``timeout``, then SIGKILL whatever is left of it."""
    if os.name != "posix":  # pragma: no cover - no process groups by pid there
        stop_process(proc, timeout)
        return
    if proc.poll() is not None:
        # It ended on its own, maybe long ago: its group id may name someone else's group by now.
        return
    group = proc.pid  # start_new_session: the child leads its own group
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)
    # Whatever is left in the group: the leader after the timeout, or anything it started. The group id
    # cannot have been reused: the leader was alive a moment ago and the kernel keeps an id in use while
    # any member of its group lives.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


# --- stopping on SIGTERM / SIGHUP ------------------------------------------------------------------


class StopsForSignal(Protocol):
    def stop_for_signal(self) -> None:
        """Stop now, from a signal handler (so without waiting long for a lock)."""
        ...


class SignalGuard:
    """A SIGTERM/SIGHUP handler: stops what it guards, then does what the previous handler did."""

    def __init__(self, signum: int, previous: Callable[[int, FrameType | None], Any] | int) -> None:
        self.signum = signum
        self.previous = previous
        self.guarded: set[StopsForSignal] = set()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        for item in list(self.guarded):
            with contextlib.suppress(Exception):
                item.stop_for_signal()
        previous = self.previous
        if callable(previous):
            previous(signum, frame)
            return
        # SIG_DFL: the default action (terminate), exactly as if we had never been here
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def guard_signals(guarded: StopsForSignal) -> list[SignalGuard]:
    """Have SIGTERM/SIGHUP stop ``guarded`` first; the guards that now hold it (none outside the main
    thread, the only one that may install signal handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return []
    guards = []
    for signum in _stop_signals():
        current = signal.getsignal(signum)
        if isinstance(current, SignalGuard):
            guard = current
        elif current is signal.SIG_IGN or current is None:
            continue  # ignored (e.g. SIGHUP under nohup) or not ours to chain: leave it
        else:
            guard = SignalGuard(signum, current)
            signal.signal(signum, guard)
        guard.guarded.add(guarded)
        guards.append(guard)
    return guards


def unguard_signals(guarded: StopsForSignal, guards: list[SignalGuard]) -> None:
    """Undo :func:`guard_signals`; a guard left with nothing to stop puts the previous handler back."""
    for guard in guards:
        guard.guarded.discard(guarded)
        if (
            not guard.guarded
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(guard.signum) is guard
        ):
            signal.signal(guard.signum, guard.previous)


def _stop_signals() -> list[int]:
    return [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
