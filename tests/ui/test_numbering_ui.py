"""The web chat and its sources panel show an answer's consecutive numbers (rag/answers/numbering.py): the
streamed text, the final message with its clickable [n] links, the cards they open and the claims agree."""

from __future__ import annotations

import html
import re

import pytest

from rag.corpus.chunking import split_sentences
from ui.web import callbacks
from ui.web.callbacks import ChatSession

QUESTION = "state space models for client selection in federated learning"


@pytest.fixture(autouse=True)
def every_update(monkeypatch):
    monkeypatch.setattr(callbacks, "STREAM_INTERVAL", 0.0)


def _claim(hit, marker: int) -> str:
    start, end = split_sentences(hit.abstract)[0]
    return f"{hit.abstract[start:end].rstrip('.')} [{marker}]."


def test_chat_message_links_and_cards_use_the_consecutive_numbers(make_components, llm_server):
    components = make_components(llm_base_url=llm_server.base_url)
    settings = components.session_defaults()
    hits = components.pipeline_for(settings).retriever.search(QUESTION, settings.top_k)
    assert len(hits) >= 3
    llm_server.reply = f"{_claim(hits[2], 3)} {_claim(hits[0], 1)}"  # the writer skips source 2
    llm_server.chunk_size = 6
    session = ChatSession()
    partials = [s.messages[-1]["content"] for s in callbacks.respond(components, QUESTION, session, settings)]

    message, panel = session.messages[-1]["content"], session.panel
    body = message.split("**Sources**")[0]
    assert re.findall(r"\[\[(\d+)\]\]\(#pc-source-(\d+)\)", body) == [("1", "1"), ("2", "2")]
    assert "[3]" not in body
    sources = message.split("**Sources**")[1]
    assert sources.index(hits[2].title) < sources.index(hits[0].title)  # [1] is the paper cited first
    for number, hit in ((1, hits[2]), (2, hits[0])):
        card = panel.split(f'id="pc-source-{number}"')[1].split('id="pc-source-')[0]
        assert f'<span class="pc-marker">[{number}]</span> {html.escape(hit.title)}' in card
        assert f'→ [{number}] {html.escape(hit.title)}</span>' in panel  # the claim's verdict names it
    # While it streamed, the first cited source was [1] already.
    assert any(f"{_claim(hits[2], 1)[:-1]}" in p for p in partials[:-1])
    assert session.history[-1].papers == (hits[2].paper_id, hits[0].paper_id)
