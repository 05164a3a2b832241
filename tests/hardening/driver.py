"""The ``paperchat`` CLI with the fake embedder, and pause points to SIGKILL it at, for the hardening tests.

    python -m tests.hardening.driver ingest PATH [+ search QUERY ...]

runs ``ui.cli.main.main`` once per ``+``-separated command, with ``tests.conftest.FakeEmbedder`` in place of
the sentence-transformers model (fast, deterministic, no model files). Everything else is the real code:
settings from the environment, the Chroma store on disk, the lock file, the exit codes and messages.

``HARDENING_PAUSE_AT=POINT`` stops an ingest at POINT: the process prints ``PAUSED POINT`` on stdout and
waits there (for the file named by ``HARDENING_GATE`` to appear, else forever) so that a test can send
it SIGKILL at a known place, or start a second ingest while it holds the lock. Points:

* ``manifest``: the collections exist and the manifest is recorded, no paper written yet
* ``chunks:N``: the Nth paper's chunks are written (and its stale chunks deleted), its record is not
* ``paper:N``: the Nth paper's record is written
* ``delete``: the first removed paper's record is deleted, its chunks are not
* ``generation``: every write is done, the generation is not bumped yet
"""

from __future__ import annotations

import os
import sys
import time

from tests.conftest import FakeEmbedder


def pause(point: str) -> None:
    print(f"PAUSED {point}", flush=True)
    gate = os.environ.get("HARDENING_GATE")
    while not (gate and os.path.exists(gate)):
        time.sleep(0.02)


def install_pause_points(point: str) -> None:
    from store.chroma import ChromaStore

    written = 0
    real_open, real_write = ChromaStore.open_for_writing, ChromaStore.write_papers
    real_delete, real_bump = ChromaStore.delete_papers, ChromaStore.bump_generation

    def open_for_writing(self, manifest):
        real_open(self, manifest)
        if point == "manifest":
            pause(point)

    def write_papers(self, writes):
        # One paper at a time, so that each point is the state after (or inside) one paper's write.
        nonlocal written
        for write in writes:
            written += 1
            if point == f"chunks:{written}":
                real_call = self._call

                def call(doing, fn, *args, real_call=real_call, **kwargs):
                    if doing == "write papers":
                        pause(point)
                    return real_call(doing, fn, *args, **kwargs)

                self._call = call
            try:
                real_write(self, [write])
            finally:
                self.__dict__.pop("_call", None)
            if point == f"paper:{written}":
                pause(point)

    def delete_papers(self, paper_ids):
        if point == "delete" and paper_ids:
            self._call("delete a paper", self._papers.delete, ids=[paper_ids[0]])
            pause(point)
        real_delete(self, paper_ids)

    def bump_generation(self):
        if point == "generation":
            pause(point)
        return real_bump(self)

    ChromaStore.open_for_writing = open_for_writing
    ChromaStore.write_papers = write_papers
    ChromaStore.delete_papers = delete_papers
    ChromaStore.bump_generation = bump_generation


def main(argv: list[str]) -> int:
    point = os.environ.get("HARDENING_PAUSE_AT")
    if point:
        install_pause_points(point)
    from ui.cli.main import main as cli_main

    code = 0
    command: list[str] = []
    for arg in [*argv, "+"]:
        if arg != "+":
            command.append(arg)
            continue
        code = cli_main(command, parts={"embedder": FakeEmbedder()})
        if code:
            return code
        command = []
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
