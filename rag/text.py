"""Text at the edges: what comes in is made valid Unicode once, what goes to a terminal cannot drive it.

``clean_input`` is applied where text enters paperchat (corpus records and file names, questions from the
command line, stdin, batch files, the web UI and its API): lone surrogates, which is what invalid UTF-8
bytes in arguments and ``\\ud800`` escapes in JSON become, are replaced by U+FFFD, so nothing later fails
to encode them. ``terminal_safe`` is applied to everything the CLI prints as text: control characters
(ESC sequences that retitle or clear the terminal, C1 controls, bidirectional overrides) are shown as
``\\x1b``-style escapes instead of being obeyed. ``one_line`` squeezes text into one short line for an
error message or a log line; ``counted`` says a number of things ("1 paper", "2 papers").
"""

from __future__ import annotations

import re
import sys

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# C0 controls but tab and line feed, DEL, C1 controls, and the bidirectional embedding/override/isolate marks.
_TERMINAL_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean_input(text: str) -> str:
    """``text`` as valid Unicode: every lone surrogate becomes U+FFFD."""
    return _SURROGATE.sub(REPLACEMENT, text) if _SURROGATE.search(text) else text


def clean_value(value):
    """``clean_input`` applied to every string in a JSON-like value (keys included)."""
    if isinstance(value, str):
        return clean_input(value)
    if isinstance(value, dict):
        return {clean_value(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(item) for item in value]
    return value


def terminal_safe(text: str) -> str:
    """``text`` with control characters written out (``\\x1b``), so printing it cannot drive the terminal."""
    text = clean_input(text)
    if not _TERMINAL_CONTROL.search(text):
        return text
    return _TERMINAL_CONTROL.sub(_escaped, text)


def say(message: str) -> None:
    """A one-line ``paperchat: ...`` status, warning or error on stderr (where a command's output never goes)."""
    print(terminal_safe(f"paperchat: {message}"), file=sys.stderr, flush=True)


def json_line_safe(line: str) -> str:
    """A JSON text with the controls ``json.dumps(ensure_ascii=False)`` leaves raw (C1, bidi) as ``\\u`` escapes.

    Those characters can only occur inside JSON strings, where the escape means the same character.
    """
    line = clean_input(line)
    return _TERMINAL_CONTROL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", line)


def counted(number: int, noun: str) -> str:
    """``number`` and ``noun`` in agreement: "1 paper", "76 papers", "0 chunks"."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def one_line(text: object, limit: int = 2000) -> str:
    """``text`` with every run of whitespace (newlines included) made one space, cut to ``limit`` characters
    with an ellipsis."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
