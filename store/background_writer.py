"""One thread that writes batches to the store while the caller prepares the next ones (ingest: the
embedder computes batch n + 1 while batch n is written).

At most ``depth`` batches wait: a producer faster than the store blocks in ``submit`` instead of holding
the whole corpus's vectors in memory. Batches that are waiting when the writer takes one are written with
it, up to ``max_rows`` rows, so a store that falls behind gets larger (cheaper per row) writes; the first
batch is written alone (a quick check that the store can be written at all). The first
error the writer meets is raised in the caller's thread, by the next ``submit`` or by ``close``; nothing
is written after it. Nothing here knows what a batch is: ``write`` does the work, ``rows`` sizes it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

Batch = TypeVar("Batch")

_STOP = object()


class BackgroundWriter(Generic[Batch]):
    def __init__(
        self,
        write: Callable[[list[Batch]], None],
        *,
        depth: int = 2,
        max_rows: int = 4000,
        rows: Callable[[Batch], int] = lambda batch: 1,
    ) -> None:
        self._write = write
        self._rows = rows
        self.max_rows = max_rows
        self.queue: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self._error: BaseException | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="paperchat-store-writer", daemon=True)
        self._thread.start()

    def submit(self, batch: Batch) -> None:
        """Queue ``batch`` (waiting while ``depth`` batches wait already); raises the writer's error, if any."""
        while True:
            self._raise_error()
            try:
                self.queue.put(batch, timeout=0.1)
                return
            except queue.Full:
                continue

    def close(self) -> None:
        """Wait until every submitted batch is written; raises the writer's error, if any."""
        self._put_stop()
        self._thread.join()
        self._raise_error()

    def abort(self) -> None:
        """Stop after the write under way (the caller failed or was interrupted); queued batches are dropped."""
        self._stopping.set()
        while True:  # make room for the stop marker: what waits is dropped anyway
            try:
                self.queue.get_nowait()
            except queue.Empty:
                break
        self._put_stop()
        self._thread.join(timeout=60)

    def _put_stop(self) -> None:
        while self._thread.is_alive():
            try:
                self.queue.put(_STOP, timeout=0.1)
                return
            except queue.Full:
                continue

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        pending, first = None, True
        while True:
            batch = pending if pending is not None else self.queue.get()
            pending = None
            if batch is _STOP or self._stopping.is_set():
                return
            batches, rows = [batch], self._rows(batch)
            while rows < self.max_rows and not first:  # take what waits already, up to max_rows
                try:
                    more = self.queue.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP or rows + self._rows(more) > self.max_rows:
                    pending = more
                    break
                batches.append(more)
                rows += self._rows(more)
            first = False
            try:
                self._write(batches)
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread, which raises it
                self._error = e
                self._drain()
                return

    def _drain(self) -> None:
        """After an error: empty the queue so that a producer blocked in ``submit`` sees the error."""
        while True:
            try:
                self.queue.get_nowait()
            except queue.Empty:
                return
