"""Reasoning inside ``<think>...</think>``: moved out of an answer's content as it streams.

Reasoning models (Qwen3, DeepSeek-R1 distills, ...) served without a reasoning parser put their thoughts
in the content instead of a ``reasoning_content`` field; :class:`ThinkSplitter` hands them back as
reasoning, piece by piece, whichever way the tags are cut across chunks.
"""

from __future__ import annotations

_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"


class ThinkSplitter:
    """Moves text inside ``<think>...</think>`` at the start of an answer's content to reasoning.

    Reasoning models (Qwen3, DeepSeek-R1 distills, ...) served without a reasoning parser put their
    thoughts in the content. Tags may arrive split across chunks (``<th`` + ``ink>``): text that could
    still be the start of a tag is held back until the next piece decides. Only a ``<think>`` that opens
    the content (after whitespace) counts, so an answer that merely mentions the tag is left alone.
    Whitespace right after ``</think>`` is dropped.
    """

    def __init__(self) -> None:
        self._state = "start"  # "start": nothing decided yet; "think": inside the tags; "content": after
        self._buffer = ""
        self._strip_leading = False

    def feed(self, text: str) -> tuple[str, str]:
        """Return the ``(content, reasoning)`` that can be released after ``text``."""
        content: list[str] = []
        reasoning: list[str] = []
        self._buffer += text
        while self._buffer:
            if self._state == "start":
                stripped = self._buffer.lstrip()
                if stripped.startswith(_THINK_OPEN):
                    self._state = "think"
                    self._buffer = stripped[len(_THINK_OPEN) :]
                elif not stripped or _THINK_OPEN.startswith(stripped):
                    break  # could still become "<think>": wait for more
                else:
                    self._state = "content"
            elif self._state == "think":
                end = self._buffer.find(_THINK_CLOSE)
                if end >= 0:
                    reasoning.append(self._buffer[:end])
                    self._buffer = self._buffer[end + len(_THINK_CLOSE) :]
                    self._state = "content"
                    self._strip_leading = True
                else:
                    keep = _partial_tag_suffix(self._buffer, _THINK_CLOSE)
                    reasoning.append(self._buffer[: len(self._buffer) - keep])
                    self._buffer = self._buffer[len(self._buffer) - keep :]
                    break
            else:
                content.append(self._release_content(self._buffer))
                self._buffer = ""
        return "".join(content), "".join(reasoning)

    def held_content(self) -> str:
        """Answer text held back so far (possibly the start of a tag)."""
        return "" if self._state == "think" else self._buffer

    def flush(self) -> tuple[str, str]:
        """End of the answer: release whatever is held back."""
        held, self._buffer = self._buffer, ""
        if self._state == "think":
            return "", held  # the model stopped while still thinking
        return self._release_content(held), ""

    def _release_content(self, text: str) -> str:
        if self._strip_leading:
            text = text.lstrip()
            if text:
                self._strip_leading = False
        return text


def _partial_tag_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that is a proper beginning of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0
