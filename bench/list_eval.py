#!/usr/bin/env python3
"""Score paperchat answers to corpus-wide "list" questions against gold paper sets.

Usage:
    paperchat ask --batch data/eval/lists.jsonl --json [--extractive] > ANSWERS.jsonl
    python bench/list_eval.py data/eval/lists.jsonl ANSWERS.jsonl [--json]

QUESTIONS: one JSON object per line, dev2 "multi" format plus gold_count:
    {"id", "type", "question", "gold": [{"file", "ordinal"}, ...], "facts", "gold_count"}
ANSWERS: the output of `paperchat ask --batch QUESTIONS.jsonl --json [--extractive]`, one JSON object per
line in the same order (rows are matched by "id" when both sides carry one, else by position).

Per question:
  * cited    = the papers the answer CITES: its "citations" (each has source = file name, ordinal; a citation
               without them is resolved through its paper_id in "sources"). Papers that were only
               retrieved ("sources") are not cited; they give the diagnostic column R@src.
  * recall   = |cited & gold| / |gold|
  * precision= |cited & gold| / |cited|   (0 when the answer cites nothing)
  * stated   = the count stated in the answer text: the first integer (citation markers such as [3] and
               decimals such as 2.5 are skipped) or number word zero..twenty, whichever comes first;
               none found = miss
               (place labels like "#1 of file 002" and years like 2026 are skipped too)
  * within1  = stated is not None and |stated - gold_count| <= 1
  * phrased  = stricter diagnostic: the first number directly followed (within two words) by
               "paper(s)"/"work(s)"/"studies"/"abstracts", so that numbers quoted from abstracts do not count
Macro averages: recall, precision, F1, R@src; count-within-one over the "how many" questions (question
text contains "how many") and over all questions (every question has gold_count).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

NUMBER_WORDS = {
    w: i for i, w in enumerate([
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
        "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
    ])
}
_MARKERS = re.compile(r"\[\s*\d+(?:\s*[,;\-–]\s*\d+)*\s*\]")  # [1], [1, 2], [3-5]
# not counts either: place labels ("ICML 2026 · #1 of file 002") and years
_PLACES = re.compile(r"#\d+\s+of\s+file\s+\S+|\b(?:19|20)\d\d\b")
_PAPER_NOUN = re.compile(r"^\W*(?:\w+\W+){0,2}?(?:papers?|works?|studies|abstracts?|articles?)\b", re.IGNORECASE)
_NUMBER = re.compile(
    r"(?<![\w.])(\d+)(?![\w]|\.\d)|\b(" + "|".join(NUMBER_WORDS) + r")\b",
    re.IGNORECASE,
)


def read_jsonl(path: str) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                sys.exit(f"{path}:{n}: not JSON ({exc})")
    return rows


def key(source: str, ordinal) -> tuple[str, int]:
    return (os.path.basename(str(source)), int(ordinal))


def short(k: tuple[str, int]) -> str:
    return f"{k[0][:3]}#{k[1]}"


def stated_count(text: str) -> tuple[int | None, str]:
    """The first count stated in ``text`` (integer or number word), and the words around it."""
    m, clean = _first_number(text)
    if not m:
        return None, ""
    snippet = clean[max(0, m.start() - 20): m.end() + 25].replace("\n", " ").strip()
    return _value(m), snippet


def _first_number(text: str, start: int = 0):
    clean = _PLACES.sub(" ", _MARKERS.sub(" ", text or ""))
    return _NUMBER.search(clean, start), clean


def _value(m) -> int:
    return int(m.group(1)) if m.group(1) is not None else NUMBER_WORDS[m.group(2).lower()]


def phrased_count(text: str) -> int | None:
    """Stricter diagnostic: the first number followed within two words by 'paper(s)'/'works'/'studies'
    ("3 papers", "two relevant papers"); numbers quoted from abstracts ("three-tiered") do not count."""
    m, clean = _first_number(text)
    while m:
        if _PAPER_NOUN.match(clean[m.end():]):
            return _value(m)
        m = _NUMBER.search(clean, m.end())
    return None


def cited_papers(answer: dict) -> tuple[list[tuple[str, int]], dict]:
    """Distinct cited papers in order of first citation, and a key -> title map (cited and retrieved)."""
    by_id = {}
    titles = {}
    for s in answer.get("sources") or []:
        if s.get("source") is not None and s.get("ordinal") is not None:
            k = key(s["source"], s["ordinal"])
            titles[k] = s.get("title", "")
            if s.get("paper_id"):
                by_id[s["paper_id"]] = k
    cited = []
    for c in answer.get("citations") or []:
        if c.get("source") is not None and c.get("ordinal") is not None:
            k = key(c["source"], c["ordinal"])
        elif c.get("paper_id") in by_id:
            k = by_id[c["paper_id"]]
        else:
            continue
        titles.setdefault(k, c.get("title", ""))
        if k not in cited:
            cited.append(k)
    return cited, titles


def retrieved_papers(answer: dict) -> set[tuple[str, int]]:
    return {key(s["source"], s["ordinal"]) for s in answer.get("sources") or []
            if s.get("source") is not None and s.get("ordinal") is not None}


def pair_rows(questions: list[dict], answers: list[dict]) -> list[tuple[dict, dict | None]]:
    ans_ids = [a.get("id") for a in answers]
    if all(q.get("id") for q in questions) and all(ans_ids) and len(set(ans_ids)) == len(ans_ids):
        by_id = {a["id"]: a for a in answers}
        return [(q, by_id.get(q["id"])) for q in questions]
    if len(answers) != len(questions):
        print(f"warning: {len(questions)} questions but {len(answers)} answers; pairing by position",
              file=sys.stderr)
    return [(q, answers[i] if i < len(answers) else None) for i, q in enumerate(questions)]


def score(questions: list[dict], answers: list[dict]) -> dict:
    rows = []
    for q, a in pair_rows(questions, answers):
        gold = [key(g["file"], g["ordinal"]) for g in q.get("gold") or []]
        gold_set = set(gold)
        gold_count = q.get("gold_count")
        a = a or {}
        cited, titles = cited_papers(a)
        cited_set = set(cited)
        hits = cited_set & gold_set
        recall = len(hits) / len(gold_set) if gold_set else None
        precision = len(hits) / len(cited_set) if cited_set else 0.0
        f1 = (2 * precision * recall / (precision + recall)) if recall and precision else 0.0
        retrieved = retrieved_papers(a)
        r_src = len(retrieved & gold_set) / len(gold_set) if gold_set else None
        stated, snippet = stated_count(a.get("answer", ""))
        phrased = phrased_count(a.get("answer", ""))
        within1 = phrased1 = None
        if gold_count is not None:
            within1 = stated is not None and abs(stated - int(gold_count)) <= 1
            phrased1 = phrased is not None and abs(phrased - int(gold_count)) <= 1
        rows.append({
            "id": q.get("id"),
            "question": q.get("question"),
            "how_many": "how many" in (q.get("question") or "").lower(),
            "answered": bool(a),
            "refused": bool(a.get("refused")),
            "gold_count": gold_count,
            "n_cited": len(cited_set),
            "n_hits": len(hits),
            "recall": recall,
            "precision": precision,
            "f1": f1,
            "recall_sources": r_src,
            "stated_count": stated,
            "count_snippet": snippet,
            "count_within_one": within1,
            "phrased_count": phrased,
            "phrased_within_one": phrased1,
            "count_exact": (stated == gold_count) if gold_count is not None else None,
            "wrong": [{"paper": short(k), "file": k[0], "ordinal": k[1], "title": titles.get(k, "")}
                      for k in cited if k not in gold_set],
            "missed": [{"paper": short(k), "file": k[0], "ordinal": k[1], "title": titles.get(k, ""),
                        "retrieved": k in retrieved} for k in gold if k not in cited_set],
        })

    def mean(vals):
        vals = [v for v in vals if v is not None]
        return sum(vals) / len(vals) if vals else None

    how = [r for r in rows if r["how_many"]]
    counted = [r for r in rows if r["count_within_one"] is not None]
    macro = {
        "questions": len(rows),
        "recall": mean(r["recall"] for r in rows),
        "precision": mean(r["precision"] for r in rows),
        "precision_citing": mean(r["precision"] for r in rows if r["n_cited"]),
        "recall_citing": mean(r["recall"] for r in rows if r["n_cited"]),
        "f1": mean(r["f1"] for r in rows),
        "recall_sources": mean(r["recall_sources"] for r in rows),
        "mean_cited": mean(r["n_cited"] for r in rows),
        "mean_gold": mean(r["gold_count"] for r in rows),
        "no_citation": sum(1 for r in rows if r["n_cited"] == 0),
        "how_many_questions": len(how),
        "count_within_one_how_many": mean(float(r["count_within_one"]) for r in how
                                          if r["count_within_one"] is not None),
        "count_within_one_all": mean(float(r["count_within_one"]) for r in counted),
        "count_exact_all": mean(float(r["count_exact"]) for r in counted),
        "count_stated_all": mean(float(r["stated_count"] is not None) for r in counted),
        "phrased_within_one_how_many": mean(float(r["phrased_within_one"]) for r in how
                                            if r["phrased_within_one"] is not None),
        "phrased_within_one_all": mean(float(r["phrased_within_one"]) for r in counted),
        "refused": sum(1 for r in rows if r["refused"]),
    }
    return {"macro": macro, "per_question": rows}


def fmt(v, width=5):
    if v is None:
        return "-".rjust(width)
    if isinstance(v, bool):
        return ("yes" if v else "no").rjust(width)
    if isinstance(v, float):
        return f"{v:.2f}".rjust(width)
    return str(v).rjust(width)


def print_table(result: dict) -> None:
    head = (f"{'id':6} {'HM':>2} {'gold':>4} {'cit':>4} {'hit':>4} {'R':>5} {'P':>5} {'R@src':>5} {'said':>5} "
            f"{'±1':>5}  wrong / missed")
    print(head)
    print("-" * len(head))
    for r in result["per_question"]:
        wrong = " ".join(w["paper"] for w in r["wrong"])
        missed = " ".join(m["paper"] + ("" if m["retrieved"] else "*") for m in r["missed"])
        flag = "H" if r["how_many"] else ""
        print(f"{r['id']:6} {flag:>2} {fmt(r['gold_count'], 4)} {fmt(r['n_cited'], 4)} "
              f"{fmt(r['n_hits'], 4)} {fmt(r['recall'])} {fmt(r['precision'])} {fmt(r['recall_sources'])} "
              f"{fmt(r['stated_count'])} {fmt(r['count_within_one'])}  "
              f"+[{wrong}] -[{missed}]")
    m = result["macro"]
    print()
    print("(* = missed paper not even among the retrieved sources; HM = 'how many' question)")
    print(f"questions {m['questions']}  ('how many': {m['how_many_questions']})  answers citing nothing: "
          f"{m['no_citation']}  (refused: {m['refused']})")
    print(f"macro recall    {fmt(m['recall'])}")
    print(f"macro precision {fmt(m['precision'])}")
    print(f"macro F1        {fmt(m['f1'])}")
    print(f"  over answers citing something: recall {fmt(m['recall_citing'])}, precision {fmt(m['precision_citing'])}")
    print(f"macro R@sources {fmt(m['recall_sources'])}   (gold among retrieved sources; diagnostic)")
    print(f"mean cited {fmt(m['mean_cited'])} vs mean gold {fmt(m['mean_gold'])}")
    print(f"count within one: 'how many' questions {fmt(m['count_within_one_how_many'])}, "
          f"all questions {fmt(m['count_within_one_all'])}  (exact, all: {fmt(m['count_exact_all'])}; "
          f"a count stated at all: {fmt(m['count_stated_all'])})")
    print(f"  stricter, count phrased as 'N papers': 'how many' {fmt(m['phrased_within_one_how_many'])}, "
          f"all {fmt(m['phrased_within_one_all'])}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("questions")
    ap.add_argument("answers")
    ap.add_argument("--json", action="store_true", help="print machine-readable JSON")
    args = ap.parse_args(argv)
    result = score(read_jsonl(args.questions), read_jsonl(args.answers))
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
