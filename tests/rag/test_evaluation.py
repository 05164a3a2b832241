"""Answer metrics: what counts as cited, refused and invented; the evaluation file and what is wrong with a bad one."""

from __future__ import annotations

import json

import pytest

from rag.errors import CorpusError
from rag.evaluation import DevQuestion, answer_metrics, load_dev
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


@pytest.mark.parametrize(("record", "says"), [
    ({"question": "q", "gold": [{"paper_id": "002_x.txt#19"}]},
     "line 3: gold entry 1 ({\"paper_id\": \"002_x.txt#19\"}) has no 'file': write each gold paper as {\"file\":"),
    ({"question": "q", "gold": "notalist"}, "line 3: 'gold' is \"notalist\", not a list of papers like [{\"file\":"),
    ({"question": "q", "gold": [{"file": "a.txt", "ordinal": "x"}]},
     "line 3: gold entry 1 has 'ordinal' \"x\", not the paper's number in its file"),
    ({"question": "q", "gold": [{"file": "a.txt", "ordinal": 1}], "facts": "12%"}, "line 3: 'facts' is \"12%\""),
    ({"gold": []}, "line 3: no 'question' string; write {\"question\""),
])
def test_a_bad_evaluation_record_is_an_error_naming_its_line_field_and_format(tmp_path, record, says):
    path = tmp_path / "questions.jsonl"
    path.write_text('{"question": "fine", "gold": [{"file": "a.txt", "ordinal": "2"}]}\n\n' + json.dumps(record) + "\n")
    with pytest.raises(CorpusError) as caught:
        load_dev(path)
    assert f"{path}: {says}" in str(caught.value) and "\n" not in str(caught.value)


def test_an_evaluation_file_without_questions_is_an_error(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(CorpusError, match=f"no questions in {path}"):
        load_dev(path)


def test_gold_ordinals_may_be_written_as_numbers_or_digit_strings(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text('{"question": "q", "gold": [{"file": "a.txt", "ordinal": 1}, {"file": "b.txt", "ordinal": "2"}]}\n')
    assert load_dev(path)[0].gold == [("a.txt", 1), ("b.txt", 2)]
