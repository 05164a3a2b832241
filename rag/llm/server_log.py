"""The embedded LLM server's log: where it is written, and what its end says when a start fails.

Without a configured log path the server writes into a temporary folder named after paperchat's process
id (``paperchat-llama-<pid>-<random>``), so the folders of paperchat processes that were SIGKILLed (no
cleanup ran) can be recognised and removed later. A failed start quotes the log's last telling lines in
its one-line error.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from rag.llm.processes import pid_alive
from rag.text import one_line

LOG_TAIL_BYTES = 8192  # bytes of the server's log read to explain a failed start
LOG_TAIL_LINES = 3  # lines of it quoted in the error message
LOG_DIR_PREFIX = "paperchat-llama-"  # temporary log folders: paperchat-llama-<paperchat's pid>-<random>
_BIND_FAILED = re.compile(r"address already in use|error while attempting to bind|errno (?:98|48)", re.IGNORECASE)


def new_log_dir() -> Path:
    """A fresh temporary folder for this paperchat process's server log (stale ones are removed first)."""
    _remove_stale_log_dirs()
    return Path(tempfile.mkdtemp(prefix=f"{LOG_DIR_PREFIX}{os.getpid()}-"))


def read_log_end(log: Path | None) -> str:
    """The last few KB of the server's log ("" if there is none)."""
    if log is None:
        return ""
    try:
        with log.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - LOG_TAIL_BYTES))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def bind_failed(log_end: str) -> bool:
    """Whether the log says the server could not bind its port."""
    return _BIND_FAILED.search(log_end) is not None


def log_summary(log: str) -> str:
    """The end of a server log as one line: its last lines that report an error, else its last lines."""
    lines = _telling_lines(log)
    errors = [line for line in lines if re.search(r"error|fail|exception|cannot|unable", line, re.IGNORECASE)]
    return one_line(" | ".join((errors or lines)[-LOG_TAIL_LINES:]), 400)


def _telling_lines(log: str) -> list[str]:
    """The log's lines without a Python traceback's frames (the exception line that ends it stays)."""
    kept: list[str] = []
    in_frame = False
    for raw in log.splitlines():
        line = raw.strip()
        if raw.startswith("  File ") or line.startswith("Traceback (most recent call last)"):
            in_frame = True
            continue
        if in_frame and raw.startswith("    "):  # the source line and ^^^^ markers of a frame
            continue
        in_frame = False
        if line:
            kept.append(line)
    return kept


def _remove_stale_log_dirs() -> None:
    """Remove the temporary log folders of paperchat processes that are gone (SIGKILLed: no cleanup ran)."""
    if os.name != "posix":  # os.kill(pid, 0) would end the process on Windows
        return
    pattern = re.compile(re.escape(LOG_DIR_PREFIX) + r"(\d+)-\w+$")
    uid = os.getuid() if hasattr(os, "getuid") else None
    with contextlib.suppress(OSError):
        for entry in Path(tempfile.gettempdir()).iterdir():
            match = pattern.match(entry.name)
            if match is None or int(match.group(1)) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if uid is not None and entry.lstat().st_uid != uid:
                    continue
                if entry.is_dir() and not entry.is_symlink() and not pid_alive(int(match.group(1))):
                    shutil.rmtree(entry, ignore_errors=True)
