"""Would another lexical or dense signal lift SciFact? A simulation beside the product, not through it.

Each abstract is embedded whole (title + text), by its title and sentence by sentence with the product's embedder
(int8 ONNX, as shipped); BM25 (bm25s, the product's k1 0.9 / b 0.5, English stemming and stop words) runs over the
whole texts, their sentences, their titles and their adjacent word pairs. Every feature is min-max normalised over
the union of the dense and BM25 top 100 and mixed linearly; the weights are fitted by coordinate ascent on the
train claims and reported on the test claims (nDCG@10). The product's own fused score is not reproduced exactly
(its chunk and profile weights differ); what this shows is what each feature adds to the same base.

    python bench/probes/scifact_features.py ../shared/eval/scifact --cache /tmp/scifact-features

The embeddings (about 10 minutes on two cores) are kept in ``--cache`` and reused.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

NAMES = ["whole", "title", "centroid", "best_sentence", "bm25", "best_two", "sentence_bm25", "title_bm25", "pairs"]
BASE = {"whole": 0.5, "centroid": 0.3, "bm25": 0.5}


def embed_corpus(docs: list[dict], cache: Path) -> dict[str, np.ndarray]:
    from rag.components import Components
    from rag.corpus.chunking import split_sentences
    from rag.settings import Settings

    files = {k: cache / f"{k}.npy" for k in ("whole", "title", "sentences", "owner")}
    if all(f.exists() for f in files.values()):
        return {k: np.load(f) for k, f in files.items()}
    cache.mkdir(parents=True, exist_ok=True)
    embedder = Components(Settings(data_dir=cache / "unused-index")).embedder
    sentences, owner = [], []
    for i, d in enumerate(docs):
        for a, b in split_sentences(d["text"]):
            if d["text"][a:b].strip():
                sentences.append(d["text"][a:b].strip())
                owner.append(i)
    out = {
        "sentences": embedder.embed(sentences),
        "owner": np.array(owner),
        "title": embedder.embed([d.get("title") or d["text"][:100] for d in docs]),
        "whole": embedder.embed([f"{d.get('title', '')}. {d['text']}".strip() for d in docs]),
    }
    for k, v in out.items():
        np.save(files[k], v)
    return out


def main(argv: list[str] | None = None) -> None:
    import bm25s
    import Stemmer

    from rag.components import Components
    from rag.corpus.chunking import split_sentences
    from rag.settings import Settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("beir", type=Path, help="BEIR SciFact folder (corpus.jsonl, queries.jsonl, qrels/)")
    parser.add_argument("--cache", type=Path, required=True, help="folder for the embeddings")
    args = parser.parse_args(argv)

    docs = [json.loads(line) for line in (args.beir / "corpus.jsonl").open()]
    ids = [d["_id"] for d in docs]
    vectors = embed_corpus(docs, args.cache)
    whole, title, sent, owner = vectors["whole"], vectors["title"], vectors["sentences"], vectors["owner"]
    n = len(docs)
    centroid = np.zeros_like(whole)
    np.add.at(centroid, owner, sent)
    centroid /= np.linalg.norm(centroid, axis=1, keepdims=True)

    stemmer = Stemmer.Stemmer("english")

    def tokens(text: str) -> list[str]:
        return bm25s.tokenize([text], stopwords="en", stemmer=stemmer, show_progress=False, return_ids=False)[0]

    def pairs(text: str) -> list[str]:
        t = tokens(text)
        return [f"{a}_{b}" for a, b in zip(t, t[1:], strict=False)] or ["_"]

    def index(texts: list[list[str]]):
        bm25 = bm25s.BM25(k1=0.9, b=0.5)
        bm25.index([t or ["_"] for t in texts], show_progress=False)
        return bm25

    def scores(bm25, query_tokens: list[str], size: int) -> np.ndarray:
        known = [t for t in query_tokens if t in bm25.vocab_dict]
        return bm25.get_scores(known) if known else np.zeros(size)

    texts = [f"{d.get('title', '')} {d['text']}" for d in docs]
    sentence_texts = [d["text"][a:b].strip() for d in docs for a, b in split_sentences(d["text"])
                      if d["text"][a:b].strip()]
    lexical = {
        "bm25": index([tokens(t) for t in texts]),
        "sentence_bm25": index([tokens(t) for t in sentence_texts]),
        "title_bm25": index([tokens(d.get("title") or "_") for d in docs]),
        "pairs": index([pairs(t) for t in texts]),
    }
    queries = {json.loads(line)["_id"]: json.loads(line)["text"] for line in (args.beir / "queries.jsonl").open()}
    embedder = Components(Settings(data_dir=args.cache / "unused-index")).embedder

    def prepare(split: str) -> list[tuple[np.ndarray, np.ndarray, int]]:
        qrels: dict[str, dict[str, int]] = {}
        for row in csv.DictReader((args.beir / "qrels" / f"{split}.tsv").open(), delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
        qids = [q for q in qrels if q in queries]
        qv = embedder.embed([queries[q] for q in qids])
        out = []
        for k, q in enumerate(qids):
            dense = whole @ qv[k]
            by_sentence = sent @ qv[k]
            best = np.full(n, -1.0)
            np.maximum.at(best, owner, by_sentence)
            second = np.full(n, -1.0)
            for j in np.argsort(-by_sentence)[:2000]:  # the second-best sentence of the papers near the top
                o = owner[j]
                if by_sentence[j] < best[o]:
                    second[o] = max(second[o], by_sentence[j])
            best_two = np.where(second > -1, (best + second) / 2, best)
            words = tokens(queries[q])
            bm = scores(lexical["bm25"], words, n)
            sentence_bm = np.zeros(n)
            np.maximum.at(sentence_bm, owner, scores(lexical["sentence_bm25"], words, len(owner)))
            cand = np.union1d(np.argsort(-dense)[:100], np.argsort(-bm)[:100])
            columns = {
                "whole": dense, "title": title @ qv[k], "centroid": centroid @ qv[k], "best_sentence": best,
                "bm25": bm, "best_two": best_two, "sentence_bm25": sentence_bm,
                "title_bm25": scores(lexical["title_bm25"], words, n),
                "pairs": scores(lexical["pairs"], pairs(queries[q]), n),
            }
            features = np.column_stack([columns[name][cand] for name in NAMES])
            relevant = np.array([qrels[q].get(ids[c], 0) for c in cand])
            out.append((features, relevant, sum(1 for v in qrels[q].values() if v > 0)))
        return out

    discount = 1 / np.log2(np.arange(2, 12))

    def ndcg(data, w: np.ndarray) -> float:
        total = 0.0
        for features, relevant, n_relevant in data:
            lo, hi = features.min(0), features.max(0)
            top = np.argsort(-(((features - lo) / np.where(hi > lo, hi - lo, 1)) @ w))[:10]
            ideal = discount[: min(n_relevant, 10)].sum()
            total += float((relevant[top] > 0) @ discount[: len(top)]) / ideal if ideal else 0.0
        return total / len(data)

    def ascend(data, free: tuple[str, ...]) -> tuple[float, np.ndarray]:
        w = np.array([BASE.get(name, 0.0) for name in NAMES])
        best = ndcg(data, w)
        for _ in range(3):
            for name in free:
                for delta in (-0.1, -0.05, 0.05, 0.1):
                    trial = w.copy()
                    trial[NAMES.index(name)] = max(0.0, trial[NAMES.index(name)] + delta)
                    if (value := ndcg(data, trial)) > best + 1e-5:
                        best, w = value, trial
        return best, w

    train, test = prepare("train"), prepare("test")
    base = ("whole", "title", "centroid")
    print("| features beside whole-text dense + BM25 | train nDCG@10 | test nDCG@10 | weights |")
    print("|---|---|---|---|")
    for extra in ((), ("best_sentence",), ("best_two",), ("sentence_bm25",), ("title_bm25",), ("pairs",)):
        fitted, w = ascend(train, base + extra)
        weights = ", ".join(f"{name} {v:.2f}" for name, v in zip(NAMES, w, strict=True) if v)
        print(f"| {' + '.join(extra) or 'title + centroid'} | {fitted:.4f} | {ndcg(test, w):.4f} | {weights} |")


if __name__ == "__main__":
    main()
