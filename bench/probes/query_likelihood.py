"""Can the bundled SmolLM2-135M judge what MiniLM cannot? Query likelihood, beside the product, not through it.

Two questions, each answered on the dev sets' single-paper questions (follow-ups and multi-paper ones left out):

* ``rerank``: the product's retriever finds the top ``--k`` papers; each is scored by the mean log-probability
  of the question's tokens after "Title: ... Abstract: ... A reader's question about this paper:" (query
  likelihood, as in UPR, Sachan et al. 2022). R@1 of the retriever, of the likelihood alone, and of the fused
  score plus ``w`` times the likelihood.
* ``answerable``: for the top paper only, the likelihood with the abstract minus the likelihood without it
  (pointwise mutual information: how much the abstract explains the question), compared by ROC AUC between
  answerable questions whose top paper is right and unanswerable questions, beside the dense and fused scores.

The model runs in-process through llama-cpp-python (the ``local`` extra) with ``logits_all``. Slow: about
1.3-1.7 s per abstract on two cores, so ``--k 5`` over dev2's 233 questions takes about 25 minutes.

    PAPERCHAT_DATA_DIR=DIR python bench/probes/query_likelihood.py rerank ../shared/eval/dev2.jsonl --k 5
    PAPERCHAT_DATA_DIR=DIR python bench/probes/query_likelihood.py answerable ../shared/eval/dev2.jsonl \\
        data/eval/answers_check.jsonl data/eval/answers_check2.jsonl data/eval/existence_check.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rag.components import Components  # noqa: E402
from rag.evaluation import DevQuestion, dev_metrics, load_dev  # noqa: E402
from rag.llm.embedded_model import bundled_gguf  # noqa: E402
from rag.settings import load_settings  # noqa: E402

PAPER_PROMPT = "Title: {title}\nAbstract: {abstract}\n\nA reader's question about this paper:"
NO_PAPER_PROMPT = "A reader's question about a research paper:"


def question_logprobs(llm, prefix: str, question: str, n_ctx: int) -> np.ndarray:
    """Log-probability of each of the question's tokens after ``prefix`` (the prefix cut to fit)."""
    asked = llm.tokenize((" " + question).encode(), add_bos=False)
    before = llm.tokenize(prefix.encode(), add_bos=True)[: n_ctx - len(asked) - 8]
    tokens = before + asked
    llm.reset()
    llm.eval(tokens)
    logits = np.asarray(llm.scores[len(before) - 1 : len(tokens) - 1], dtype=np.float64)
    top = logits.max(axis=1, keepdims=True)
    log_norm = (np.log(np.exp(logits - top).sum(axis=1, keepdims=True)) + top)[:, 0]
    return logits[np.arange(len(asked)), asked] - log_norm


def single_paper_questions(files: list[Path], *, answerable_only: bool) -> list[tuple[str, DevQuestion]]:
    """(file stem, question) for each question of ``files`` about one paper or none (no follow-ups)."""
    return [(path.stem, q) for path in files for q in load_dev(path)
            if not q.history and q.kind != "multi" and not (answerable_only and q.kind == "unanswerable")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("probe", choices=["rerank", "answerable"])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--k", type=int, default=5, help="papers reranked per question (rerank)")
    parser.add_argument("--limit", type=int, default=0, help="first N questions only (0: all)")
    parser.add_argument("--n-ctx", type=int, default=1024)
    args = parser.parse_args()

    from llama_cpp import Llama  # the `local` extra

    retriever = Components(load_settings()).retriever
    rows = single_paper_questions(args.files, answerable_only=args.probe == "rerank")
    rows = rows[: args.limit] if args.limit else rows
    k = args.k if args.probe == "rerank" else 1
    found = retriever.search_many([q.question for _, q in rows], k)
    llm = Llama(model_path=str(bundled_gguf()), n_ctx=args.n_ctx, n_threads=2, logits_all=True, verbose=False)
    started = time.perf_counter()
    results = []
    for (stem, q), hits in zip(rows, found, strict=True):
        with_paper = [question_logprobs(llm, PAPER_PROMPT.format(title=h.title, abstract=h.abstract), q.question,
                                        args.n_ctx) for h in hits]
        entry = {"id": q.id, "set": stem, "type": q.kind, "hits": hits, "gold": q.gold,
                 "likelihood": [float(lp.mean()) for lp in with_paper]}
        if args.probe == "answerable":
            without = question_logprobs(llm, NO_PAPER_PROMPT, q.question, args.n_ctx)
            entry["pmi"] = float((with_paper[0] - without).mean())
        results.append(entry)
    seconds = time.perf_counter() - started
    report: dict = {"probe": args.probe, "questions": len(results), "k": k, "seconds": round(seconds, 1)}
    questions = [q for _, q in rows]
    if args.probe == "rerank":
        def r_at_1(score) -> float:
            reranked = [[e["hits"][i] for i in np.argsort(-score(e), kind="stable")] for e in results]
            return round(dev_metrics(questions, reranked)["recall@1"], 4)

        report["r@1_retriever"] = r_at_1(lambda e: np.asarray([h.score for h in e["hits"]]))
        report["r@1_likelihood"] = r_at_1(lambda e: np.asarray(e["likelihood"]))
        for w in (0.05, 0.2, 0.5, 1.0, 2.0):
            report[f"r@1_fused_w{w}"] = r_at_1(
                lambda e, w=w: np.asarray([h.score for h in e["hits"]]) + w * np.asarray(e["likelihood"]))
    else:
        def top_is_gold(e) -> bool:
            return (e["hits"][0].source, e["hits"][0].ordinal) in e["gold"]

        right = [e for e in results if e["type"] != "unanswerable" and top_is_gold(e)]
        unanswerable = [e for e in results if e["type"] == "unanswerable"]
        report["answerable_right"], report["unanswerable"] = len(right), len(unanswerable)
        for name, value in (("pmi", lambda e: e["pmi"]), ("likelihood", lambda e: e["likelihood"][0]),
                            ("dense", lambda e: e["hits"][0].dense_score), ("fused", lambda e: e["hits"][0].score)):
            scores = [value(e) for e in right] + [value(e) for e in unanswerable]
            report[f"auc_{name}"] = round(float(roc_auc_score([1] * len(right) + [0] * len(unanswerable), scores)), 3)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
