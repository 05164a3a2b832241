"""Issue 17, "Hardening, round 2": each reproduction of the independent probe, as a test.

The sections follow the issue's numbering. Endpoints are real HTTP servers on 127.0.0.1
(tests/fake_llm.py); the CLI runs in this process with the fake embedder (tests/hardening/conftest.py).
"""

from __future__ import annotations

import threading
import time

import pytest

from rag.errors import LLMInterrupted, LLMTimeout
from rag.llm import OpenAIChatModel
from tests.fake_llm import ScriptedLLMServer

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


def test_an_endless_answer_is_capped_in_size():
    with ScriptedLLMServer(reply="x" * 200_000, chunk_size=4000) as server, OpenAIChatModel(
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
    import rag.citations as citations

    depth = 4000
    text = "Intro " + "[" * depth + "99" + "]99" * (depth - 1) + "] end."  # [[[...[99]99]99]
    counting = CountingPattern(citations.MARKER)
    monkeypatch.setattr(citations, "MARKER", counting)
    cleaned, removed = citations.clean_markers(text, {1, 2})
    assert (cleaned, removed) == ("Intro end.", depth)
    assert counting.scanned <= 10 * len(text)  # linear; one pass per nesting level scanned ~depth x the text


def test_the_marker_filter_holds_back_a_bounded_amount_of_an_endless_marker():
    from rag.pipeline import MarkerFilter

    markers = MarkerFilter({1})
    shown = [markers.feed("Answer [1")]
    for _ in range(20_000):
        shown.append(markers.feed(",1"))
        assert len(markers.buffer) <= MarkerFilter.MAX_HELD
    shown.append(markers.flush())
    assert "".join(shown) == "Answer [1" + ",1" * 20_000


def test_streamed_markers_are_cleaned_as_before():
    from rag.pipeline import MarkerFilter

    text = "Both work [1, 9]. See [9] and [2]; also [[9]1].\nStart [9]."
    for size in (1, 2, 3, 7, 100):
        markers = MarkerFilter({1, 2})
        out = "".join(markers.feed(text[i : i + size]) for i in range(0, len(text), size)) + markers.flush()
        # A space already shown before a dropped marker stays (the final answer is cleaned in one piece).
        assert " ".join(out.replace(" .", ".").split()) == "Both work [1]. See and [2]; also [1]. Start."
        assert markers.removed == 4
