"""What the API and the MCP server share (ui.api.answers), as plain functions over the tiny index."""

from __future__ import annotations

import asyncio

import pytest

from rag.errors import QueryError, ServerBusy, UnknownModel
from rag.types import Answer, Citation, Hit, Turn


def test_sources_block_round_trip():
    from ui.api.answers import sources_tail, split_sources
    from ui.shared.text import answer_text

    answer = Answer(question="q", answer="FedSSM does it [1], and CausalAno too [2].", citations=[
        Citation(1, "a#1", "FedSSM", "000.txt", 1), Citation(2, "b", "Causal — Ano", "extra.jsonl", 4, weak=True)])
    text = answer_text(answer)
    assert text == ("FedSSM does it [1], and CausalAno too [2].\n\nSources:\n[1] FedSSM — #1 of 000.txt\n"
                    "[2] Causal — Ano — #4 of extra.jsonl (weakly supported)")
    assert split_sources(text) == (answer.answer, [("000.txt", 1), ("extra.jsonl", 4)])
    assert text == answer.answer + sources_tail(answer)
    refused = Answer(question="q", answer="Not covered.", sources=[Hit(1, "x", "X", 0.1, "f.txt", 2, "t")])
    assert split_sources(answer_text(refused)) == ("Not covered.", [])  # nearest papers were not cited
    assert split_sources("plain text") == ("plain text", [])


def test_a_stream_the_check_changed_ends_with_the_checked_answer_its_sources_number():
    from ui.api.answers import split_sources, stream_end
    from ui.shared.text import answer_text

    answer = Answer(question="q", answer="FedSSM does it [1].", citations=[Citation(1, "a#1", "FedSSM", "000.txt", 1)])
    assert stream_end(answer, "FedSSM does it [1].") == answer_text(answer)[len(answer.answer):]
    assert stream_end(answer, "FedSSM  does it [1]. ") == answer_text(answer)[len(answer.answer):]  # spaces only
    # The writer's text streamed as "[2]"; the check re-cited it: the checked text comes before its sources.
    message = "FedSSM does it [2]." + stream_end(answer, "FedSSM does it [2].")
    assert message == "FedSSM does it [2].\n\nChecked answer:\n" + answer_text(answer)
    assert split_sources(message) == ("FedSSM does it [1].", [("000.txt", 1)])  # read back: the checked text


def test_citation_fields_forward_what_to_dict_gives(monkeypatch):
    from ui.api.answers import citation_fields

    answer = Answer(question="q", answer="A [1].", citations=[Citation(1, "a", "A", "f.txt", 1, evidence="e")])
    fields = citation_fields(answer)
    assert fields["citations"] == [answer.citations[0].to_dict()] and fields["claims"] == []
    assert "answer" not in fields["paperchat"] and fields["paperchat"]["question"] == "q"
    # Per-claim verdicts, whatever their fields, are passed through as Answer.to_dict gives them.
    original = Answer.to_dict
    monkeypatch.setattr(Answer, "to_dict", lambda self: {**original(self), "claims": [{"supported": True, "x": 1}]})
    assert citation_fields(answer)["claims"] == [{"supported": True, "x": 1}]


def test_conversation_reads_turns_and_cited_papers(make_components):
    from ui.api.answers import conversation

    components = make_components(llm="extractive")
    question, history = conversation(components, [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "which papers"}, {"type": "text", "text": "on FL?"}]},
        {"role": "assistant", "content": "FedSSM [1].\n\nSources:\n[1] FedSSM — 000_dcbf1b5d2daaeff5.txt #1\n"
                                         "[2] Unknown — nowhere.txt #9"},
        {"role": "user", "content": "  and the first one?  "},
    ])
    assert question == "and the first one?"
    assert history == [Turn("user", "which papers\non FL?"),
                       Turn("assistant", "FedSSM [1].", ("000_dcbf1b5d2daaeff5.txt#1",))]
    # As this server writes it now: the readable label ("file 000"), read back to the same paper.
    _, history = conversation(components, [
        {"role": "user", "content": "which papers on FL?"},
        {"role": "assistant", "content": "FedSSM [1].\n\nSources:\n[1] FedSSM — ICML 2026 · #1 of file 000\n"
                                         "[2] MA — RAG — ICML 2026 · #1 of file 002 (weakly supported)\n"
                                         "[3] Unknown — #9 of nowhere.txt"},
        {"role": "user", "content": "and the second one?"},
    ])
    assert history[-1] == Turn("assistant", "FedSSM [1].", ("000_dcbf1b5d2daaeff5.txt#1", "002_735305cd7294d037.txt#1"))


@pytest.mark.parametrize("messages", [None, [], "hi", [1], [{"role": "user"}], [{"role": "user", "content": 3}],
                                      [{"role": "bot", "content": "x"}], [{"role": "user", "content": "a"},
                                                                          {"role": "assistant", "content": "b"}]])
def test_conversation_rejects_bad_messages_in_one_line(make_components, messages):
    from ui.api.answers import conversation

    with pytest.raises(QueryError) as caught:
        conversation(make_components(llm="extractive"), messages)
    assert "\n" not in str(caught.value)


def test_history_of_the_ask_tool_keeps_given_paper_ids(make_components):
    from ui.api.answers import history_from

    components = make_components(llm="extractive")
    history = history_from(components, [{"role": "user", "content": "q"},
                                      {"role": "assistant", "content": "A [1].", "papers": ["probe-xss"]}])
    assert history[1] == Turn("assistant", "A [1].", ("probe-xss",))
    assert history[1].to_dict() == {"role": "assistant", "content": "A [1].", "papers": ["probe-xss"]}
    assert history_from(components, None) == []
    with pytest.raises(QueryError):
        history_from(components, "not a list")


def test_pipeline_for_models(make_components, llm_server):
    from ui.api.answers import pipeline_for

    components = make_components(llm_base_url=llm_server.base_url)
    default = pipeline_for(components, "paperchat")
    assert default.chat_model is not None
    assert pipeline_for(components, "paperchat-extractive").chat_model is None
    shorter = pipeline_for(components, "paperchat", max_tokens=50)
    assert shorter.config.max_tokens == 50 and shorter.chat_model is default.chat_model
    longest = pipeline_for(components, "paperchat", max_tokens=10**6)
    assert longest.config.max_tokens == components.settings.llm_max_tokens
    with pytest.raises(UnknownModel, match="paperchat, paperchat-extractive"):
        pipeline_for(components, "gpt-4o")


def test_gate_lets_some_wait_and_turns_the_rest_away():
    from ui.api.answers import AnswerGate

    async def scenario():
        gate = AnswerGate(concurrent=1, waiting=1)
        await gate.acquire()
        waiter = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        assert gate.waiting == 1
        with pytest.raises(ServerBusy, match="retry"):
            await gate.acquire()
        gate.release()
        await waiter
        gate.release()
        async with gate.turn():
            assert gate._slots.locked()
        assert not gate._slots.locked()

    asyncio.run(scenario())


def test_answer_text_names_papers_by_their_readable_place_never_the_hashed_file_name():
    from ui.shared.text import answer_text

    hit = Hit(1, "002_735305cd7294d037.txt#5", "PRM-BiasBench", 0.9, "002_735305cd7294d037.txt", 5, "t",
              venue="ICML 2026")
    mine = Hit(2, "mine", "Adam", 0.8, "papers.jsonl", 3, "t", collection="mypapers")
    cited = Answer(question="q", answer="It measures bias [1].", sources=[hit, mine],
                   citations=[Citation(1, hit.paper_id, hit.title, hit.source, hit.ordinal)])
    text = answer_text(cited)
    assert text.endswith("Sources:\n[1] PRM-BiasBench — ICML 2026 · #5 of file 002")
    assert ".txt #" not in text and "735305cd" not in text
    refused = Answer(question="q", answer="Not covered.", sources=[hit, mine], refused=True)
    assert answer_text(refused).endswith("Nearest papers:\n- PRM-BiasBench — ICML 2026 · #5 of file 002\n"
                                         "- Adam — mypapers · #3 of papers.jsonl")
