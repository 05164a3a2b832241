"""Issue 17, "Hardening, round 2": each reproduction of the independent probe, as a test.

The sections follow the issue's numbering. Endpoints are real HTTP servers on 127.0.0.1
(tests/fake_llm.py); the CLI runs in this process with the fake embedder (tests/hardening/conftest.py).
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from pathlib import Path

import pytest

from rag.errors import LLMInterrupted, LLMTimeout
from rag.llm.client import OpenAIChatModel
from tests.conftest import BUNDLED_CORPUS, FakeEmbedder
from tests.fake_llm import ScriptedLLMServer
from tests.hardening.conftest import cli, fake_cli_env

QUESTION = "state space models for choosing clients in federated learning"
KEY = "sk-live-TOPSECRET-4242"
PASSWORD = "pw-Hunter2-SECRET"

MESSAGES = [{"role": "user", "content": "What is new?"}]


def within(seconds: float, call):
    """``call()``'s result or exception, failing the test (not hanging it) if it takes longer than ``seconds``."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # noqa: BLE001 - handed back to the test
            outcome["error"] = error

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


# --- 1. streams without an end ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["ping", "trickle"])
def test_a_stream_that_never_ends_is_cut_at_the_answer_deadline(mode):
    with ScriptedLLMServer(mode=mode, reply="words keep coming", delay=0.1) as server, OpenAIChatModel(
        server.base_url, model="scripted-model", timeout=1.0, retries=0
    ) as model:
        started = time.monotonic()
        error_type = LLMTimeout if mode == "ping" else LLMInterrupted
        with pytest.raises(error_type) as caught:
            within(15, lambda: model.complete(MESSAGES))
        elapsed = time.monotonic() - started
    deadline = model.answer_deadline
    assert deadline == pytest.approx(3.0)
    assert deadline - 0.2 <= elapsed < deadline + 1.5
    message = str(caught.value)
    assert "PAPERCHAT_LLM_TIMEOUT" in message and "\n" not in message
    if mode == "trickle":
        assert caught.value.partial.startswith("words keep coming")


def test_a_stream_that_goes_silent_after_part_of_the_answer_ends_at_the_deadline_not_later():
    """The read timeout alone would end it one PAPERCHAT_LLM_TIMEOUT after the last byte."""
    # A word every 1.4 s (each event sleeps 0.7 s, then the loop waits 0.7 s), the deadline at 4.5 s: the
    # word due at 5.6 s would be the first chance to notice it without a watchdog.
    with ScriptedLLMServer(mode="trickle", reply="slow", delay=0.7) as server, OpenAIChatModel(
        server.base_url, model="scripted-model", timeout=1.5, retries=0
    ) as model:
        started = time.monotonic()
        with pytest.raises(LLMInterrupted):
            within(15, lambda: model.complete(MESSAGES))
        elapsed = time.monotonic() - started
    assert elapsed < model.answer_deadline + 0.6


@pytest.mark.parametrize("mode", ["stream", "no_stream"])
def test_an_endless_answer_is_capped_in_size(mode):
    with ScriptedLLMServer(reply="x" * 200_000, chunk_size=4000, mode=mode) as server, OpenAIChatModel(
        server.base_url, model="scripted-model", timeout=10.0, retries=0, max_tokens=512
    ) as model, pytest.raises(LLMInterrupted) as caught:
        within(15, lambda: model.complete(MESSAGES))
    assert len(caught.value.partial) == model.max_answer_chars
    assert "PAPERCHAT_LLM_MAX_TOKENS" in str(caught.value)


# --- 2. quadratic citation cleanup --------------------------------------------------------------------------------


class CountingPattern:
    """Stands in for a compiled regex and adds up how many characters each call is given to scan."""

    def __init__(self, pattern) -> None:
        self.pattern = pattern
        self.scanned = 0

    def __getattr__(self, name):
        method = getattr(self.pattern, name)

        def counted(string, pos=0, *args):
            self.scanned += len(string) - pos
            return method(string, pos, *args)

        return counted


def test_nested_markers_are_cleaned_in_one_pass(monkeypatch):
    import rag.answers.citations as citations

    depth = 4000
    text = "Intro " + "[" * depth + "99" + "]99" * (depth - 1) + "] end."  # [[[...[99]99]99]
    counting = CountingPattern(citations.MARKER)
    monkeypatch.setattr(citations, "MARKER", counting)
    cleaned, removed = citations.clean_markers(text, {1, 2})
    assert (cleaned, removed) == ("Intro end.", depth)
    assert counting.scanned <= 10 * len(text)  # linear; one pass per nesting level scanned ~depth x the text


def test_the_marker_filter_holds_back_a_bounded_amount_of_an_endless_marker():
    from rag.answers.pipeline import MarkerFilter

    markers = MarkerFilter({1})
    shown = [markers.feed("Answer [1")]
    for _ in range(20_000):
        shown.append(markers.feed(",1"))
        assert len(markers.buffer) <= MarkerFilter.MAX_HELD
    shown.append(markers.flush())
    assert "".join(shown) == "Answer [1" + ",1" * 20_000


def test_streamed_markers_are_cleaned_as_before():
    from rag.answers.pipeline import MarkerFilter

    text = "Both work [1, 9]. See [9] and [2]; also [[9]1].\nStart [9]."
    for size in (1, 2, 3, 7, 100):
        markers = MarkerFilter({1, 2})
        out = "".join(markers.feed(text[i : i + size]) for i in range(0, len(text), size)) + markers.flush()
        # A space already shown before a dropped marker stays (the final answer is cleaned in one piece).
        assert " ".join(out.replace(" .", ".").split()) == "Both work [1]. See and [2]; also [1]. Start."
        assert markers.removed == 4


# --- 3. credentials in the endpoint URL, and 10. key redaction beyond exact matches ---------------------------------


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    """The first bundled file, with the fake embedder."""
    root = tmp_path_factory.mktemp("round2")
    with fake_cli_env(root / "data"):
        code, _, err = cli("ingest", str(BUNDLED_CORPUS / "000_dcbf1b5d2daaeff5.txt"))
    assert code == 0, err
    return root / "data"


class StrictEmbedder(FakeEmbedder):
    """Refuses text that is not valid Unicode, as the real tokenizer (Rust) does."""

    def count_tokens(self, text: str) -> int:
        text.encode("utf-8")
        return super().count_tokens(text)

    def embed(self, texts):
        for text in texts:
            text.encode("utf-8")
        return super().embed(texts)


def components_for(embedder=None):
    from rag.components import Components
    from rag.settings import load_settings

    return Components(load_settings(), embedder=embedder or FakeEmbedder())


def answered_in_the_ui(question: str):
    """A new web UI session with the server's settings: (its settings, the status line, the session after
    ``question`` was answered)."""
    from ui.web import callbacks
    from ui.web.callbacks import ChatSession

    components = components_for()
    try:
        defaults = components.session_defaults()
        status = callbacks.status(components, defaults)
        return defaults, status, list(callbacks.respond(components, question, ChatSession(), defaults))[-1]
    finally:
        components.close()


def test_url_credentials_never_show_but_are_still_sent(index_dir, caplog):

    caplog.set_level(logging.DEBUG)
    with ScriptedLLMServer(reply="FedSSM selects clients [1].", mode="status", status_code=503,
                           fail_times=1, error_message="overloaded") as server:
        url = server.base_url.replace("http://", f"http://bob:{PASSWORD}@")
        with fake_cli_env(index_dir, PAPERCHAT_LLM_BASE_URL=url, PAPERCHAT_LLM_RETRIES="1"):
            code, out, err = cli("doctor")
            defaults, status, state = answered_in_the_ui(QUESTION)
        sent, plain_url = server.chat_requests[-1], server.base_url
    shown = [out, err, defaults.base_url, status, json.dumps(state.messages), caplog.text]
    assert all(PASSWORD not in text and "bob:" not in text for text in shown), shown
    assert defaults.base_url == plain_url  # the Settings field shows the URL without its login...
    assert "FedSSM" in state.messages[-1]["content"]  # ...and answering through it still logs in
    assert sent["headers"]["Authorization"] == "Basic " + base64.b64encode(f"bob:{PASSWORD}".encode()).decode()
    assert sent["path"] == "/v1/chat/completions"


@pytest.mark.slow
def test_url_credentials_are_not_in_the_page_config(index_dir):
    from ui.web.app import build_app

    url = f"http://bob:{PASSWORD}@127.0.0.1:9/v1"
    with fake_cli_env(index_dir, PAPERCHAT_LLM_BASE_URL=url):
        components = components_for()
        try:
            config = json.dumps(build_app(components).get_config_file(), default=str)
        finally:
            components.close()
    assert "http://127.0.0.1:9/v1" in config
    assert PASSWORD not in config


def test_url_credentials_and_an_api_key_are_both_sent():
    with ScriptedLLMServer(reply="ok") as server:
        url = server.base_url.replace("http://", f"http://bob:{PASSWORD}@")
        with OpenAIChatModel(url, api_key=KEY, model="scripted-model") as model:
            assert model.complete(MESSAGES)[0] == "ok"
            assert PASSWORD not in model.label + repr(model)
        headers = server.chat_requests[-1]["headers"]
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert headers["Proxy-Authorization"] == "Basic " + base64.b64encode(f"bob:{PASSWORD}".encode()).decode()


ECHOES = {
    "base64": lambda token: base64.b64encode(f"Bearer {token}".encode()).decode(),
    "upper case": str.upper,
    "spaced out": lambda token: " ".join(token),
    "dotted": lambda token: ".".join(token),
}


@pytest.mark.parametrize("echo", list(ECHOES))
def test_a_key_echoed_in_disguise_is_redacted_everywhere(index_dir, echo):

    def hidden(text: str) -> bool:
        squeezed = "".join(ch for ch in text.lower() if ch.isalnum())
        return "topsecret" not in squeezed and ECHOES[echo](KEY) not in text

    with ScriptedLLMServer(api_key="the-right-key", echo=ECHOES[echo]) as server, fake_cli_env(
        index_dir, PAPERCHAT_LLM_BASE_URL=server.base_url, PAPERCHAT_LLM_API_KEY=KEY, PAPERCHAT_LLM_RETRIES="0"
    ):
        code, out, err = cli("ask", QUESTION)
        assert code != 0 and "rejected the API key" in err
        doctor = cli("doctor")
        defaults, status, state = answered_in_the_ui(QUESTION)
    assert "key rejected" in status
    for text in (out, err, doctor[1], doctor[2], status, json.dumps(state.messages)):
        assert hidden(text), text


# --- 5. lone surrogates and invalid bytes ------------------------------------------------------------------------


def write_jsonl(path, records) -> None:
    """One JSON object per line, non-ASCII escaped: lone surrogates stay valid JSON (``"\\ud800"``)."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="ascii")


def test_lone_surrogates_in_records_and_questions_are_replaced_not_fatal(tmp_path):
    corpus = tmp_path / "odd.jsonl"
    write_jsonl(corpus, [
        {"_id": "bad\ud800id", "title": "Graph neural networks", "text": "Graph neural networks pass messages."},
        {"_id": "p2", "title": "Surrogate abstract", "text": "Message passing \ud800 over graphs of molecules."},
        {"_id": "p3", "title": "Plain", "text": "Federated clients choose state space models."},
    ])
    with fake_cli_env(tmp_path / "data"):
        code, out, err = cli("ingest", str(corpus))
        assert code == 0, err
        assert "3 added" in out
        code, out, err = cli("search", "graph \udcff neural")  # what an invalid byte in argv becomes
        assert code == 0, err
        assert "Graph neural networks" in out and "\ufffd" not in err
        code, out, err = cli("search", "--json", "graph neural")
        assert code == 0, err
        assert "bad\ufffdid" in json.loads(out)["hits"][0]["paper_id"]


def test_a_lone_surrogate_in_the_chat_api_is_answered(index_dir, caplog):
    from ui.web import callbacks

    with fake_cli_env(index_dir, PAPERCHAT_LLM="extractive"):
        components = components_for(StrictEmbedder())
        try:
            text = callbacks.api_chat(components, "state space \ud800 models for client selection")
        finally:
            components.close()
    assert "FedSSM" in text or "Nearest papers" in text
    assert "Traceback" not in caplog.text


# --- 7. terminal escapes -----------------------------------------------------------------------------------------


def test_terminal_escapes_in_names_ids_and_answers_are_shown_not_obeyed(tmp_path):
    corpus = tmp_path / "evil\x1b]0;owned\x07.jsonl"
    write_jsonl(corpus, [{"_id": "id\x1b[2J", "title": "Graph \x9b2J networks \u202etxt.exe",
                          "text": "Graph neural networks pass messages between nodes."}])
    with ScriptedLLMServer(reply="Graphs \x1b[2J\x1b]0;pwned\x07 pass messages [1].") as server, fake_cli_env(
        tmp_path / "data", PAPERCHAT_LLM_BASE_URL=server.base_url
    ):
        assert cli("ingest", str(corpus))[0] == 0
        outputs = [cli("search", "graph neural networks"), cli("ask", "graph neural networks messages")]
    for code, out, err in outputs:
        assert code == 0, err
        for control in ("\x1b", "\x07", "\x9b", "\u202e"):
            assert control not in out + err
    assert "\\x1b]0;owned\\x07" in outputs[0][1]  # shown, escaped: the user sees what the name holds
    assert "\\x1b[2J" in outputs[1][1]


# --- 8. Markdown breakouts ---------------------------------------------------------------------------------------


def rendered(markdown: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").render(markdown)


def test_a_backtick_in_a_file_name_stays_inside_its_code_span():
    from rag.types import Answer, Citation
    from ui.web.render import answer_markdown

    citations = [Citation(1, "p1", "First", "odd`name.jsonl", 1, weak=True),
                 Citation(2, "p2", "Second", "plain.jsonl", 2)]
    html = rendered(answer_markdown(Answer("q", "Claims [1] and [2].", citations=citations, grounded=True)))
    assert "<code>#1 of odd`name.jsonl</code>" in html  # the place label (rag/labels.py), in one code span
    assert "<code>#2 of plain.jsonl</code>" in html
    assert "weakly supported" in html.split("<code>#1 of odd`name.jsonl</code>")[1].split("<code>")[0]


def test_an_unclosed_code_fence_in_an_answer_does_not_swallow_the_note_and_sources():
    from rag.types import Answer, Citation
    from ui.web.render import answer_markdown

    answer = Answer("q", "Use this [1]:\n```python\nprint('hi')", citations=[Citation(1, "p1", "First", "a.jsonl", 1)],
                    grounded=True, invalid_markers=1)
    html = rendered(answer_markdown(answer))
    code_blocks = html.split("<pre>")[1:]
    assert len(code_blocks) == 1
    code = code_blocks[0].split("</pre>")[0]
    assert "print(" in code
    assert "Note" not in code and "Sources" not in code and "a.jsonl" not in code
    assert "<strong>Sources</strong>" in html


# --- 9. a stalled Chroma server ----------------------------------------------------------------------------------


def test_a_stalled_chroma_server_fails_within_the_timeout_with_a_clear_error():
    """A socket that accepts connections and never answers: what `kill -STOP` on `chroma run` leaves."""
    import socket

    from rag.errors import StoreUnavailable
    from store.chroma import ChromaStore

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # the kernel accepts; nobody reads or answers
        port = listener.getsockname()[1]
        store = ChromaStore(host="127.0.0.1", port=port, timeout=1)
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as caught:
            within(20, store.counts)
        elapsed = time.monotonic() - started
    assert elapsed < 8
    message = str(caught.value)
    assert "did not answer within 1 s" in message and "PAPERCHAT_CHROMA_TIMEOUT" in message and "\n" not in message


# --- 6. symbolic links out of the corpus folder ------------------------------------------------------------------


def test_a_link_out_of_the_corpus_folder_is_skipped_without_reading_its_target(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_jsonl(folder / "good.jsonl", [{"_id": "g1", "title": "Graph networks", "text": "Graphs pass messages."}])
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET first line\n\nroot:x:0:0 private words here.\n", encoding="utf-8")
    (folder / "secret.txt").symlink_to(outside / "secret.txt")
    (folder / "elsewhere").symlink_to(outside, target_is_directory=True)
    (folder / "inner.jsonl").symlink_to(folder / "good.jsonl")  # a link inside the folder is fine (read once)
    with fake_cli_env(tmp_path / "data"):
        code, out, err = cli("ingest", str(folder))
        found = cli("search", "--json", "TOPSECRET private words")[1]
    assert code == 1 and "1 added" in out
    assert err.count("outside the corpus folder") == 2
    assert "TOPSECRET" not in err and "root:x" not in err
    assert "TOPSECRET" not in json.dumps(json.loads(found)["hits"])


# --- 11. limits ----------------------------------------------------------------------------------------------------


def test_a_huge_abstract_is_one_clear_problem_and_the_record_beside_it_is_stored(tmp_path):
    corpus = tmp_path / "big.jsonl"
    write_jsonl(corpus, [{"_id": "huge", "title": "Huge", "text": "word " * 1_000_000},  # 5 MB
                         {"_id": "small", "title": "Graph networks", "text": "Graph neural networks pass messages."}])
    with fake_cli_env(tmp_path / "data"):
        code, out, err = cli("ingest", str(corpus))
        stats = json.loads(cli("stats", "--json")[1])
    assert code == 1 and "1 added" in out and stats["papers"] == 1
    problem = [line for line in err.splitlines() if "line 1" in line]
    assert len(problem) == 1 and "5,000,000 characters long; the limit is 100,000" in problem[0]


def test_a_nul_byte_early_in_a_jsonl_file_rejects_that_line_only(tmp_path):
    corpus = tmp_path / "nul.jsonl"
    good = [json.dumps({"_id": f"p{i}", "title": f"Paper {i}", "text": f"Graph networks number {i} pass messages."})
            for i in range(3)]
    corpus.write_bytes(("\n".join([good[0], '{"_id": "bad", "text": "x\x00y"}', *good[1:]]) + "\n").encode())
    with fake_cli_env(tmp_path / "data"):
        code, out, err = cli("ingest", str(corpus))
    assert code == 1 and "3 added" in out
    assert "line 2: contains NUL bytes" in err and "binary file" not in err


def test_a_read_only_index_can_still_be_searched(tmp_path):
    """Immutable files (chattr +i) as root, where chmod binds nobody; chmod otherwise."""
    import os
    import shutil
    import subprocess

    data_dir = tmp_path / "data"
    with fake_cli_env(data_dir):
        assert cli("ingest", str(BUNDLED_CORPUS / "000_dcbf1b5d2daaeff5.txt"))[0] == 0
    as_root = os.geteuid() == 0
    if as_root and (shutil.which("chattr") is None or subprocess.run(
            ["chattr", "-R", "+i", str(data_dir)], capture_output=True).returncode != 0):
        pytest.skip("running as root on a file system without the immutable flag: nothing makes it read-only")
    paths = [data_dir, *data_dir.rglob("*")]
    if not as_root:
        for path in paths:
            path.chmod(path.stat().st_mode & ~0o222)
    try:
        with fake_cli_env(data_dir):
            code, out, err = cli("search", QUESTION)
    finally:
        if as_root:
            subprocess.run(["chattr", "-R", "-i", str(data_dir)], check=True)
        else:
            for path in paths:
                path.chmod(path.stat().st_mode | 0o200)
    assert code == 0, err
    assert out.startswith("1. FedSSM")
    assert "Traceback" not in err


# --- 4. one corpus silently replacing another ----------------------------------------------------------------------


def test_two_files_with_the_same_name_and_ids_never_collide_and_updates_are_reported(tmp_path):
    def corpus(folder: str, topic: str, ids=("a", "b", "c"), changed: str = "") -> str:
        path = tmp_path / folder / "papers.jsonl"
        path.parent.mkdir(exist_ok=True)
        write_jsonl(path, [{"_id": i, "title": f"{topic} {i}", "text": f"{topic} study {i} {changed}".strip() + "."}
                           for i in ids])
        return str(path)

    x, y = corpus("x", "Graph networks"), corpus("y", "Heart sounds")  # BEIR: every corpus is corpus.jsonl
    with fake_cli_env(tmp_path / "data"):
        assert "3 added, 0 updated, 0 unchanged, 0 removed" in cli("ingest", x)[1]
        code, out, err = cli("ingest", y)
        assert code == 0 and "3 added, 0 updated, 0 unchanged, 0 removed" in out, err
        assert json.loads(cli("stats", "--json")[1])["papers"] == 6

        corpus("x", "Graph networks", changed="revised")  # the same ids, new text, in the same file
        code, out, err = cli("ingest", x)
        assert code == 0 and "0 added, 3 updated, 0 unchanged, 0 removed" in out, err
        assert "updated (changed in the same file since the last ingest): " in out
        assert f"{Path(x).resolve().as_posix()}#a" in out

        corpus("x", "Graph networks", ids=("a", "b"), changed="revised")  # c left x: removed from x only
        code, out, err = cli("ingest", x)
        assert code == 0 and "0 added, 0 updated, 2 unchanged, 1 removed" in out, err
        hits = json.loads(cli("search", "--json", "--k", "10", "Heart sounds study")[1])["hits"]
    ids = {hit["paper_id"] for hit in hits}
    assert {f"{Path(y).resolve().as_posix()}#{i}" for i in "abc"} <= ids


@pytest.mark.parametrize("given", ["file", "folder"])
def test_beir_evaluation_compares_the_ids_within_the_corpus_file(tmp_path, given):
    folder = tmp_path / "tinybeir"
    (folder / "qrels").mkdir(parents=True)
    write_jsonl(folder / "corpus.jsonl", [
        {"_id": "d1", "title": "Graph networks", "text": "Graph neural networks pass messages between nodes."},
        {"_id": "d2", "title": "Heart sounds", "text": "Phonocardiograms are synthesised from electrocardiograms."},
    ])
    write_jsonl(folder / "queries.jsonl", [{"_id": "q1", "text": "graph neural networks messages"}])
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    with fake_cli_env(tmp_path / "data"):
        target = folder / "corpus.jsonl" if given == "file" else folder
        assert cli("ingest", str(target))[0] in (0, 1)  # the folder also holds queries.jsonl: ingested too
        code, out, err = cli("eval", "--beir", str(folder), "--json")
    assert code == 0, err
    # d1 is found under its own id (0 if the file prefix were not stripped); ingesting the whole folder also
    # stored the query itself as a "paper", which then ranks first.
    assert json.loads(out)["ndcg@10"] == pytest.approx(1.0 if given == "file" else 0.6309, abs=1e-3)
