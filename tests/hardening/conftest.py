"""Helpers for the hardening tests: the CLI with the fake embedder (in-process and as a process), clean
environments for child processes, and a snapshot of everything an index holds, to compare two indexes."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT
from tests.fake_llm import ScriptedLLMServer
from tests.processes import child_env, free_port, stop_process

QUERIES = (
    "state space models for choosing clients in federated learning",
    "heart sound synthesis from electrocardiograms",
    "quokka zebrafish ablations",  # words only the changed abstract of the update corpus has
)


def clean_env(**extra: str) -> dict[str, str]:
    """A clean child environment (tests/processes.py) in which the durability scenarios can count chunks:
    one chunk per abstract with the fake embedder."""
    return child_env(**{"PAPERCHAT_CHUNK_MAX_TOKENS": "256", **extra})


def start_driver(args: list[str], data_dir: Path, **env: str) -> subprocess.Popen:
    """``python -m tests.hardening.driver ARGS`` (the CLI with the fake embedder) as a process."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.hardening.driver", *args], cwd=PROJECT_ROOT,
        env=clean_env(PAPERCHAT_DATA_DIR=str(data_dir), **env),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def run_driver(args: list[str], data_dir: Path, *, timeout: float = 120, preexec_fn=None,
               **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tests.hardening.driver", *args], cwd=PROJECT_ROOT,
        env=clean_env(PAPERCHAT_DATA_DIR=str(data_dir), **env), capture_output=True, text=True,
        timeout=timeout, preexec_fn=preexec_fn,
    )


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL a process started here (by its id) and reap it."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)


@contextlib.contextmanager
def fake_cli_env(data_dir: Path, **env: str):
    """Run ``ui.cli.main.main`` in this process (``cli``) with the index in ``data_dir`` and ``env`` set."""
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.startswith("PAPERCHAT_") or key in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
                mp.delenv(key)
        mp.setenv("PAPERCHAT_DATA_DIR", str(data_dir))
        mp.setenv("PAPERCHAT_CHUNK_MAX_TOKENS", "256")  # as in clean_env: one chunk per abstract
        for key, value in env.items():
            mp.setenv(key, value)
        yield mp


def cli(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """``ui.cli.main.main(args)`` in this process, with the fake embedder: (exit code, stdout, stderr). Use
    inside ``fake_cli_env``."""
    from tests.conftest import FakeEmbedder
    from ui.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    real_stdin = sys.stdin
    try:
        if stdin is not None:
            sys.stdin = io.StringIO(stdin)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args), parts={"embedder": FakeEmbedder()})
    finally:
        sys.stdin = real_stdin
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def fake_cli(tmp_path):
    """The in-process CLI over an index in ``tmp_path / "data"`` built with the fake embedder."""
    data_dir = tmp_path / "data"
    with fake_cli_env(data_dir):
        yield data_dir


def snapshot(data_dir: Path, queries=QUERIES) -> dict:
    """Everything a user can observe of an index: stats, every paper and chunk, and search results."""
    from rag.retrieval.hybrid import HybridRetriever
    from store.bm25 import LexicalIndex
    from store.chroma import ChromaStore
    from tests.conftest import FakeEmbedder

    with fake_cli_env(data_dir):
        code, out, err = cli("stats", "--json")
    assert code == 0, err
    stats = json.loads(out)
    stats.pop("store")
    store = ChromaStore(path=data_dir / "chroma", collection="paperchat")
    embedder = FakeEmbedder()
    manifest = {k: v for k, v in (store.manifest() or {}).items() if k != "generation"}
    retriever = HybridRetriever(store, embedder, LexicalIndex(data_dir / "lexical" / "paperchat"))
    return {
        "stats": stats,
        "manifest": manifest,
        "papers": store.paper_hashes(),
        "chunks": sorted(store.iter_chunks()),
        "search": {q: [(h.paper_id, round(h.score, 5), round(h.lexical_score, 5)) for h in retriever.search(q, 5)]
                   for q in queries},
    }


# --- the app for the load test, prepared in the background ------------------------------------------------------------
#
# Building the index with the real model and starting the app take most of the load test's time, and use a
# process of their own: they start with the first test of this folder and run while the others do, when the
# load test is among the tests collected.

TOKEN = re.compile(r"\bzq[0-9a-f]{8}\b")


def echo_token(body: dict) -> str:
    """The scripted reply for the load test: the token of the question asked in this request's prompt."""
    prompt = body["messages"][-1]["content"]
    asked = prompt.rsplit("Question:", 1)[-1]
    tokens = TOKEN.findall(asked)
    # What source [1] says (its abstract's first sentence), so that the claim checks out against it.
    first = re.search(r"^\[1\] [^\n]*\n(.+?[.!?])(?:\s|$)", prompt, re.MULTILINE)
    said = first.group(1).rstrip(".!?") if first else "it asked about this paper"
    return f"Session {tokens[0] if tokens else 'none'}: {said} [1]."


class CountingLLMServer(ScriptedLLMServer):
    """The scripted server, counting the answers it streams at once (``peak``)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._count_lock = threading.Lock()
        self.streaming = self.peak = 0

    def start(self) -> CountingLLMServer:
        super().start()
        server = self

        class Counting(self._httpd.RequestHandlerClass):
            def _stream(self, *args, **kwargs):
                self._counted = True
                with server._count_lock:
                    server.streaming += 1
                    server.peak = max(server.peak, server.streaming)
                try:
                    return super()._stream(*args, **kwargs)
                finally:
                    self._uncount()

            def _write(self, data: bytes, *args, **kwargs):
                # The client is done once it reads the finish chunk and may start its next answer while this
                # thread still writes [DONE] and sleeps: an answer stops counting before that chunk leaves, so
                # only answers the app really has under way at once are counted together.
                if b'"finish_reason": "stop"' in data:
                    self._uncount()
                return super()._write(data, *args, **kwargs)

            def _uncount(self) -> None:
                if getattr(self, "_counted", False):
                    self._counted = False
                    with server._count_lock:
                        server.streaming -= 1

        self._httpd.RequestHandlerClass = Counting
        return self


class LoadApp:
    """``python -m ui.cli ingest`` into a fresh data folder, then ``python app.py`` over it, pointed at a
    slow scripted endpoint in this process that echoes each question's token."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data_dir = root / "data"
        self.log = root / "app.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.llm = CountingLLMServer(reply=echo_token, delay=0.02, chunk_size=4)
        self.proc: subprocess.Popen | None = None
        self.error: BaseException | None = None
        self.timings: dict[str, float] = {}
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._ingest: subprocess.Popen | None = None
        self._stopping = False

    def start(self) -> LoadApp:
        if self._thread is None:
            self._thread = threading.Thread(target=self._prepare, name="load-app", daemon=True)
            self._thread.start()
        return self

    def _prepare(self) -> None:
        try:
            started = time.monotonic()
            with self._lock:
                assert not self._stopping, "stopped before the ingest started"
                self._ingest = subprocess.Popen(
                    [sys.executable, "-m", "ui.cli", "ingest"], cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True, env=clean_env(PAPERCHAT_DATA_DIR=str(self.data_dir)),
                )
            _, err = self._ingest.communicate(timeout=900)
            assert self._ingest.returncode == 0, err
            self.timings["ingest"] = time.monotonic() - started
            self.llm.start()
            started = time.monotonic()
            env = clean_env(PAPERCHAT_DATA_DIR=str(self.data_dir), PAPERCHAT_LLM_BASE_URL=self.llm.base_url)
            with self._lock, self.log.open("w") as sink:
                assert not self._stopping, "stopped before the app started"
                self.proc = subprocess.Popen([sys.executable, "app.py", "--port", str(self.port)], cwd=PROJECT_ROOT,
                                             env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
            self._wait_for_page(timeout=300)
            self.timings["start"] = time.monotonic() - started
        except BaseException as error:  # handed to the test that waits
            self.error = error
        finally:
            self._ready.set()

    def _wait_for_page(self, timeout: float) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the app exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url, timeout=2.0, trust_env=False).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"the app did not come up in {timeout:.0f} s:\n{self.log.read_text()[-3000:]}")

    def wait(self, timeout: float = 900) -> LoadApp:
        self.start()
        assert self._ready.wait(timeout), "the app for the load test was not ready in time"
        if self.error is not None:
            raise AssertionError(f"preparing the app failed: {self.error}") from self.error
        return self

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            if self._ingest is not None and self._ingest.poll() is None:
                kill(self._ingest)  # the session ended before the load test ran (-x, Ctrl-C)
        if self._thread is not None:
            self._ready.wait(300)
        if self.proc is not None:
            stop_process(self.proc, timeout=5)
        self.llm.close()


@pytest.fixture(scope="session", autouse=True)
def load_app(request, tmp_path_factory):
    """The LoadApp, started as soon as this folder's first test runs if the load test was collected."""
    app = LoadApp(tmp_path_factory.mktemp("load"))
    if any(item.nodeid.startswith("tests/hardening/test_load.py") for item in request.session.items):
        app.start()
    yield app
    app.stop()
