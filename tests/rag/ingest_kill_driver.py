"""``paperchat ingest`` (the CLI with the fake embedder) whose store writer stalls, for the SIGKILL test of the
ingest pipeline (tests/rag/test_ingest_kill.py):

    python -m tests.rag.ingest_kill_driver ingest PATH

The ``STALL_AT_WRITE``-th ``ChromaStore.write_papers`` call writes its batch's chunks, then never writes the
batch's paper records (a store that stopped answering), while the embedder goes on until the writer's queue
is full. The process then prints ``QUEUE FULL`` on stdout, once, and waits there to be killed. Windows are
small (``window_texts=4``) so that the queue fills with a corpus of a few dozen abstracts.
"""

from __future__ import annotations

import functools
import os
import sys
import time

from tests.conftest import FakeEmbedder


def install_stall(stall_at: int) -> None:
    import rag.components
    from store.background_writer import BackgroundWriter
    from store.chroma import ChromaStore

    calls = 0
    stalled = False
    real_write, real_submit = ChromaStore.write_papers, BackgroundWriter.submit

    def write_papers(self, writes):
        nonlocal calls, stalled
        calls += 1
        if calls == stall_at:
            real_call = self._call

            def call(doing, fn, *args, **kwargs):
                nonlocal stalled
                if doing == "write papers":
                    stalled = True
                    while True:
                        time.sleep(1)
                return real_call(doing, fn, *args, **kwargs)

            self._call = call
        real_write(self, writes)

    def submit(self, batch):
        if stalled and self.queue.full():
            print("QUEUE FULL", flush=True)
        real_submit(self, batch)

    ChromaStore.write_papers = write_papers
    BackgroundWriter.submit = submit
    rag.components.Ingestor = functools.partial(rag.components.Ingestor, window_texts=4)


def main(argv: list[str]) -> int:
    install_stall(int(os.environ.get("STALL_AT_WRITE", "2")))
    from ui.cli.main import main as cli_main

    return cli_main(argv, parts={"embedder": FakeEmbedder()})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
