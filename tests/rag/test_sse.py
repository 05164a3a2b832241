"""The incremental Server-Sent-Events parser: examples from real servers, and properties over any split."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag.llm.sse import SSEEvent, SSEParser


def parse(*pieces: str) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    for piece in pieces:
        events += parser.feed(piece)
    return events + parser.close()


def parse_split(stream: str, cuts: list[int]) -> list[SSEEvent]:
    bounds = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    return parse(*(stream[a:b] for a, b in zip(bounds, bounds[1:], strict=False)))


# --- examples ----------------------------------------------------------------------------------


def test_openai_style_stream():
    stream = (
        'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
        'data: {"choices":[{"delta":{"content":"lo"}}]}\n\n'
        "data: [DONE]\n\n"
    )
    assert parse(stream) == [
        SSEEvent(None, '{"choices":[{"delta":{"content":"Hel"}}]}'),
        SSEEvent(None, '{"choices":[{"delta":{"content":"lo"}}]}'),
        SSEEvent(None, "[DONE]"),
    ]


def test_events_are_returned_as_soon_as_their_blank_line_arrives():
    parser = SSEParser()
    assert parser.feed("data: one\n") == []
    assert parser.feed("\ndata: tw") == [SSEEvent(None, "one")]
    assert parser.feed("o\n\n") == [SSEEvent(None, "two")]
    assert parser.close() == []


def test_every_line_ending_and_a_crlf_split_between_reads():
    assert parse("data: a\r\n\r\ndata: b\r\rdata: c\n\n") == [
        SSEEvent(None, "a"),
        SSEEvent(None, "b"),
        SSEEvent(None, "c"),
    ]
    # "\r" ends the line at once; the "\n" arriving in the next read is part of the same line ending
    parser = SSEParser()
    assert parser.feed("data: a\r") == []
    assert parser.feed("\n\r") == [SSEEvent(None, "a")]
    assert parser.feed("\ndata: b\r\n\r\n") == [SSEEvent(None, "b")]


def test_comments_and_keep_alives_are_ignored():
    assert parse(": keep-alive\n\n:\n\ndata: x\n: in between\ndata: y\n\n") == [SSEEvent(None, "x\ny")]


def test_multiple_data_lines_are_joined_with_newlines_and_the_space_after_the_colon_is_optional():
    assert parse("data:first\ndata:  second\ndata\ndata:\n\n") == [SSEEvent(None, "first\n second\n\n")]


def test_event_type_unknown_fields_id_and_retry():
    parser = SSEParser()
    events = parser.feed("event: error\nid: 7\nretry: 1500\nfoo: bar\nnonsense\ndata: boom\n\ndata: next\n\n")
    assert events == [SSEEvent("error", "boom"), SSEEvent(None, "next")]
    assert parser.last_event_id == "7"
    assert parser.retry == 1500


def test_a_block_without_data_is_no_event():
    assert parse("event: ping\n\nid: 3\n\n: only a comment\n\n") == []


def test_close_flushes_an_event_the_stream_did_not_terminate():
    assert parse("data: [DONE]") == [SSEEvent(None, "[DONE]")]
    assert parse("data: a\n") == [SSEEvent(None, "a")]
    assert parse("") == []


def test_a_leading_byte_order_mark_is_dropped():
    assert parse("\ufeffdata: x\n\n") == [SSEEvent(None, "x")]
    assert parse("\ufeff", "data: x\n\n") == [SSEEvent(None, "x")]


def test_a_huge_line_fed_one_character_at_a_time_is_linear():
    line = "data: " + "x" * 100_000
    parser = SSEParser()
    events = []
    for char in line + "\n\n":
        events += parser.feed(char)
    assert events == [SSEEvent(None, "x" * 100_000)]


# --- properties --------------------------------------------------------------------------------

_value_chars = st.characters(exclude_characters="\r\n", exclude_categories=("Cs",))
_values = st.text(_value_chars, max_size=30)
_endings = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw) -> tuple[str, list[SSEEvent]]:
    """A valid event stream with mixed line endings, comments and unknown fields, and its events."""
    lines: list[str] = []
    expected: list[SSEEvent] = []
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            lines.append(":" + draw(_values))  # comment
        name = draw(st.one_of(st.none(), _values))
        if name is not None:
            lines.append("event: " + name)
        values = draw(st.lists(_values, min_size=1, max_size=4))
        for value in values:
            if draw(st.booleans()):
                lines.append(f"x-{draw(st.sampled_from(['foo', 'bar', 'id2']))}: {draw(_values)}")
            if value.startswith(" ") or draw(st.booleans()):
                lines.append("data: " + value)
            else:
                lines.append("data:" + value)
        lines.append("")  # blank line: dispatch
        expected.append(SSEEvent(name or None, "\n".join(values)))
    text = ""
    previous = ""
    for line in lines:
        ending = draw(_endings)
        if previous == "\r" and not line and ending == "\n":
            ending = "\r"  # "\r" then "\n" would read as one "\r\n" ending, as in any real stream
        text += line + ending
        previous = ending
    return text, expected


@settings(max_examples=150, deadline=None)
@given(streams(), st.lists(st.integers(min_value=0), max_size=40))
def test_any_split_gives_the_same_events_as_the_whole_stream(case, cuts):
    stream, expected = case
    assert parse(stream) == expected
    assert parse_split(stream, cuts) == expected


@settings(max_examples=100, deadline=None)
@given(streams())
def test_feeding_one_character_at_a_time_gives_the_same_events(case):
    stream, expected = case
    assert parse(*stream) == expected


@settings(max_examples=150, deadline=None)
@given(st.text(), st.lists(st.integers(min_value=0), max_size=20))
def test_any_text_never_raises_and_splits_do_not_matter(text, cuts):
    assert parse_split(text, cuts) == parse(text)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(min_value=10_000, max_value=300_000),
    st.sampled_from(["data: ", "", ":", "event:", "\r", "x"]),
    st.lists(st.integers(min_value=0), max_size=10),
)
def test_huge_lines_never_raise(size, prefix, cuts):
    text = prefix + "é" * size + "\n\n"
    events = parse_split(text, cuts)
    assert events == parse(text)
    if prefix == "data: ":
        assert events == [SSEEvent(None, "é" * size)]
