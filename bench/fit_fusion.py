"""Fit the hybrid retriever's fusion weights (rag/retrieval/hybrid.py ``FusionParams``) on labelled questions.

The fusion is a linear model over four features of each candidate paper, each min-max normalised over the
question's candidates (``hybrid.FEATURES``): the dense score, BM25's best chunk, BM25 over whole papers and a
0/1 "the paper is named in the question" (its coined title or an author's full name). The three parameters
(``dense_weight``, the whole-paper share of the lexical part, the title bonus) are fitted by coordinate ascent
(steps 0.2 down to 0.025, from the current defaults, after a coarse grid) on an objective
that adds what each set is judged by:

* a dev file in our format (ICML ``dev2.jsonl``): MRR of single-paper questions plus half their recall@1
  (follow-ups searched with their history, as the product does: ``rag.evaluation.search_as_asked``);
* a BEIR dataset's train split (SciFact): nDCG@10;
* exact lookups made from the dev index (``lookup_questions``: each coined title and each author's full name
  asked for by name), scored like the dev file, so that weights fitted on paraphrases keep name lookups.

Features are computed once through the product's retriever (``HybridRetriever.features``), so the fit ranks
exactly as ``search`` would. The dev file is also cross-validated (k folds by position: fit on the rest,
rank each question with weights that never saw it). The BEIR test split is scored once, with the final
weights, and never used to choose them.

    python bench/fit_fusion.py --dev ../shared/eval/dev2.jsonl data/eval/dev.jsonl --dev-data DIR \\
        --beir ../shared/eval/scifact --beir-data DIR --beir-collection scifact

Each ``--*-data`` is the data folder of an index of that corpus (``paperchat ingest``).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag.evaluation import ndcg_at_k  # noqa: E402  (after the path: run as a script from anywhere)
from rag.retrieval.hybrid import _author_pattern, fusion_weights  # noqa: E402

STEPS = (0.2, 0.1, 0.05, 0.025)


@dataclass
class Question:
    kind: str  # "single", "multi" or "beir"
    keys: list[str]  # the candidates' labels (what ``gold`` names)
    features: np.ndarray
    gold: set[str]
    pinned: set[str]  # papers a follow-up points at: first whatever the fusion says


def ranked(q: Question, w: np.ndarray) -> list[str]:
    scores = q.features @ w
    order = sorted(range(len(q.keys)), key=lambda i: (-(q.keys[i] in q.pinned), -scores[i], q.keys[i]))
    return [q.keys[i] for i in order]


def metrics(questions: list[Question], w: np.ndarray) -> dict[str, float]:
    r1, rr, ndcg, sets = [], [], [], []
    for q in questions:
        found = ranked(q, w)
        if q.kind == "beir":
            ndcg.append(ndcg_at_k(found, dict.fromkeys(q.gold, 1)))
        elif q.kind == "multi":
            sets.append(len(q.gold & set(found[:10])) / len(q.gold))
        else:
            position = next((i for i, d in enumerate(found) if d in q.gold), None)
            r1.append(position == 0)
            rr.append(1 / (position + 1) if position is not None else 0.0)
    out = {}
    if r1:
        out.update({"recall@1": float(np.mean(r1)), "mrr": float(np.mean(rr))})
    if sets:
        out["set_recall@10"] = float(np.mean(sets))
    if ndcg:
        out["ndcg@10"] = float(np.mean(ndcg))
    return out


def objective(parts: list[list[Question]], params: tuple[float, float, float]) -> float:
    total = 0.0
    for questions in parts:
        m = metrics(questions, fusion_weights(*params))
        total += m.get("ndcg@10", 0.0) + m.get("mrr", 0.0) + 0.5 * m.get("recall@1", 0.0)
    return total


COARSE_GRID = [(d / 10, share / 10, title / 10) for d in range(3, 9) for share in (3, 5, 7) for title in (3, 6, 10)]


def fit(parts: list[list[Question]], start: tuple[float, float, float]) -> tuple[float, float, float]:
    """Coordinate ascent from the best of ``start`` and a coarse grid (one parameter moved at a time cannot
    leave a ridge: a higher dense weight loses name lookups unless the title bonus rises with it), moving one
    parameter by a step while that improves the objective, then smaller steps."""
    scored = [(objective(parts, tuple(p)), list(p)) for p in [start, *COARSE_GRID]]
    best, params = max(scored, key=lambda pair: pair[0])  # ties: the first, i.e. ``start``
    limits = ((0.0, 1.0), (0.0, 1.0), (0.0, 2.0))
    for step in STEPS:
        improved = True
        while improved:
            improved = False
            for j, (low, high) in enumerate(limits):
                for delta in (step, -step):
                    trial = list(params)
                    trial[j] = round(min(high, max(low, trial[j] + delta)), 4)
                    value = objective(parts, tuple(trial))
                    if value > best + 1e-9:
                        best, params, improved = value, trial, True
    return tuple(params)


def components_for(data_dir: str, collection: str | None):
    from rag.components import Components
    from rag.settings import load_settings

    overrides = {"data_dir": Path(data_dir)}
    if collection:
        overrides["collection"] = collection
    return Components(load_settings(**overrides))


def dev_questions(path: Path, components) -> list[Question]:
    from rag.answers.follow_up import resolve_follow_up
    from rag.evaluation import load_dev

    retriever = components.retriever
    retriever.refresh()
    papers = {p.paper_id: f"{p.source}#{p.ordinal}" for p in retriever.every_paper()}
    rows = [q for q in load_dev(path) if q.gold]
    follow_ups = [resolve_follow_up(q.question, q.history, retriever, None) for q in rows]
    queries = [f.query for f in follow_ups]
    found = retriever.features(queries, components.embedder.embed(queries))
    return [
        Question("multi" if q.kind == "multi" or len(q.gold) > 1 else "single",
                 [papers[pid] for pid in c.paper_ids], c.features, {f"{s}#{o}" for s, o in q.gold},
                 {papers[pid] for pid in f.pinned})
        for q, f, c in zip(rows, follow_ups, found, strict=True)
    ]


LOOKUP_TEMPLATES = ("What did the {} authors evaluate on?", "how does {} work", "{}")


def lookup_questions(components) -> list[Question]:
    """Exact lookups made from the index itself: each coined title asked about by name ("What did the DSL
    authors evaluate on?") and each author's full name ("papers by Tri Dao"). Dev sets written in users' own
    words hold few of these, yet a fit without them can trade them away for paraphrases."""
    retriever = components.retriever
    retriever.refresh()
    papers = {p.paper_id: p for p in retriever.every_paper()}
    label = {pid: f"{p.source}#{p.ordinal}" for pid, p in papers.items()}
    asked: list[tuple[str, set[str]]] = []
    for pid in sorted({pid for pid, _ in retriever._name_patterns}):
        asked += [(template.format(papers[pid].title), {pid}) for template in LOOKUP_TEMPLATES]
    by_author: dict[str, set[str]] = {}
    for p in papers.values():
        for name in p.authors:
            by_author.setdefault(name, set()).add(p.paper_id)
    # The names the retriever itself matches as names (a full name, not a lone surname).
    asked += [(f"papers by {name}", pids) for name, pids in sorted(by_author.items()) if _author_pattern(name)]
    if not asked:
        return []
    queries = [q for q, _ in asked]
    found = retriever.features(queries, components.embedder.embed(queries))
    return [Question("single" if len(gold) == 1 else "multi", [label[pid] for pid in c.paper_ids], c.features,
                     {label[pid] for pid in gold}, set())
            for (_, gold), c in zip(asked, found, strict=True)]


def beir_questions(folder: Path, split: str, components) -> list[Question]:
    from rag.evaluation import load_beir

    retriever = components.retriever
    retriever.refresh()
    queries, qrels = load_beir(folder, split)
    ids = list(queries)
    texts = [queries[i] for i in ids]
    found = retriever.features(texts, components.embedder.embed(texts))
    own = lambda pid: pid.rsplit("#", 1)[-1]  # noqa: E731  stored ids are namespaced by their file
    return [Question("beir", [own(p) for p in c.paper_ids], c.features,
                     {d for d, rel in qrels[i].items() if rel > 0}, set())
            for i, c in zip(ids, found, strict=True)]


def cross_validate(dev: list[Question], others: list[list[Question]], start, folds: int) -> dict[str, float]:
    """Each dev question ranked with weights fitted on the other folds (and the other sets)."""
    results: list[tuple[int, dict]] = []
    for fold in range(folds):
        train = [q for i, q in enumerate(dev) if i % folds != fold]
        params = fit([train, *others], start)
        print(f"  fold {fold + 1}/{folds}: dense {params[0]}, paper share {params[1]}, title {params[2]}", flush=True)
        results += [(i, metrics([q], fusion_weights(*params))) for i, q in enumerate(dev) if i % folds == fold]
    keys = {k for _, m in results for k in m}
    return {k: float(np.mean([m[k] for _, m in results if k in m])) for k in sorted(keys)}


def main() -> None:
    from rag.retrieval.hybrid import FusionParams

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dev", type=Path, nargs="+", default=[],
                        help="question files in our dev format (e.g. ../shared/eval/dev2.jsonl data/eval/dev.jsonl)")
    parser.add_argument("--dev-data", help="data folder of the index the dev questions ask about")
    parser.add_argument("--dev-collection", default=None)
    parser.add_argument("--beir", type=Path, help="BEIR dataset folder (train split fitted, test reported)")
    parser.add_argument("--beir-data", help="data folder of the index of the BEIR corpus")
    parser.add_argument("--beir-collection", default=None)
    parser.add_argument("--no-lookups", action="store_true",
                        help="leave out the exact lookups made from the dev index (coined titles, author names)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--start", default="", help="DENSE,PAPER_SHARE,TITLE to start from (default: the current "
                        "defaults; give the hand-set 0.5,0.5,0.3 for a cross-validation that never saw the fit)")
    args = parser.parse_args()
    default = FusionParams()
    start = (default.dense_weight, default.paper_lexical_weight, default.title_bonus)
    if args.start:
        start = tuple(float(x) for x in args.start.split(","))
    dev, train, test, lookups = [], [], [], []
    if args.dev:
        components = components_for(args.dev_data, args.dev_collection)
        dev = [q for path in args.dev for q in dev_questions(path, components)]
        lookups = [] if args.no_lookups else lookup_questions(components)
    if args.beir:
        beir = components_for(args.beir_data, args.beir_collection)
        train, test = beir_questions(args.beir, "train", beir), beir_questions(args.beir, "test", beir)
    sets = [s for s in (dev, train, lookups) if s]
    print(f"start: dense {start[0]}, paper share {start[1]}, title {start[2]}")
    named = (("dev", dev), ("lookups", lookups), ("beir train", train), ("beir test", test))
    for name, questions in named:
        if questions:
            print(f"  {name} ({len(questions)} questions): {_show(metrics(questions, fusion_weights(*start)))}")
    if dev and args.folds > 1:
        extra = "".join(f"{name} and " for name, part in (("beir train", train), ("lookups", lookups)) if part)
        print(f"dev, {args.folds}-fold cross-validation (fitted with {extra}the other folds):")
        print(f"  {_show(cross_validate(dev, [s for s in (train, lookups) if s], start, args.folds))}")
    params = fit(sets, start)
    print(f"fitted on everything: dense {params[0]}, paper share {params[1]}, title {params[2]}")
    for name, questions in named:
        if questions:
            print(f"  {name}: {_show(metrics(questions, fusion_weights(*params)))}")


def _show(m: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4f}" for k, v in m.items())


if __name__ == "__main__":
    main()
