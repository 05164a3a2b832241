"""Property tests of everything that reads untrusted bytes and text, beyond tests/rag/test_sse.py,
test_citations.py and test_corpus.py (which fuzz the SSE parser on text, the marker parser and the loaders):

* the LLM client on any reply (random bytes, random JSON chunks, huge lines, any status and content type,
  split anywhere): only ``LLMError`` subclasses ever escape, each a one-line message;
* the SSE parser behind the client's incremental UTF-8 decoding: byte splits never change the events;
* the streamed citation filter: no marker that points at no source is ever shown, however the text is split;
* the claim checker and the whole answer pipeline on any model output.
"""

from __future__ import annotations

import codecs
import json

import httpx
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from rag.answers.citations import clean_markers, find_markers, highlight_spans, split_claims
from rag.answers.evidence import check_claims
from rag.answers.pipeline import AnswerPipeline, MarkerFilter
from rag.errors import LLMError
from rag.llm.client import OpenAIChatModel
from rag.llm.replies import Delta
from rag.llm.sse import SSEParser
from rag.types import Paper
from tests.conftest import FakeChatModel, FakeEmbedder

MESSAGES = [{"role": "user", "content": "What is new?"}]
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def split_at(data, cuts: list[int]) -> list:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, previous = [], 0
    for point in points:
        pieces.append(data[previous:point])
        previous = point
    pieces.append(data[previous:])
    return pieces


def client(status: int, content_type: str, body: bytes, cuts: list[int], *, model: str | None) -> OpenAIChatModel:
    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"Content-Type": content_type} if content_type else {}
        return httpx.Response(status, headers=headers, content=iter(split_at(body, cuts)))

    return OpenAIChatModel("http://llm.test/v1", model=model, retries=0, backoff=0, timeout=5,
                           transport=httpx.MockTransport(handler))


def only_llm_errors(model: OpenAIChatModel) -> str:
    """Stream a reply; the text received. Anything but an LLMError fails the test."""
    received = []
    try:
        for delta in model.stream(MESSAGES):
            assert isinstance(delta, Delta) and isinstance(delta.content, str) and isinstance(delta.reasoning, str)
            received.append(delta.content)
    except LLMError as error:
        message = str(error)
        assert message and "\n" not in message, message
    finally:
        model.close()
    return "".join(received)


statuses = st.sampled_from([200, 200, 200, 200, 200, 400, 401, 404, 422, 429, 500, 503])
content_types = st.sampled_from(["text/event-stream", "text/event-stream; charset=utf-8", "application/json",
                                 "text/plain", "text/html", "", "application/x-ndjson"])
cuts = st.lists(st.integers(min_value=0), max_size=12)
KEYS = ["choices", "delta", "message", "content", "reasoning_content", "reasoning", "finish_reason", "text",
        "error", "usage", "index", "role", "data", "id", "model", "detail", "msg"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=5),
    max_leaves=25,
)


@st.composite
def sse_bodies(draw) -> bytes:
    """An event stream of random JSON chunks (and some well-formed ones), possibly cut anywhere."""
    events = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["random", "content", "done", "comment", "garbage"]))
        if kind == "random":
            events.append("data: " + json.dumps(draw(json_values)))
        elif kind == "content":
            delta = {"content": draw(st.text(max_size=20))}
            finish = draw(st.sampled_from([None, None, "stop", "length"]))
            events.append("data: " + json.dumps({"choices": [{"delta": delta, "finish_reason": finish}]}))
        elif kind == "done":
            events.append("data: [DONE]")
        elif kind == "comment":
            events.append(": keep-alive")
        else:
            events.append(draw(st.text(max_size=30)))
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    body = "".join(event + eol + eol for event in events).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        body = body[: draw(st.integers(0, len(body)))]
    return body


@settings(SETTINGS, max_examples=150)
@given(statuses, content_types, st.binary(max_size=3000), cuts, st.sampled_from(["m", None]))
def test_random_bytes_from_the_endpoint_only_ever_raise_llm_errors(status, content_type, body, pieces, model):
    only_llm_errors(client(status, content_type, body, pieces, model=model))


@settings(SETTINGS, max_examples=200)
@given(statuses, st.sampled_from(["text/event-stream", "", "text/plain"]), sse_bodies(), cuts)
def test_random_json_chunks_only_ever_raise_llm_errors(status, content_type, body, pieces):
    only_llm_errors(client(status, content_type, body, pieces, model="m"))


@settings(SETTINGS, max_examples=80)
@given(json_values, statuses, cuts, st.sampled_from(["m", None]))
def test_random_json_documents_only_ever_raise_llm_errors(value, status, pieces, model):
    body = json.dumps(value).encode()
    only_llm_errors(client(status, "application/json", body, pieces, model=model))


@settings(SETTINGS, max_examples=20)
@given(
    st.sampled_from([b"data: ", b"data: {\"choices\": [{\"delta\": {\"content\": \"", b"", b":", b"\xff"]),
    st.sampled_from(["é", "{", "[1", "x", "\r", "\ufeff"]),
    st.integers(min_value=50_000, max_value=300_000),
    cuts,
)
def test_huge_lines_from_the_endpoint_only_ever_raise_llm_errors(prefix, piece, size, pieces):
    body = prefix + (piece * size).encode() + b"\n\n"
    only_llm_errors(client(200, "text/event-stream", body, pieces, model="m"))


DEEP = b"[" * 100_000


@pytest.mark.parametrize(
    ("status", "content_type", "body", "model"),
    [(200, "text/event-stream", b"data: " + DEEP + b"\n\n", "m"), (200, "application/json", DEEP, "m"),
     (200, "application/json", DEEP, None), (500, "application/json", DEEP, "m")],
    ids=["stream-chunk", "completion", "model-list", "error-body"],
)
def test_deeply_nested_json_from_the_endpoint_is_an_llm_error(status, content_type, body, model):
    only_llm_errors(client(status, content_type, body, [], model=model))


# --- the SSE parser behind the client's decoding ----------------------------------------------------------------------


def decode_and_parse(pieces: list[bytes]):
    """As OpenAIChatModel._read_events does: an incremental UTF-8 decoder (errors replaced) feeding the parser."""
    parser = SSEParser()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    events = []
    for piece in pieces:
        events += parser.feed(decoder.decode(piece))
    events += parser.feed(decoder.decode(b"", final=True)) + parser.close()
    return events


bytes_streams = st.one_of(
    st.binary(max_size=600),
    st.lists(st.sampled_from([b"data: ", b"\n", b"\r", b"\r\n", b":", b"event: x", b"\xc3", b"\xa9", b"\xe2\x82",
                              b"\xac", b"\xff", b"\xef\xbb\xbf", b"{\"a\": 1}", b"id: 1", b"retry: 5"]),
             max_size=40).map(b"".join),
)


@settings(SETTINGS, max_examples=300)
@given(bytes_streams, cuts)
def test_byte_splits_never_change_the_events(data, pieces):
    assert decode_and_parse(split_at(data, pieces)) == decode_and_parse([data])


# --- the streamed citation filter -------------------------------------------------------------------------------------

words = st.sampled_from(["FedSSM", "wins", "on", "MMFL", ".", ",", " ", "\n", "[", "]", "2024", "-", "a"])
short_markers = st.lists(st.integers(0, 12), min_size=1, max_size=3).map(lambda ns: "[" + ", ".join(map(str, ns)) + "]")
long_markers = st.lists(st.integers(0, 12), min_size=6, max_size=15).map(lambda ns: "[" + ", ".join(map(str, ns)) + "]")
valid_sources = st.frozensets(st.integers(1, 5), max_size=5)


def streamed(text: str, pieces: list[int], valid) -> str:
    markers = MarkerFilter(set(valid))
    return "".join(markers.feed(piece) for piece in split_at(text, pieces)) + markers.flush()


def assert_no_invalid_marker(shown: str, valid) -> None:
    bad = [shown[m.start:m.end] for m in find_markers(shown) if not set(m.numbers) <= set(valid)]
    assert not bad, (bad, shown)


@settings(SETTINGS, max_examples=300)
@given(st.lists(st.one_of(words, short_markers), max_size=30).map(" ".join), cuts, valid_sources)
def test_streamed_text_never_shows_a_marker_of_no_source(text, pieces, valid):
    shown = streamed(text, pieces, valid)
    assert_no_invalid_marker(shown, valid)
    assert not find_markers(shown) or find_markers(clean_markers(text, valid)[0])


@settings(SETTINGS, max_examples=100, phases=[Phase.explicit, Phase.reuse, Phase.generate])  # no slow shrinking
@example(text="FedSSM wins [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11].", pieces=[13, 17, 21, 25, 29], valid=frozenset({1, 2}))
@given(st.lists(st.one_of(words, short_markers, long_markers), max_size=20).map(" ".join), cuts, valid_sources)
def test_streamed_text_never_shows_a_marker_of_no_source_even_a_long_one(text, pieces, valid):
    assert_no_invalid_marker(streamed(text, pieces, valid), valid)


# --- claims and the whole pipeline on any model output ----------------------------------------------------------------

any_text = st.one_of(st.text(max_size=400),
                     st.lists(st.one_of(words, short_markers, long_markers), max_size=40).map(" ".join))


@settings(SETTINGS, max_examples=150)
@given(any_text, st.dictionaries(st.integers(0, 12), st.text(max_size=300), max_size=4))
def test_checking_any_claims_against_any_abstracts_never_raises(answer, abstracts):
    sources = {n: Paper(f"p{n}", f"T{n}", text, "f.txt", n) for n, text in abstracts.items()}
    checks = check_claims(split_claims(answer), sources, FakeEmbedder())
    for check in checks:
        paper = sources[check.marker]
        assert paper.abstract[check.evidence_start:check.evidence_end] == check.evidence
        assert 0.0 <= check.support <= 1.0
    for paper in sources.values():
        for start, end in highlight_spans(paper.abstract, checks, paper.paper_id):
            assert 0 <= start < end <= len(paper.abstract)


@settings(SETTINGS, max_examples=60,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(any_text, cuts)
def test_the_pipeline_turns_any_model_output_into_a_consistent_answer(fake_retriever, text, pieces):
    model = FakeChatModel(split_at(text, pieces))  # the model writes ``text`` in these pieces
    pipeline = AnswerPipeline(fake_retriever, fake_retriever.embedder, model)
    answer = pipeline.answer("state space models for choosing clients in federated learning", k=3)
    numbered = len(answer.sources) if not answer.refused else 0
    assert all(1 <= c.marker <= max(numbered, 3) for c in answer.citations)
    cited = {c.marker: c.paper_id for c in answer.citations}
    for marker, paper_id in cited.items():
        assert answer.sources[marker - 1].paper_id == paper_id  # [n] is always the n-th source
    if not answer.refused:
        assert_no_invalid_marker(answer.answer, set(range(1, len(answer.sources) + 1)))
