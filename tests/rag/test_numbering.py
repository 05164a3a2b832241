"""Consecutive source numbers (rag/answers/numbering.py): whatever a writer cites, the final answer's markers are
1..m in the order of first citation, and the text, citations, claims, checks and sources agree."""

from __future__ import annotations

from rag.answers.citations import ClaimCheck, find_markers
from rag.answers.numbering import StreamNumbers, consecutive, renumber_text
from rag.answers.pipeline import AnswerPipeline, FinalEvent, PipelineConfig, TextEvent
from rag.corpus.chunking import split_sentences
from rag.types import Answer, Citation, ClaimVerdict, Hit
from tests.conftest import FakeChatModel

QUESTION = "Which papers are about federated learning?"


def _markers(text: str) -> list[int]:
    return [n for m in find_markers(text) for n in m.numbers]


def _first_order(text: str) -> list[int]:
    return list(dict.fromkeys(_markers(text)))


def _hit(rank: int) -> Hit:
    return Hit(rank=rank, paper_id=f"p{rank}", title=f"Paper {rank}", score=1.0 / rank, source="000.txt",
               ordinal=rank, text=f"abstract {rank}")


def _citation(marker: int) -> Citation:
    return Citation(marker=marker, paper_id=f"p{marker}", title=f"Paper {marker}", source="000.txt", ordinal=marker)


def _verdict(text: str, markers: tuple[int, ...]) -> ClaimVerdict:
    return ClaimVerdict(text=text, cited=markers, markers=markers, paper_id=f"p{markers[0]}", title="",
                        evidence="", support=0.9, supported=True)


def test_citing_1_and_4_of_5_becomes_1_and_2_with_the_sources_reordered():
    answer = Answer(
        question="q", answer="A does this [4]. B does that [1]. A again [4].", sources=[_hit(i) for i in range(1, 6)],
        citations=[_citation(4), _citation(1)],
        claims=[_verdict("A does this", (4,)), _verdict("B does that", (1,)), _verdict("A again", (4,))],
        checks=[ClaimCheck("A does this", 4, "p4", "e", 0, 1, 0.9, False),
                ClaimCheck("B does that", 1, "p1", "e", 0, 1, 0.9, False)],
    )
    numbers = consecutive(answer)
    assert numbers == {4: 1, 1: 2, 2: 3, 3: 4, 5: 5}
    assert answer.answer == "A does this [1]. B does that [2]. A again [1]."  # cited twice: one number
    assert [h.paper_id for h in answer.sources] == ["p4", "p1", "p2", "p3", "p5"]  # cited first, then the rest
    assert [h.rank for h in answer.sources] == [1, 2, 3, 4, 5]
    assert [(c.marker, c.paper_id) for c in answer.citations] == [(1, "p4"), (2, "p1")]
    assert [(c.markers, c.cited, c.paper_id) for c in answer.claims] == [((1,), (1,), "p4"), ((2,), (2,), "p1"),
                                                                       ((1,), (1,), "p4")]
    assert [(c.marker, c.paper_id) for c in answer.checks] == [(1, "p4"), (2, "p1")]
    # Every number names the same paper everywhere: sources[n - 1] is the paper marker n cites.
    assert all(answer.sources[c.marker - 1].paper_id == c.paper_id for c in answer.citations)
    assert consecutive(answer) == {n: n for n in range(1, 6)}  # numbered once: nothing changes again


def test_a_marker_of_several_numbers_is_mapped_and_sorted():
    assert renumber_text("Both [5, 2] and [2-3].", {5: 1, 2: 2, 3: 3}) == "Both [1, 2] and [2, 3]."
    assert renumber_text("no markers, 2024 [2024]", {1: 2}) == "no markers, 2024 [2024]"


def test_stream_numbers_follow_first_citation_across_pieces():
    numbers = StreamNumbers()
    assert numbers.apply("X [3].") == "X [1]."
    assert numbers.apply(" Y [1] and X [3].") == " Y [2] and X [1]."


def _pipeline(retriever, model=None):
    return AnswerPipeline(retriever, retriever.embedder, model, config=PipelineConfig(min_relevance=0.0))


def _supported_claim(hit: Hit, marker: int) -> str:
    """The hit's first sentence, cited as ``marker``: attribution keeps it where it is."""
    start, end = split_sentences(hit.abstract)[0]
    return f"{hit.abstract[start:end].rstrip('.')} [{marker}]."


def test_a_writer_citing_1_and_4_of_5_sources_ends_as_1_and_2(fake_retriever):
    question = "How do federated learning methods treat clients?"  # one answer, not a list of the papers
    hits = fake_retriever.search(question, 5)
    reply = f"{_supported_claim(hits[3], 4)} {_supported_claim(hits[0], 1)} {_supported_claim(hits[3], 4)}"
    events = list(_pipeline(fake_retriever, FakeChatModel(reply, chunk_size=5)).stream(question))
    final = events[-1].answer
    assert isinstance(events[-1], FinalEvent)
    assert _first_order(final.answer) == [1, 2] and _markers(final.answer) == [1, 2, 1]
    assert [c.marker for c in final.citations] == [1, 2]
    assert [c.paper_id for c in final.citations] == [hits[3].paper_id, hits[0].paper_id]
    assert [h.paper_id for h in final.sources[:2]] == [hits[3].paper_id, hits[0].paper_id]
    assert {h.paper_id for h in final.sources} == {h.paper_id for h in hits}  # nothing lost, only reordered
    assert [n for c in final.claims for n in c.markers] == [1, 2, 1]
    # What streamed carries the same numbers as the final answer.
    streamed = "".join(e.content for e in events if isinstance(e, TextEvent))
    assert streamed.strip() == final.answer


def test_an_extractive_multi_paper_answer_on_bundled_papers_numbers_consecutively(fake_retriever):
    ranked = [h.title for h in fake_retriever.search(QUESTION, 10)]
    answer = _pipeline(fake_retriever).answer(QUESTION)
    cited = [c.title for c in answer.citations]
    assert len(cited) >= 2 and ranked.index(cited[-1]) + 1 > len(cited)  # the writer skipped a retrieved paper
    assert _first_order(answer.answer) == list(range(1, len(cited) + 1))
    assert [h.title for h in answer.sources[: len(cited)]] == cited
    assert [h.rank for h in answer.sources] == list(range(1, len(answer.sources) + 1))


def test_an_extractive_answer_over_a_real_index_numbers_consecutively(fake_index):
    answer = _pipeline(fake_index).answer(QUESTION)
    assert answer.citations
    assert _first_order(answer.answer) == list(range(1, len(answer.citations) + 1))
    assert all(answer.sources[c.marker - 1].paper_id == c.paper_id for c in answer.citations)
