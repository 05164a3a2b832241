"""``paperchat doctor``: check each part in turn (index, embedding model, answer writer) and say what to fix.

A finding is either a problem (exit 1) or advice (a better setup; exit 0): the kind is decided where the
finding is made, never read back from its text.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rag.components import HOW_TO_CONNECT, HOW_TO_GENERATE, Components
from rag.errors import PaperchatError
from rag.text import counted
from ui.cli.output import show
from ui.shared.commands import components_from_args


@dataclass(frozen=True)
class Finding:
    text: str
    problem: bool  # False: advice, the setup works


def _line(name: str, status: str) -> None:
    show(f"{name:<12} {status}")


def _check_index(components: Components) -> list[Finding]:
    store = components.store
    try:
        papers, chunks = store.counts()
        manifest = store.manifest() or {}
        resume = components.unfinished_ingest()
        unfinished = [Finding(
            f"the last ingest did not finish (it stopped while writing): the index holds only part of what it was "
            f"given; run `{resume}` again to complete it", problem=True)] if resume else []
        if not papers:
            _line("index", f"empty at {store.location}")
            return unfinished or [Finding("build the index: paperchat ingest", problem=True)]
        model = manifest.get("embedding_model")
        _line("index", f"{counted(papers, 'paper')}, {counted(chunks, 'chunk')}, model {model}, at {store.location}")
        if unfinished:
            _line("last ingest", "PROBLEM: did not finish; the index holds part of what it was given")
        store.check_manifest(components.retriever.expected_manifest or {})
    except PaperchatError as e:
        _line("index", f"PROBLEM: {e}")
        return [Finding(str(e), problem=True)]
    return unfinished


def _check_embedder(components: Components) -> list[Finding]:
    try:
        embedder = components.embedder
        _line("embedding", f"{embedder.name} ({embedder.dimension} dimensions, {embedder.max_tokens} word pieces)")
    except PaperchatError as e:
        _line("embedding", f"PROBLEM: {e}")
        return [Finding(str(e), problem=True)]
    return []


def _check_answer_writer(components: Components) -> list[Finding]:
    settings = components.settings
    kind = components.answer_writer()
    if kind == "extractive":
        _line("answers", "extractive (no LLM): quoted, cited sentences")
        return [Finding(HOW_TO_GENERATE, problem=False)] if settings.llm == "auto" else []
    try:
        model = components.chat_model
        where = "embedded llama.cpp server" if kind == "embedded" else f"endpoint {model.label_url}"
        models = model.list_models()
        _line("answers", f"{where}: reachable, models: {', '.join(models[:8]) or 'none listed'}")
        started = time.monotonic()
        text, _reasoning = model.complete([{"role": "user", "content": "Say OK."}], max_tokens=8)
        _line("streaming", f"works ({time.monotonic() - started:.1f}s for a short reply: {text.strip()[:40]!r})")
        _line("context", f"{settings.llm_context_window} tokens (PAPERCHAT_LLM_CONTEXT_WINDOW)")
    except PaperchatError as e:
        _line("answers", f"PROBLEM: {e}")
        return [Finding(str(e), problem=True)]
    if kind == "embedded":
        return [Finding(f"the embedded model is tiny; {HOW_TO_CONNECT}", problem=False)]
    return []


def cmd_doctor(args) -> int:
    """Check each part in turn and say what to fix; exit 1 when something needs fixing."""
    with components_from_args(args) as components:
        findings = [*_check_index(components), *_check_embedder(components), *_check_answer_writer(components)]
    if findings:
        show("\nto fix or improve:")
        for finding in findings:
            show(f"- {finding.text}")
    return 1 if any(f.problem for f in findings) else 0
