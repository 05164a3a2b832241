"""Retrieval metrics: our dev-set format and BEIR (nDCG@10, recall@100).

Dev format (``data/eval/dev.jsonl``): one object a line with ``question``, ``type`` and ``gold``, a list
of ``{"file", "ordinal"}``. Metrics, all at the paper level:

* recall@k: share of single-paper questions whose gold paper is in the top k;
* MRR: mean reciprocal rank of that paper (0 when outside the results);
* set recall@10: for ``multi`` questions, the share of their gold papers found in the top 10, averaged.

A follow-up with its ``history`` is searched as the product searches it (``search_as_asked``): resolved
against the conversation first, the papers it points at leading; alone, "What timing error does it report?"
names no paper.

Unanswerable questions (empty ``gold``) are not counted here; answers are judged elsewhere.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rag.errors import CorpusError
from rag.types import Hit


@dataclass
class DevQuestion:
    question: str
    kind: str
    gold: list[tuple[str, int]]
    facts: list[str] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)  # the conversation before a follow-up question
    id: str = ""


def read_jsonl(path: Path, what: str) -> list[dict]:
    return [row for _, row in read_numbered_jsonl(path, what)]


def read_numbered_jsonl(path: Path, what: str) -> list[tuple[int, dict]]:
    """The objects of a JSON Lines file, each with its line number (for messages about one record)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise CorpusError(f"cannot read {what} file {path}: {e}") from e
    return numbered_jsonl(lines, str(path))


def parse_jsonl(lines: Sequence[str], path: str) -> list[dict]:
    """JSON objects, one a line; blank lines skipped; a bad line is a CorpusError naming it."""
    return [row for _, row in numbered_jsonl(lines, path)]


def numbered_jsonl(lines: Sequence[str], path: str) -> list[tuple[int, dict]]:
    """``parse_jsonl`` with each object's line number."""
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise CorpusError(f"{path}: line {number}: not valid JSON ({e.msg}): fix or remove the line") from e
        if not isinstance(row, dict):
            raise CorpusError(f"{path}: line {number}: expected a JSON object")
        rows.append((number, row))
    return rows


GOLD_PAPER = '{"file": "000_dcbf1b5d2daaeff5.txt", "ordinal": 1}'  # a paper: its corpus file, its number in it
DEV_FORMAT = (f'{{"question": "...", "gold": [{GOLD_PAPER}]}} a line (optional: "type", "facts": ["..."], '
              '"history", "id"; "gold": [] for a question no paper answers)')


def load_dev(path: Path) -> list[DevQuestion]:
    """The questions of an evaluation file. A record that does not fit ``DEV_FORMAT`` is a CorpusError naming its
    line and field, and so is a file without questions (its metrics would be 0 or nan, not a measurement)."""
    out = []
    for number, row in read_numbered_jsonl(path, "evaluation"):
        problem = _dev_record_problem(row)
        if problem:
            raise CorpusError(f"{path}: line {number}: {problem}")
        gold = [(g["file"], int(g["ordinal"])) for g in row.get("gold") or []]
        out.append(DevQuestion(row["question"], str(row.get("type", "")), gold,
                               [str(f) for f in row.get("facts") or []], row.get("history") or [],
                               str(row.get("id", number))))
    if not out:
        raise CorpusError(f"no questions in {path}: write {DEV_FORMAT}")
    return out


def _dev_record_problem(row: dict) -> str:
    """What in one evaluation record does not fit ``DEV_FORMAT``, said with the fix ("": nothing)."""
    if not isinstance(row.get("question"), str) or not row["question"].strip():
        return f"no 'question' string; write {DEV_FORMAT}"
    gold = row.get("gold") or []
    if not isinstance(gold, list):
        return f"'gold' is {_shown(gold)}, not a list of papers like [{GOLD_PAPER}]"
    for n, entry in enumerate(gold, start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str) or not entry["file"].strip():
            return f"gold entry {n} ({_shown(entry)}) has no 'file': write each gold paper as {GOLD_PAPER}"
        if not _whole_number(entry.get("ordinal")):
            return (f"gold entry {n} has 'ordinal' {_shown(entry.get('ordinal'))}, not the paper's number in its "
                    f"file: write each gold paper as {GOLD_PAPER}")
    if not isinstance(row.get("facts") or [], list):
        return f"'facts' is {_shown(row['facts'])}, not a list of strings like [\"12%\"]"
    history = row.get("history") or []
    if not isinstance(history, list) or not all(isinstance(m, dict) for m in history):
        return "'history' must be a list of {\"role\", \"content\"} objects"
    return ""


def _whole_number(value) -> bool:
    """An ordinal as a JSON file gives it: 3 or "3" (not 3.5, true, "x")."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or isinstance(value, str) and value.strip().isdigit()


def _shown(value) -> str:
    """A JSON value as the file wrote it, cut short for a one-line message."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:59] + "…"


def search_as_asked(questions: Sequence[DevQuestion], retriever, k: int = 10) -> list[list[Hit]]:
    """Each question's ranked papers as the answer pipeline finds them (no chat model rewrites follow-ups)."""
    from rag.answers.follow_up import pinned_first, resolve_follow_up

    follow_ups = [resolve_follow_up(q.question, q.history, retriever, None) for q in questions]
    results = retriever.search_many([f.query for f in follow_ups], k)
    return [pinned_first(follow, hits, retriever, k) for follow, hits in zip(follow_ups, results, strict=True)]


def dev_metrics(questions: Sequence[DevQuestion], results: Sequence[Sequence[Hit]]) -> dict[str, float]:
    single_ranks: list[int | None] = []
    set_recalls: list[float] = []
    for q, hits in zip(questions, results, strict=True):
        keys = [(h.source, h.ordinal) for h in hits]
        if not q.gold:
            continue
        if q.kind == "multi" or len(q.gold) > 1:
            top = set(keys[:10])
            set_recalls.append(sum(g in top for g in q.gold) / len(q.gold))
            continue
        single_ranks.append(keys.index(q.gold[0]) + 1 if q.gold[0] in keys else None)
    n = max(len(single_ranks), 1)
    metrics = {f"recall@{k}": sum(r is not None and r <= k for r in single_ranks) / n for k in (1, 5, 10)}
    metrics["mrr"] = sum(1 / r for r in single_ranks if r is not None) / n
    metrics["set_recall@10"] = sum(set_recalls) / len(set_recalls) if set_recalls else float("nan")
    metrics["questions"] = len(single_ranks)
    metrics["multi_questions"] = len(set_recalls)
    return metrics


def answer_metrics(questions: Sequence[DevQuestion], answers: Sequence) -> dict[str, float]:
    """How answers do on a dev set, for one answer writer.

    * citation rate: answers to answerable questions (refusals aside) that cite at least one paper;
    * citation precision: cited papers that are gold, over answerable questions;
    * fact recall: detail questions whose answer contains every ``facts`` string;
    * abstention: unanswerable questions refused; false refusals: answerable questions refused;
    * unsupported-claim rate: claims no source supports, over all claims of all answers;
    * invented rate: answers that show (not struck through) a name or figure found in no source and not in
      the question, checked again here on the final text;
    * seconds per answer.
    """
    from rag.answers.attribution import invented_terms, shown_text
    from rag.answers.citations import split_claims
    from rag.plain_text import readable

    facts_hit = facts_n = 0
    cited_ok = cited_n = 0
    abstained = unanswerable = 0
    false_refusals = answerable = answered = with_citation = 0
    claims = unsupported = invented = 0
    seconds = 0.0
    for q, a in zip(questions, answers, strict=True):
        claims += len(a.claims)
        unsupported += sum(not c.supported for c in a.claims)
        known = " ".join([q.question, *(m.get("content", "") for m in q.history),
                          *(f"{h.title} {h.label} {h.abstract or h.text} {readable(h.abstract or h.text)}"
                            for h in a.sources)]).lower()  # sources as written and as shown, and where they are
        known = " ".join(known.split())
        stated = " ".join(c.text for c in split_claims(shown_text(a.answer)))  # without list numbering
        invented += bool(invented_terms(stated, known))
        seconds += a.seconds
        if not q.gold:
            unanswerable += 1
            abstained += bool(a.refused)
            continue
        answerable += 1
        false_refusals += bool(a.refused)
        answered += not a.refused
        with_citation += bool(a.citations) and not a.refused
        gold = set(q.gold)
        for c in a.citations:
            cited_n += 1
            cited_ok += (c.source, c.ordinal) in gold
        if q.kind in ("detail", "followup") and q.facts:
            facts_n += 1
            text = a.answer.lower()
            facts_hit += all(f.lower() in text for f in q.facts)
    n = max(len(answers), 1)
    return {
        "citation_rate": with_citation / answered if answered else float("nan"),
        "fact_recall": facts_hit / facts_n if facts_n else float("nan"),
        "citation_precision": cited_ok / cited_n if cited_n else float("nan"),
        "abstention": abstained / unanswerable if unanswerable else float("nan"),
        "false_refusals": false_refusals / answerable if answerable else float("nan"),
        "unsupported_claim_rate": unsupported / claims if claims else 0.0,
        "invented_rate": invented / n,
        "seconds_per_answer": seconds / n,
        "detail_questions": facts_n,
        "unanswerable_questions": unanswerable,
        "answers": len(answers),
    }


# --- BEIR ----------------------------------------------------------------------------------------


def load_beir(folder: Path, split: str = "test") -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """(queries by id, qrels: query id -> {doc id: relevance}) for one split."""
    qrels_file = folder / "qrels" / f"{split}.tsv"
    if not qrels_file.is_file():
        raise CorpusError(f"{qrels_file} not found: point --beir at a BEIR dataset folder (with qrels/{split}.tsv)")
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate(qrels_file.read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.strip().split("\t")
        if number == 1 and parts[0] == "query-id" or len(parts) < 3:
            continue
        qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    queries = {str(r["_id"]): str(r["text"]) for r in read_jsonl(folder / "queries.jsonl", "queries")}
    return {qid: queries[qid] for qid in qrels if qid in queries}, qrels


def ndcg_at_k(ranked: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    """nDCG@k as pytrec_eval / BEIR compute it (linear gain, log2 discount)."""
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(rel / math.log2(i + 2) for i, rel in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], relevant: dict[str, int], k: int = 100) -> float:
    positives = {d for d, r in relevant.items() if r > 0}
    return len(positives & set(ranked[:k])) / len(positives) if positives else 0.0


def beir_metrics(
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    search: Callable[[list[str]], list[list[str]]],
) -> dict[str, float]:
    ids = list(queries)
    rankings = search([queries[q] for q in ids])
    ndcg = [ndcg_at_k(r, qrels[q]) for q, r in zip(ids, rankings, strict=True)]
    recall = [recall_at_k(r, qrels[q]) for q, r in zip(ids, rankings, strict=True)]
    return {"ndcg@10": sum(ndcg) / len(ndcg), "recall@100": sum(recall) / len(recall), "queries": len(ids)}
