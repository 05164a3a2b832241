"""`paperchat ask` as users run it, against the scripted OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rag.types import Answer
from tests.conftest import PROJECT_ROOT
from tests.fake_llm import ScriptedLLMServer, free_port
from ui.cli.main import main

pytestmark = pytest.mark.slow
KEY = "sk-test-SECRET-123"
QUESTION = "state space models for choosing clients in federated learning"


@pytest.fixture(scope="module")
def index_dir(bundled_index):
    return bundled_index


@pytest.fixture
def env(index_dir, monkeypatch):
    for key in list(os.environ):
        if key.startswith(("PAPERCHAT_", "OPENAI_")):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PAPERCHAT_DATA_DIR", str(index_dir))
    monkeypatch.setenv("PAPERCHAT_LLM_API_KEY", KEY)
    monkeypatch.setenv("PAPERCHAT_LLM_TIMEOUT", "2")
    monkeypatch.setenv("PAPERCHAT_LLM_RETRIES", "1")
    return monkeypatch


def test_ask_json_strips_unknown_marker_and_maps_citations(index_dir):
    with ScriptedLLMServer(reply="FedSSM predicts training dynamics [1]. It is compared with others [2]. "
                                 "Also see [99].") as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERCHAT_", "OPENAI_"))}
        env.update(PAPERCHAT_DATA_DIR=str(index_dir), PAPERCHAT_LLM_BASE_URL=server.base_url,
                   PAPERCHAT_LLM_API_KEY=KEY)
        result = subprocess.run([sys.executable, "-m", "ui.cli", "ask", QUESTION, "--json"], cwd=PROJECT_ROOT,
                                env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        payload = json.loads(result.stdout)
        assert "[99]" not in payload["answer"] and "99" not in payload["answer"]
        assert payload["citations"][0]["marker"] == 1
        # "It is compared with others" says nothing a source can be checked for: flagged, its [2] removed.
        assert [c["supported"] for c in payload["claims"]] == [True, False, False]  # "Also see." too
        assert [c["marker"] for c in payload["citations"]] == [1]
        assert payload["citations"][0]["title"] == "FedSSM" == payload["sources"][0]["title"]
        assert payload["citations"][0]["ordinal"] == 1 and payload["citations"][0]["evidence"]
        assert payload["grounded"] is True and payload["refused"] is False
        assert payload["backend"].startswith("endpoint")
        request = server.chat_requests[-1]
        assert request["headers"]["Authorization"] == f"Bearer {KEY}"
        assert "We propose FedSSM" in request["json"]["messages"][-1]["content"]
        assert KEY not in result.stdout + result.stderr


FAULTS = [
    ("refused", {}, "cannot reach"),
    ("hang", {"mode": "hang"}, "PAPERCHAT_LLM_TIMEOUT"),
    ("401", {"mode": "status", "status_code": 401}, "PAPERCHAT_LLM_API_KEY"),
    ("404-model", {"strict_model": True}, "scripted-model"),
    ("429", {"mode": "status", "status_code": 429, "retry_after": "0"}, "429"),
    ("500", {"mode": "status", "status_code": 500}, "500"),
    ("malformed", {"mode": "malformed", "malformed_after": 0}, "not"),
]


@pytest.mark.parametrize(("name", "attrs", "fragment"), FAULTS, ids=[f[0] for f in FAULTS])
def test_fault_is_one_clean_line(env, capsys, name, attrs, fragment):
    with ScriptedLLMServer(**{k: v for k, v in attrs.items()}) as server:
        base = f"http://127.0.0.1:{free_port()}/v1" if name == "refused" else server.base_url
        env.setenv("PAPERCHAT_LLM_BASE_URL", base)
        if name == "404-model":
            env.setenv("PAPERCHAT_LLM_MODEL", "no-such-model")
        code = main(["ask", QUESTION, "--json"])
    out = capsys.readouterr()
    assert code != 0
    assert out.out == ""
    lines = out.err.strip().splitlines()
    assert len([line for line in lines if "error" in line]) == 1, out.err
    assert fragment.lower() in out.err.lower()
    assert "Traceback" not in out.err and KEY not in out.err


@pytest.mark.parametrize("mode", ["no_stream", "usage_only", "reasoning", "think", "keepalive", "split", "cut"])
def test_stream_variants_give_an_answer(env, capsys, mode):
    with ScriptedLLMServer(mode=mode, reply="FedSSM uses state space models [1].", chunk_size=4) as server:
        env.setenv("PAPERCHAT_LLM_BASE_URL", server.base_url)
        code = main(["ask", QUESTION, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    payload = json.loads(out.out)
    assert "<think>" not in payload["answer"]
    assert payload["interrupted"] is (mode == "cut")
    if mode == "cut":  # the cut sentence is a fragment: kept as written, not checked
        assert payload["answer"].startswith("FedSSM") and payload["claims"] == []
    else:
        assert payload["answer"] == "FedSSM uses state space models [1]." and payload["claims"][0]["supported"]
    if mode in ("reasoning", "think"):
        assert payload["reasoning"]


def test_extractive_batch_with_history(env, capsys, tmp_path):
    batch = tmp_path / "b.jsonl"
    batch.write_text(
        json.dumps({"question": "What did the MA-RAG authors evaluate on?"}) + "\n"
        + json.dumps({"question": "how many benchmarks did they use?",
                      "history": [{"role": "user", "content": "Tell me about MA-RAG"},
                                  {"role": "assistant", "content": "MA-RAG is a RAG method [1]."}]}) + "\n"
    )
    code = main(["ask", "--batch", str(batch), "--json", "--extractive"])
    out = capsys.readouterr()
    assert code == 0, out.err
    rows = [json.loads(line) for line in out.out.splitlines()]
    assert len(rows) == 2 and all(r["backend"].startswith("extractive") for r in rows)
    assert rows[0]["citations"][0]["title"] == "MA-RAG" and "medical" in rows[0]["answer"].lower()
    assert rows[1]["citations"][0]["title"] == "MA-RAG"


@pytest.mark.parametrize(("second", "fragment"), [
    ({"question": "   "}, "record 2: the question is empty"),
    ({"question": "and then?", "history": "Tell me about MA-RAG"}, "record 2: 'history' must be a list"),
    ({"query": 5}, "record 2: no 'question' string"),
    # A turn without its text, or with a role no conversation has, is no history: said, not silently skipped.
    ({"question": "and then?", "history": [{"role": "user"}]}, "record 2: 'history' must be a list"),
    ({"question": "and then?", "history": [{"role": "moderator", "content": "x"}]}, '"role": "user" or "assistant"'),
])
def test_a_bad_batch_record_is_said_before_any_answer_or_model_start(env, capsys, tmp_path, second, fragment):
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({"question": "What did the MA-RAG authors evaluate on?"}) + "\n"
                     + json.dumps(second) + "\n")
    code = main(["ask", "--batch", str(batch), "--json"])  # no endpoint: the embedded model would answer
    out = capsys.readouterr()
    assert code == 1 and fragment in out.err, out.err
    assert out.out == "" and "embedded" not in out.err  # no answer written, nothing started or announced


@pytest.mark.parametrize("command", ["ask", "search"])
def test_an_empty_batch_file_is_an_error_not_silence(env, capsys, tmp_path, command):
    batch = tmp_path / "empty.jsonl"
    batch.write_text("\n")
    code = main([command, "--batch", str(batch), "--json"])
    out = capsys.readouterr()
    assert code == 1 and out.out == "" and f"{batch} holds no questions" in out.err


def test_a_detail_the_abstract_does_not_state_shows_the_nearest_paper_not_its_support(env, capsys):
    code = main(["ask", "--extractive", "What are the names of the four benchmarks FedSSM was evaluated on?"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "The abstract of FedSSM does not state this [1]: it names no benchmarks." in out.out
    assert "nearest paper, does not state this" in out.out and "closest sentence: " in out.out
    assert "support 0.00" not in out.out and "evidence: " not in out.out


def test_a_question_searched_in_other_words_says_what_was_searched(capsys):
    # "What did FedSMM evaluate on?" was answered about FedSSM without a word on the name put right.
    from ui.cli.answers import show_sources

    show_sources(Answer(question="What did FedSMM evaluate on?", answer="...", backend="extractive (no LLM)",
                        search_query="What did FedSSM evaluate on?"))
    assert 'note: searched for "What did FedSSM evaluate on?"' in capsys.readouterr().out
    show_sources(Answer(question="What is FedSSM?", answer="...", search_query="What is  FedSSM?"))
    assert "searched for" not in capsys.readouterr().out
