"""Fit the list-answer membership model (rag/answers/membership.py ``MembershipParams``) on list questions with
judged answers, and report it cross-validated.

Each multi-paper question ("which papers ...?", "how many papers ...?") is searched as the answer pipeline
searches it (``PipelineConfig.multi_candidates`` deep); each candidate gets the product's ``FEATURES``
(``ExtractiveAnswerer.membership_features``: the topic-alone search, the topic's word coverage, the closest
sentence) and a label (is it in the question's gold list?). A logistic regression (scikit-learn, L2, C=1)
over them gives the weights. Leave-one-question-out: each question's papers are chosen by a model fitted on
all the other questions, then scored (macro precision and recall of the chosen set, and whether the count is
within one of the gold count), per file and beside the shipped weights.

    python bench/fit_membership.py data/eval/lists.jsonl ../shared/eval/dev2.jsonl data/eval/dev.jsonl \\
        --data-dir DIR [--threshold 0.4] [--relative 0.6]

``--data-dir``: the data folder of an index of the bundled corpus (``paperchat ingest``).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag.answers.membership import FEATURES, MembershipParams, chances, listed  # noqa: E402  (after the path)


@dataclass
class ListQuestion:
    file: str
    question: str
    features: np.ndarray
    labels: np.ndarray  # 1 where the candidate is in the gold list
    gold_count: int
    named: np.ndarray  # 0 where the topic gives a name (ALFWorld) the candidate's abstract never mentions
    keeps: np.ndarray  # [j, i]: candidate i has every key term of the topic that candidate j has (``key_terms``)


def load_questions(paths: list[Path], data_dir: str) -> list[ListQuestion]:
    from rag.answers.extractive import ExtractiveAnswerer, mentions, required_names
    from rag.answers.pipeline import PipelineConfig
    from rag.components import Components
    from rag.evaluation import load_dev
    from rag.settings import load_settings

    components = Components(load_settings(data_dir=Path(data_dir)))
    retriever = components.retriever
    answerer = ExtractiveAnswerer(components.embedder, idf=retriever.idf, search=retriever.search)
    depth = PipelineConfig().multi_candidates
    out = []
    for path in paths:
        for q in load_dev(path):
            if q.kind != "multi" or not q.gold:
                continue
            hits = retriever.search(q.question, depth)
            gold = set(q.gold)
            labels = np.array([(h.source.split("/")[-1], h.ordinal) in gold for h in hits], dtype=int)
            topic = answerer.list_topic(q.question)
            names = required_names(topic)
            named = np.array([not names or any(mentions(h, n) for n in names) for h in hits], dtype=float)
            keys = [answerer.key_terms(topic, h) for h in hits]  # each candidate's, were it the likeliest
            keeps = np.array([[answerer.uses_all(h, key) for h in hits] for key in keys], dtype=bool)
            out.append(ListQuestion(path.name, q.question, answerer.membership_features(q.question, hits), labels,
                                    len(gold), named, keeps))
    return out


def choose(chance: np.ndarray, q: ListQuestion, threshold: float, relative: float) -> list[int]:
    """As ``ExtractiveAnswerer._choose_papers`` does (``membership.listed``), at ``threshold`` and ``relative``
    (the relative bar on the share of the topic's words); a paper that never mentions a name the topic gives is
    not listed, nor one without the key terms of the likeliest (``ExtractiveAnswerer.key_terms``)."""
    chosen = listed(chance * q.named, q.features[:, FEATURES.index("topic_coverage")],
                    replace(MembershipParams(), threshold=threshold, relative_coverage=relative))
    return [chosen[0], *(i for i in chosen[1:] if q.keeps[chosen[0], i])]


def scores(q: ListQuestion, chosen: list[int]) -> tuple[float, float, bool]:
    right = int(q.labels[chosen].sum())
    return right / len(chosen), right / q.gold_count, abs(len(chosen) - q.gold_count) <= 1


def fit(questions: list[ListQuestion]) -> MembershipParams:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=1.0, max_iter=5000)
    model.fit(np.vstack([q.features for q in questions]), np.concatenate([q.labels for q in questions]))
    return MembershipParams(float(model.intercept_[0]), *(float(w) for w in model.coef_[0]))


def report(questions: list[ListQuestion], chosen: list[list[int]], title: str) -> None:
    print(title)
    for file in dict.fromkeys(q.file for q in questions):
        rows = [scores(q, c) for q, c in zip(questions, chosen, strict=True) if q.file == file]
        p, r, n = (float(np.mean([row[i] for row in rows])) for i in range(3))
        print(f"  {file:16s} {len(rows):3d} questions  precision {p:.3f}  recall {r:.3f}  count within one {n:.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="question files (our JSONL format; multi rows used)")
    parser.add_argument("--data-dir", required=True, help="data folder of an index of the bundled corpus")
    parser.add_argument("--threshold", type=float, nargs="+", default=[MembershipParams().threshold],
                        help="the chance at which a paper is listed (several: each reported)")
    parser.add_argument("--relative", type=float, nargs="+", default=[MembershipParams().relative_coverage],
                        help="the relative bar on the share of the topic's words (several: each reported)")
    args = parser.parse_args(argv)
    questions = load_questions(args.files, args.data_dir)
    shipped = MembershipParams()
    held_out = [fit(questions[:i] + questions[i + 1:]) for i in range(len(questions))]
    for threshold in args.threshold:
        for relative in args.relative:
            report(questions, [choose(chances(q.features, shipped), q, threshold, relative) for q in questions],
                   f"shipped weights, threshold {threshold}, relative bar {relative}")
            report(questions, [choose(chances(q.features, params), q, threshold, relative)
                               for q, params in zip(questions, held_out, strict=True)],
                   f"leave one question out (each chosen by a model that never saw it), threshold {threshold}, "
                   f"relative bar {relative}")
    final = fit(questions)
    print("fitted on all:", ", ".join(f"{name} {getattr(final, name):.2f}" for name in ("intercept", *FEATURES)))


if __name__ == "__main__":
    main()
