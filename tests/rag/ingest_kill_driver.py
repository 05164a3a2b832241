"""``paperchat ingest`` (the CLI with the fake embedder) whose store writer stops for good at a known write,
for the SIGKILL test of the ingest pipeline (tests/rag/test_ingest_kill.py):

    INGEST_KILL_MARKER=FILE python -m tests.rag.ingest_kill_driver ingest PATH

The second ``ChromaStore.write_papers`` call (the first writes the first paper alone) writes its chunks,
then blocks on an event nothing sets before writing their paper records: a store that stopped answering.
The embedder goes on until the writer's queue is full and ``submit`` blocks. A watcher thread creates FILE
once the writer is blocked *and* its queue is full, so the test kills a process that is certainly in that
state: no sleeps, no reading of the process's output, nothing that depends on which thread runs first.
Windows are small (``window_texts=4``) so that a corpus of a few dozen abstracts fills the queue.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from pathlib import Path

from tests.conftest import FakeEmbedder

STALL_AT_WRITE = 2


def install_stall(marker: Path) -> None:
    import rag.components
    from store.background_writer import BackgroundWriter
    from store.chroma import ChromaStore

    stalled, never = threading.Event(), threading.Event()
    calls = 0
    real_write, real_init = ChromaStore.write_papers, BackgroundWriter.__init__

    def write_papers(self, writes):
        nonlocal calls
        calls += 1
        if calls == STALL_AT_WRITE:
            real_call = self._call

            def call(doing, fn, *args, **kwargs):
                if doing == "write papers":  # the chunks are written; the records that commit them never are
                    stalled.set()
                    never.wait()
                return real_call(doing, fn, *args, **kwargs)

            self._call = call
        real_write(self, writes)

    def watch(writer: BackgroundWriter) -> None:
        while not (stalled.wait(0.01) and writer.queue.full()):
            pass
        partial = marker.with_suffix(".partial")
        partial.write_text(f"queue full: {writer.queue.qsize()} batches waiting, writer blocked at write "
                           f"{STALL_AT_WRITE}\n")
        partial.replace(marker)

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        threading.Thread(target=watch, args=(self,), daemon=True).start()

    ChromaStore.write_papers = write_papers
    BackgroundWriter.__init__ = init
    rag.components.Ingestor = functools.partial(rag.components.Ingestor, window_texts=4)


def main(argv: list[str]) -> int:
    install_stall(Path(os.environ["INGEST_KILL_MARKER"]))
    from ui.cli.main import main as cli_main

    return cli_main(argv, parts={"embedder": FakeEmbedder()})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
