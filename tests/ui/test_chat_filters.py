"""The chat's filter box ("Only papers where"): the answer is searched among the papers that pass; a bad filter is
said next to the box, naming the field, and nothing is asked. Plain callbacks over a tiny index, no browser."""

from __future__ import annotations

import pytest

from rag.components import SessionSettings
from ui.web import callbacks
from ui.web.callbacks import ChatSession

QUESTION = "Which papers use state space models for client selection?"
EXTRACTIVE = SessionSettings(extractive=True)


def ask(components, where: str, session: ChatSession | None = None) -> ChatSession:
    session = session or ChatSession()
    for _ in callbacks.respond(components, QUESTION, session, EXTRACTIVE, where):
        pass
    return session


def test_the_answer_comes_from_the_papers_that_pass(make_components):
    components = make_components()
    everything = ask(components, "")
    assert "FedSSM" in everything.panel
    narrowed = ask(components, " source=002_735305cd7294d037.txt ; title~rag ")
    assert narrowed.notice == "" and len(narrowed.history) == 2
    assert "MA-RAG" in narrowed.panel and "FedSSM" not in narrowed.panel
    # The panel says the answer came from part of the papers, and which part; without filters it says nothing.
    assert "only papers where source=002_735305cd7294d037.txt; title~rag" in narrowed.panel
    assert "only papers where" not in everything.panel


@pytest.mark.parametrize(("where", "says"), [
    ("yeer>=2024", "Unknown filter field 'yeer' in 'yeer>=2024': use one of year, venue, author, source, title; "
                   "e.g. year>=2024 or author~Bengio"),
    ("year~20", "Filter 'year~20': the field 'year' takes a year and one of = != < <= > >=, e.g. year>=2024"),
    ("source=nope.txt", "No paper in the index comes from 'nope.txt'; its files: "),
    ("year>=2030", "No paper of the 6 in the index passes year>=2030"),
    # Commas for semicolons read as one title filter; it said only "No paper passes", with no hint.
    ("title~rag,year=2026", "No paper of the 6 in the index passes title~rag,year=2026: separate filters with ';', "
                            "not ',' (e.g. title~rag; year=2026)"),
])
def test_a_bad_filter_is_said_next_to_the_box_and_nothing_is_asked(make_components, where, says):
    components = make_components()
    session = ask(components, where)
    assert session.notice.startswith(says) and "\n" not in session.notice
    assert session.messages == [] and session.history == [] and not session.answering
    assert ask(components, "", session).notice == ""  # cleared once the box is fixed
