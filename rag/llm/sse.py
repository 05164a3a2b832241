"""An incremental parser for Server-Sent Events (``text/event-stream``), as streamed by chat endpoints.

Feed it text as it arrives, in pieces of any size; it returns the events completed so far::

    parser = SSEParser()
    for piece in pieces:
        for event in parser.feed(piece):
            ...
    for event in parser.close():   # an event the stream did not terminate with a blank line
        ...

It follows the WHATWG rules for the event-stream format: lines end with ``\\r\\n``, ``\\n`` or ``\\r``
(also when a ``\\r\\n`` pair is split between two pieces); a blank line ends an event; lines starting with
``:`` are comments (``: keep-alive``); ``field: value`` loses one space after the colon (``data:x`` works
too); several ``data`` lines are joined with ``\\n``; a block without ``data`` lines is no event; ``id``
and ``retry`` are remembered; unknown fields are ignored; a leading byte-order mark is dropped.

Pure: no I/O, no global state, and it never raises on any text (decoding bytes is the caller's job).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event: its ``event:`` type (``None`` when not given) and its joined ``data``."""

    event: str | None
    data: str


class SSEParser:
    """Turns event-stream text, fed in arbitrary pieces, into :class:`SSEEvent` objects."""

    def __init__(self) -> None:
        self._line_parts: list[str] = []  # the current, not yet terminated line, in pieces
        self._skip_lf = False  # the last piece ended with "\r": a "\n" opening the next one belongs to it
        self._started = False  # whether any text has arrived (to drop a leading byte-order mark)
        self._data: list[str] = []
        self._event: str | None = None
        self.last_event_id: str | None = None
        self.retry: int | None = None  # reconnection time in ms, if the server sent one

    def feed(self, data: str) -> list[SSEEvent]:
        """Parse the next piece of the stream; return the events it completed."""
        if not data:
            return []
        if not self._started:
            self._started = True
            if data.startswith("\ufeff"):
                data = data[1:]
        if self._skip_lf:
            self._skip_lf = False
            if data.startswith("\n"):
                data = data[1:]
        events: list[SSEEvent] = []
        pos = 0
        for match in _LINE_END.finditer(data):
            self._line_parts.append(data[pos : match.start()])
            line = "".join(self._line_parts)
            self._line_parts.clear()
            self._process_line(line, events)
            pos = match.end()
        if pos < len(data):
            self._line_parts.append(data[pos:])
        elif data.endswith("\r"):
            self._skip_lf = True
        return events

    def close(self) -> list[SSEEvent]:
        """End of stream: return the last event if the stream stopped before its blank line."""
        events: list[SSEEvent] = []
        if self._line_parts:
            line = "".join(self._line_parts)
            self._line_parts.clear()
            self._process_line(line, events)
        self._dispatch(events)
        self._skip_lf = False
        return events

    def _process_line(self, line: str, events: list[SSEEvent]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line.startswith(":"):
            return  # comment, e.g. ": keep-alive"
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self.last_event_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value)
        # any other field is ignored, as the format requires

    def _dispatch(self, events: list[SSEEvent]) -> None:
        if self._data:
            events.append(SSEEvent(event=self._event or None, data="\n".join(self._data)))
        self._data = []
        self._event = None
