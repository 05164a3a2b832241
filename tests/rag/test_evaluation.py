"""Answer metrics: what counts as cited, refused and invented."""

from __future__ import annotations

from rag.evaluation import DevQuestion, answer_metrics
from rag.types import Answer, Citation, Hit

ABSTRACT = "We present NRDE, a noise-robust density estimator for tabular anomaly detection, 12% better on ADBench."


def _hit() -> Hit:
    return Hit(rank=1, paper_id="002.txt#3", title="NRDE", score=1.0, source="002_735305cd7294d037.txt", ordinal=3,
               text=ABSTRACT, abstract=ABSTRACT, venue="ICML 2026")


def _answer(text: str, *, refused: bool = False, cited: bool = True) -> Answer:
    hit = _hit()
    citations = [Citation(marker=1, paper_id=hit.paper_id, title=hit.title, source=hit.source, ordinal=3,
                          claim=text)] if cited else []
    return Answer(question="q", answer=text, sources=[hit], citations=citations, refused=refused)


def test_a_refusal_naming_the_nearest_papers_by_place_invents_nothing():
    refusal = _answer(f"The abstracts do not answer this. The nearest papers: NRDE ({_hit().label}).",
                      refused=True, cited=False)
    assert "2026" in refusal.answer and "002" in refusal.answer
    metrics = answer_metrics([DevQuestion("Any papers on watermarking?", "unanswerable", [])], [refusal])
    assert metrics["invented_rate"] == 0.0 and metrics["abstention"] == 1.0


def test_a_figure_no_source_gives_is_invented_and_gold_citations_count():
    gold = [("002_735305cd7294d037.txt", 3)]
    good = _answer("NRDE is 12% better on ADBench [1].")
    bad = _answer("NRDE is 31% better on ADBench [1].")
    questions = [DevQuestion("How much better is NRDE?", "detail", gold, facts=["12%"])] * 2
    metrics = answer_metrics(questions, [good, bad])
    assert metrics["invented_rate"] == 0.5
    assert metrics["citation_precision"] == 1.0 and metrics["fact_recall"] == 0.5
