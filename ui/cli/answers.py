"""``paperchat ask``, ``paperchat chat`` and ``paperchat mcp``: answers in the terminal, streamed, with their
sources and notes, and the same answers for MCP clients over stdio."""

from __future__ import annotations

import json
import sys

from rag.errors import LLMError, QueryError
from rag.exports.filters import parse_filters
from rag.exports.markdown import answer_markdown
from rag.plain_text import readable
from rag.retrieval.retriever import validate_question
from rag.text import say, terminal_safe
from rag.types import Turn, as_messages
from ui.cli.output import read_line, show, show_json
from ui.cli.search import batch_line, check_one_source, hit_details, question_arg, read_batch
from ui.shared.commands import components_from_args
from ui.shared.text import AnswerNotes

OTHERS_SHOWN = 5  # uncited papers listed after an answer


def show_sources(answer) -> None:
    """What follows an answer: its sources, the papers consulted, unsupported claims, notes, who answered."""
    cited = {c.paper_id for c in answer.citations}
    hits = {h.paper_id: h for h in answer.sources}
    if answer.citations:
        show("\nSources:")
        for c in answer.citations:
            flag = "  (weakly supported)" if c.weak else ""
            hit = hits.get(c.paper_id)
            place = hit.label if hit is not None else f"{c.source} #{c.ordinal}"
            # The nearest paper of a detail its abstract does not state: its closest sentence supports nothing.
            verdict = "nearest paper, does not state this" if answer.not_stated else f"support {c.support:.2f}{flag}"
            show(f"[{c.marker}] {c.title}  ({place})  {verdict}")
            for line in hit_details(hit) if hit is not None else ():
                show(f"    {line}")
            if c.evidence:
                show(f"    {'closest sentence' if answer.not_stated else 'evidence'}: {readable(c.evidence)}")
    others = [h for h in answer.sources if h.paper_id not in cited]
    if others:
        show("\nNearest papers:" if answer.refused or not answer.citations else "\nAlso consulted (not cited):")
        # A list question searches thirty papers deep: the nearest few say what else is close, the rest is noise.
        for h in others[:OTHERS_SHOWN]:
            show(f"- {h.title}  ({h.label})")
        if len(others) > OTHERS_SHOWN:
            show(f"  and {len(others) - OTHERS_SHOWN} more (`--json` lists every paper consulted)")
    flagged = [c for c in answer.claims if not c.supported]
    if flagged:
        show("\nUnsupported (no source says this; struck through as ~~...~~ above):")
        for c in flagged:
            why = f"names or figures in no source: {', '.join(c.invented)}" if c.invented else "no source supports it"
            show(f"[unsupported] {c.text}  ({why})")
    facts = AnswerNotes.of(answer)
    notes = []
    if facts.recited:
        notes.append(f"{facts.recited} claim(s) were re-cited to the source that supports them")
    if facts.removed_markers:
        notes.append(f"{facts.removed_markers} citation(s) that matched no source were removed")
    if facts.ungrounded:
        notes.append("not grounded: the answer cites no source, check it against the abstracts")
    if answer.interrupted:
        notes.append("the answer was interrupted: the endpoint stopped mid-answer")
    # "What did FedSMM evaluate on?" is searched as "What did FedSSM evaluate on?": say so, as the web UI does.
    if answer.search_query and " ".join(answer.search_query.split()) != " ".join(answer.question.split()):
        notes.append(f"searched for \"{answer.search_query}\"")
    for note in notes:
        show(f"note: {note}")
    show(f"answered by: {answer.backend}")


def stream_answer(pipeline, question: str, history: list[Turn] | None = None, k=None):
    """Print the answer as it is written; the checked text too when the check changed it. Returns the answer."""
    from rag.answers.pipeline import FinalEvent, TextEvent

    final = None
    shown: list[str] = []
    for event in pipeline.stream(question, as_messages(history or []), k=k):
        if isinstance(event, TextEvent) and event.content:
            shown.append(event.content)
            sys.stdout.write(terminal_safe(event.content))
            sys.stdout.flush()
        elif isinstance(event, FinalEvent):
            final = event.answer
    show()
    if final is not None and " ".join(final.answer.split()) != " ".join("".join(shown).split()):
        # The claims were re-cited or flagged after the stream: show the checked text too.
        show(f"\nChecked answer:\n{final.answer}")
    return final


def _say_if_starting(components) -> None:
    """Before the pipeline is built: a line when that starts the embedded model (else the wait is silent)."""
    if components.answer_writer() == "embedded" and components.built_chat_model is None:
        say("starting the embedded model (the first answer takes ~15 s)...")


def _say_notice(components) -> None:
    notice = components.notice()
    if notice:
        say(notice)


def _answering_pipeline(components, question: str | None):
    """The default pipeline, its model started (said before, and who writes the answers said after). For a
    question with a fixed reply (a greeting, help, another language) one without a model: no model is started
    for a reply none writes, and no line says one does."""
    from rag.answers.pipeline import fixed_answer
    from rag.components import SessionSettings

    if question is not None and fixed_answer(question) is not None:
        return components.pipeline_for(SessionSettings(extractive=True))
    _say_if_starting(components)
    pipeline = components.pipeline
    _say_notice(components)
    return pipeline


def cmd_ask(args) -> int:
    if not args.batch and not args.question:
        raise QueryError("give a question, e.g. paperchat ask \"what did the MA-RAG authors evaluate on?\"")
    check_one_source(args)
    if args.batch and args.markdown:
        raise QueryError("--markdown writes one answer: ask one question, or use --batch alone (JSON lines)")
    question = None if args.batch else question_arg(args.question)
    # A bad batch file, like a bad filter or question, is said before anything is built or announced, and before
    # any answer is written: not after the model has started, nor halfway through the file.
    rows = read_batch(args.batch) if args.batch else []
    for number, row in enumerate(rows, start=1):
        history = row.get("history") or []
        if not isinstance(history, list) or not all(
                isinstance(m, dict) and m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)
                for m in history):
            raise QueryError(f"{args.batch}: record {number}: 'history' must be a list of "
                             "{\"role\": \"user\" or \"assistant\", \"content\": \"...\"} objects")
    filters = parse_filters(args.where, args.source)
    with components_from_args(args) as components:
        if question is not None:
            validate_question(question, components.settings.max_question_chars)
        for number, row in enumerate(rows, start=1):
            try:
                validate_question(row["question"], components.settings.max_question_chars)
            except QueryError as e:
                raise QueryError(f"{args.batch}: record {number}: {e}") from e
        components.ensure_index()
        pipeline = components.filtered(_answering_pipeline(components, question), filters)
        if args.batch:
            for row in rows:
                answer = pipeline.answer(row["question"], row.get("history") or [], k=args.k)
                show_json(batch_line(row, answer.to_dict()), flush=True)
            return 0
        if args.json:
            show_json(json.dumps(pipeline.answer(question, k=args.k).to_dict(), ensure_ascii=False))
            return 0
        if args.markdown:
            show(answer_markdown(pipeline.answer(question, k=args.k), collection=components.settings.collection))
            return 0
        show_sources(stream_answer(pipeline, question, k=args.k))
        return 0


def cmd_chat(args) -> int:
    with components_from_args(args) as components:
        components.ensure_index()
        pipeline = _answering_pipeline(components, None)  # the questions are still to come
        show("paperchat: ask about the papers; follow-ups use the conversation. quit, an empty line or Ctrl-D ends "
             "the chat.")
        history: list[Turn] = []
        while (question := read_line("\nyou> ")) is not None:
            try:
                answer = stream_answer(pipeline, question, history, k=args.k)
            except (QueryError, LLMError) as e:
                say(f"error: {e}")
                continue
            show_sources(answer)
            history += [Turn.asked(question), Turn.answered(answer)]
    return 0


def cmd_mcp(args) -> int:
    """An MCP server over stdio (for desktop clients and agents): stdout carries the protocol only."""
    from ui.api.mcp_server import run_stdio

    with components_from_args(args) as components:
        components.ensure_index()
        components.warm_up()
        _say_notice(components)
        run_stdio(components)
    return 0
