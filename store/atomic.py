"""Writing a folder all at once: a temporary folder beside it is filled, then swapped in, so a reader
sees the old folder or the new one and a killed writer leaves only a temporary folder. The BM25 index
(store.bm25) and the vector table (store.vectors) are both saved this way.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

_log = logging.getLogger(__name__)
# What a data folder the process may not write gives: read-only mount, no permission, immutable files.
_CANNOT_WRITE = (errno.EROFS, errno.EACCES, errno.EPERM)


def save_folder_atomically(folder: Path, fill: Callable[[Path], None], *, optional: bool = False) -> None:
    """Have ``fill`` write into a temporary folder beside ``folder``, then swap it in: a reader sees the old
    folder or the new one, never half of one, and a killed writer leaves only a temporary folder.

    Several writers (threads of one app, or instances sharing a data folder) may swap at once: whoever
    swaps in between our "move the old folder away" and "move ours in" makes the second step fail, so
    it is tried again; if others keep winning, their complete copy stands and ours is dropped (every
    copy records the generation it was built at, and a reader checks it).

    ``optional``: the folder is a cache of what the index holds; if the data folder cannot be written
    (read-only), say so in the log and go on with the copy in memory, so a read-only index can be searched.
    """
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = folder.with_name(f".{folder.name}.{uuid.uuid4().hex}.tmp")
        tmp.mkdir(parents=True)
    except OSError as e:
        if optional and e.errno in _CANNOT_WRITE:
            _log.warning("cannot save %s (%s): the data folder is read-only; kept in memory", folder, e.strerror)
            return
        raise
    moved_away: list[Path] = []
    try:
        fill(tmp)
        for _attempt in range(5):
            old = folder.with_name(f".{folder.name}.{uuid.uuid4().hex}.old")
            with contextlib.suppress(FileNotFoundError):  # another writer moved it away first
                os.replace(folder, old)
                moved_away.append(old)
            try:
                os.replace(tmp, folder)
                break
            except OSError as e:
                if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already when the swap succeeded
        for old in moved_away:
            shutil.rmtree(old, ignore_errors=True)
