"""The chat's "Download Markdown": the session's conversation (or its one answer) as a Markdown file
(rag/exports).

The chat callbacks (ui/web/callbacks.py) keep what the chat shows, not the ``Answer`` itself, so the answer
is caught on its way out of the pipeline: ``recording(components, last)`` is the components as the chat
callback uses them, except that the pipelines it hands out note each final answer in ``last``.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rag.exports.markdown import answer_markdown, conversation_markdown
from rag.types import Answer

DOWNLOAD_FOLDER = "paperchat-answers"


@dataclass
class LastAnswer:
    """One browser session's finished answers, in the order asked (kept in a ``gr.State``); "New chat" empties
    it."""

    answers: list[Answer] = field(default_factory=list)

    @property
    def answer(self) -> Answer | None:
        """The last finished answer."""
        return self.answers[-1] if self.answers else None

    def clear(self) -> None:
        self.answers.clear()


class _RecordingPipeline:
    def __init__(self, pipeline, last: LastAnswer) -> None:
        self._pipeline, self._last = pipeline, last

    def __getattr__(self, name):
        return getattr(self._pipeline, name)

    def stream(self, *args, **kwargs):
        from rag.answers.pipeline import FinalEvent

        for event in self._pipeline.stream(*args, **kwargs):
            if isinstance(event, FinalEvent):
                self._last.answers.append(event.answer)
            yield event


class _RecordingComponents:
    def __init__(self, components, last: LastAnswer) -> None:
        self._components, self._last = components, last

    def __getattr__(self, name):
        return getattr(self._components, name)

    def pipeline_for(self, session):
        return _RecordingPipeline(self._components.pipeline_for(session), self._last)


def recording(components, last: LastAnswer):
    """``components`` whose pipelines note each final answer in ``last``."""
    return _RecordingComponents(components, last)


def markdown_file(last: LastAnswer, collection: str = "", folder: Path | None = None) -> Path | None:
    """The conversation written to a Markdown file, every answer with its references (one answer: that answer
    alone); named by its content: the same conversation, the same file. None when the session has no finished
    answer."""
    if last is None or not last.answers:
        return None
    if len(last.answers) == 1:
        text, name = answer_markdown(last.answers[0], collection=collection), "paperchat-answer.md"
    else:
        text, name = conversation_markdown(last.answers, collection=collection), "paperchat-conversation.md"
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    target = (folder or Path(tempfile.gettempdir()) / DOWNLOAD_FOLDER) / digest / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target
