"""The chat's "Download Markdown": the session's last finished answer as a Markdown file (rag/exports).

The chat callbacks (ui/web/callbacks.py) keep what the chat shows, not the ``Answer`` itself, so the answer
is caught on its way out of the pipeline: ``recording(components, last)`` is the components as the chat
callback uses them, except that the pipelines it hands out note each final answer in ``last``.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rag.exports.markdown import answer_markdown
from rag.types import Answer

DOWNLOAD_FOLDER = "paperchat-answers"


@dataclass
class LastAnswer:
    """One browser session's last finished answer (kept in a ``gr.State``)."""

    answer: Answer | None = None


class _RecordingPipeline:
    def __init__(self, pipeline, last: LastAnswer) -> None:
        self._pipeline, self._last = pipeline, last

    def __getattr__(self, name):
        return getattr(self._pipeline, name)

    def stream(self, *args, **kwargs):
        from rag.answers.pipeline import FinalEvent

        for event in self._pipeline.stream(*args, **kwargs):
            if isinstance(event, FinalEvent):
                self._last.answer = event.answer
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
    """The last answer written to a Markdown file (named by its content: the same answer, the same file);
    None when the session has no finished answer."""
    if last is None or last.answer is None:
        return None
    text = answer_markdown(last.answer, collection=collection)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    target = (folder or Path(tempfile.gettempdir()) / DOWNLOAD_FOLDER) / digest / "paperchat-answer.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target
