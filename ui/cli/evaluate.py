"""``paperchat eval``: measure retrieval on a question file or a BEIR dataset, or judge answers."""

from __future__ import annotations

import json
from pathlib import Path

from rag.errors import QueryError
from ui.cli.output import show, show_json
from ui.shared.commands import components_from_args


def cmd_eval(args) -> int:
    if args.details and not args.answers:  # the details are the answers, one JSON line each: none without --answers
        raise QueryError("--details writes every answer: add --answers, e.g. paperchat eval FILE --answers "
                         "--details answers.jsonl")
    if not args.beir and not args.file:
        raise QueryError("give an evaluation file (e.g. data/eval/dev.jsonl) or --beir DIR")
    questions = None if args.beir else _questions(Path(args.file), answers=args.answers)  # said before any index
    components = components_from_args(args)
    if args.beir:
        metrics = _beir_metrics(components, Path(args.beir), args.split)
    else:
        components.ensure_index()
        if args.answers:
            metrics = _answer_metrics(components, questions, args.details)
        else:
            from rag.evaluation import dev_metrics, search_as_asked

            metrics = dev_metrics(questions, search_as_asked(questions, components.retriever))
    if args.json:
        show_json(json.dumps(metrics))
    else:
        for key, value in metrics.items():
            show(f"{key}: {value:.4f}" if isinstance(value, float) else f"{key}: {value}")
    return 0


def _questions(path: Path, *, answers: bool) -> list:
    """The file's questions; for retrieval, at least one with gold papers (else every metric would be 0)."""
    from rag.evaluation import load_dev

    questions = load_dev(path)
    if not answers and not any(q.gold for q in questions):
        raise QueryError(f"no question in {path} has gold papers, and retrieval is measured on those: "
                         "add \"gold\", or judge the answers with --answers")
    return questions


def _beir_metrics(components, folder: Path, split: str) -> dict:
    from rag.components import KnownSources
    from rag.corpus.discovery import identity
    from rag.corpus.load import file_label
    from rag.evaluation import beir_metrics, load_beir

    queries, qrels = load_beir(folder, split)
    retriever = components.retriever
    retriever.refresh()
    # Stored ids are namespaced by their file ("corpus.jsonl#doc1"); the qrels name the documents' own ids.
    corpus_file = folder / "corpus.jsonl"
    settings = components.settings
    recorded = KnownSources(components.store, settings.corpus_dir).label_of(identity(corpus_file))
    labels = [file_label(corpus_file, settings.corpus_dir, folder=parent) for parent in (None, folder)]
    # The label the index holds the file under, else the one it gets ingested by itself, or with its folder.
    prefixes = tuple(f"{label}#" for label in dict.fromkeys([*([recorded] if recorded else []), *labels]))

    def own_id(paper_id: str) -> str:
        return next((paper_id[len(p) :] for p in prefixes if paper_id.startswith(p)), paper_id)

    def search(texts: list[str]) -> list[list[str]]:
        results = retriever.search_many(texts, 100)
        return [[own_id(h.paper_id) for h in hits] for hits in results]

    return beir_metrics(queries, qrels, search)


def _answer_metrics(components, questions: list, details_path: str | None) -> dict:
    """Answer every question (with its history) and judge the answers; ``details_path``: one JSON line each."""
    from rag.evaluation import answer_metrics

    with components:
        pipeline = components.pipeline
        answers = []
        details = open(details_path, "w", encoding="utf-8") if details_path else None  # noqa: SIM115
        try:
            for q in questions:
                answers.append(pipeline.answer(q.question, q.history))
                if details:
                    details.write(json.dumps({"id": q.id, "type": q.kind, "gold": q.gold, "facts": q.facts,
                                              **answers[-1].to_dict()}, ensure_ascii=False) + "\n")
                    details.flush()
        finally:
            if details:
                details.close()
        return {"backend": pipeline.backend, **answer_metrics(questions, answers)}
