"""Fixtures for the UI tests: a tiny real index (fake embedder) behind real ``Components``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import BUNDLED_CORPUS, PROJECT_ROOT
from tests.processes import child_env as clean_env

XSS_TITLE = "ProbeXSS <b>bold</b> injection"
XSS_ABSTRACT = (
    "We study markup injection in chat assistants that render paper abstracts, e.g. about client selection. "
    "This abstract holds <script>alert(1)</script> and <img src=x onerror=alert(1)> as plain text. "
    "Rendering must escape markup so that no script runs."
)
XSS_RECORD = {"id": "probe-xss", "title": XSS_TITLE, "abstract": XSS_ABSTRACT, "venue": "test"}
IMG_PAYLOAD = "<img src=x onerror=alert(1)>"
SCRIPT_PAYLOAD = "<script>alert(1)</script>"


def tiny_papers():
    """FedSSM, MA-RAG and a few more bundled papers, plus the markup-injection probe."""
    from rag.corpus.load import load_corpus
    from rag.types import Paper

    bundled = load_corpus([BUNDLED_CORPUS]).papers
    wanted = {"000_dcbf1b5d2daaeff5.txt#1", "002_735305cd7294d037.txt#1", "000_dcbf1b5d2daaeff5.txt#5",
              "000_dcbf1b5d2daaeff5.txt#8", "000_dcbf1b5d2daaeff5.txt#7"}
    papers = [p for p in bundled if p.paper_id in wanted]
    assert len(papers) == len(wanted)
    papers.append(Paper("probe-xss", XSS_TITLE, XSS_ABSTRACT, "extra.jsonl", 1))
    return papers


@pytest.fixture
def make_components(settings_factory, fake_embedder):
    """``make_components(**settings)`` -> Components over a tiny index built with the fake embedder."""
    from rag.components import Components

    made = []

    def make(**overrides):
        components = Components(settings_factory(**overrides), embedder=fake_embedder)
        components.ingestor(show_progress=False).ingest(tiny_papers())
        made.append(components)
        return components

    yield make
    for components in made:
        components.close()


# --- helpers for the slow tests that start real processes ----------------------------------------------------------


def start_fake_llm(reply: str, *args: str) -> tuple[subprocess.Popen, str]:
    """``python -m tests.fake_llm`` on a free port; returns the process and its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_llm", "--port", "0", "--reply", reply, *args],
        cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(),
    )
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    return proc, url


def start_app(env: dict[str, str], port: int, log_path: Path) -> subprocess.Popen:
    log = log_path.open("w")
    return subprocess.Popen(
        [sys.executable, "app.py", "--port", str(port)],
        cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )


def wait_for_app(proc: subprocess.Popen, url: str, log_path: Path, timeout: float = 150.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the app exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=2.0, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"the app did not come up in {timeout}s:\n{log_path.read_text()[-3000:]}")


def write_extra_corpus(path: Path) -> Path:
    path.write_text(json.dumps(XSS_RECORD) + "\n", encoding="utf-8")
    return path


# --- a served app with the API and MCP server (one per test module) ------------------------------------------------

API_KEY = "test-api-key-7f3c9a"


class ServedApp:
    """A running app (UI, ``/v1``, ``/mcp`` on one 127.0.0.1 port) in this process, over the tiny index."""

    def __init__(self, url: str, components, demo, llm) -> None:
        self.url = url  # ends in "/"
        self.components = components
        self.demo = demo
        self.llm = llm  # the scripted endpoint behind the "paperchat" model

    @property
    def api_url(self) -> str:
        return self.url + "v1"


@pytest.fixture(scope="module")
def served_app(tmp_path_factory, request):
    """``served_app`` for a module: the tiny index (fake embedder), the scripted LLM as the default writer.

    A module sets ``SERVED_SETTINGS`` (a dict) to change settings, e.g. ``{"api_key": API_KEY}``.
    """
    from rag.components import Components
    from rag.settings import load_settings
    from tests.conftest import FakeEmbedder
    from tests.fake_llm import ScriptedLLMServer
    from tests.processes import free_port
    from ui.serve import launch_with_api
    from ui.web.app import build_app

    # The fake embedder is a 64-d hashed bag of words: its dense scores are mostly collision noise, so these
    # tiny-corpus rankings weigh it as the hand-set fusion did (the fitted default trusts a real model more).
    overrides = {"dense_weight": 0.5, **getattr(request.module, "SERVED_SETTINGS", {})}
    host = overrides.pop("host", "127.0.0.1")
    folder = tmp_path_factory.mktemp("served")
    with pytest.MonkeyPatch.context() as mp, ScriptedLLMServer() as llm:
        for key in list(os.environ):
            if key.startswith("PAPERCHAT_") or key in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
                mp.delenv(key)
        settings = load_settings(data_dir=folder / "index", llm="endpoint", llm_base_url=llm.base_url,
                                 llm_retries=0, **overrides)
        components = Components(settings, embedder=FakeEmbedder())
        components.ingestor(show_progress=False).ingest(tiny_papers())
        demo = build_app(components)
        try:
            url = launch_with_api(demo, components, host=host, port=free_port())
            yield ServedApp(url.replace("0.0.0.0", "127.0.0.1"), components, demo, llm)
        finally:
            demo.close()
            components.close()


def type_text(locator, text: str) -> None:
    """Put ``text`` in a Gradio text box the way a person leaves it before the next action.

    Playwright's ``fill`` sets the whole value in one event; Gradio's box hands it to the app a frame later,
    so an Enter or a click sent at once can carry the old value on a loaded machine (CI saw the endpoint box
    submit the old URL). A person's next key comes long after that frame: wait for two of them."""
    locator.fill(text)
    locator.page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
