"""Exports: an answer as Markdown whose [n] resolve to its references, paper lists as CSV and BibTeX, and the
metadata filters. BibTeX is checked with a small strict parser (bibtexparser is not installed here)."""

from __future__ import annotations

import csv
import io
import re

import pytest
from markdown_it import MarkdownIt

from rag.errors import QueryError
from rag.exports.filters import FIELDS, keep, parse_filter, parse_filters
from rag.exports.markdown import answer_markdown
from rag.exports.papers import CSV_COLUMNS, citation_key, papers_bibtex, papers_csv
from rag.types import Answer, Citation, Hit, Paper

ADAM = Paper("adam", "Adam: A Method for Stochastic Optimization", "We introduce Adam, an algorithm for {first-order} "
             "optimization; 100% of runs & more_stuff #1 cost $5 ~ ^ \\ weird.", "papers.jsonl", 1,
             authors=("Diederik P. Kingma", "Jimmy Ba"), urls=("https://arxiv.org/abs/1412.6980",), venue="ICLR",
             year=2015)
GAN = Paper("gan", "Generative Adversarial Nets", "A generative model trained against a discriminator.",
            "papers.jsonl", 2, authors=("Ian Goodfellow",), venue="NeurIPS", year=2014)
PLAIN = Paper("000.txt#3", "FedSSM", "Federated learning with state space models.", "000.txt", 3)
SECOND_ADAM = Paper("adam2", "Adam revisited", "Adam again.", "papers.jsonl", 3, authors=("D. Kingma",), year=2015)


def parse_bibtex(text: str) -> list[tuple[str, str, dict[str, str]]]:
    """A strict BibTeX reader: ``@type{key,`` then ``name = {value}`` fields with balanced braces (``\\{`` and
    ``\\}`` do not count), ``}`` closing each entry; anything else fails."""
    entries, pos = [], 0
    head = re.compile(r"\s*@([a-z]+)\{([A-Za-z][A-Za-z0-9_:-]*),")
    field = re.compile(r"\s*([a-z]+)\s*=\s*\{")
    while text[pos:].strip():
        match = head.match(text, pos)
        assert match, f"no entry at {text[pos:pos + 40]!r}"
        kind, key, pos, fields = match.group(1), match.group(2), match.end(), {}
        while True:
            match = field.match(text, pos)
            assert match, f"no field at {text[pos:pos + 40]!r}"
            depth, i = 1, match.end()
            while depth:
                assert i < len(text), "unbalanced braces"
                if text[i] == "\\":
                    i += 2
                    continue
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            assert match.group(1) not in fields, "a field twice"
            fields[match.group(1)] = text[match.end():i - 1]
            pos = i
            separator = re.compile(r"\s*(,|\})").match(text, pos)
            assert separator, f"no , or }} at {text[pos:pos + 40]!r}"
            pos = separator.end()
            if separator.group(1) == "}":
                break
            if re.compile(r"\s*\}").match(text, pos):
                pos = re.compile(r"\s*\}").match(text, pos).end()
                break
        entries.append((kind, key, fields))
    return entries


def test_bibtex_parses_with_every_entry_its_metadata():
    entries = parse_bibtex(papers_bibtex([ADAM, GAN, PLAIN, SECOND_ADAM]))
    assert [(kind, key) for kind, key, _ in entries] == [
        ("inproceedings", "kingma2015adam"), ("inproceedings", "goodfellow2014generative"), ("misc", "fedssm"),
        ("misc", "kingma2015adam-2")]
    adam = entries[0][2]
    assert adam["author"] == "Diederik P. Kingma and Jimmy Ba" and adam["year"] == "2015"
    assert adam["booktitle"] == "ICLR" and adam["url"] == "https://arxiv.org/abs/1412.6980"
    assert adam["title"] == "{Adam: A Method for Stochastic Optimization}"  # braces keep its capitals
    # Bare special characters are escaped: nothing starts a comment or math; braces that pair up are LaTeX's.
    assert "{first-order}" in adam["abstract"] and r"100\% of runs \& more\_stuff \#1 cost \$5" in adam["abstract"]
    assert r"\textasciitilde{} \^{} \textbackslash{} weird." in adam["abstract"]
    assert "year" not in entries[2][2] and "author" not in entries[2][2]
    # Where to find it, in ASCII for classic BibTeX; a title read from the abstract is said to be one.
    notes = [fields["note"] for _, _, fields in entries]
    assert all(note.isascii() for note in notes)
    assert "title derived from the abstract" in notes[2]


def test_a_bibtex_note_gives_the_venue_without_a_middle_dot():
    fields = parse_bibtex(papers_bibtex([Paper("p", "T", "a", "000.txt", 1, venue="ICML 2026", title_given=True)]))
    assert fields[0][2]["note"] == r"ICML 2026, \#1 of 000.txt"  # a title given: nothing said of it


def test_a_citation_key_always_starts_with_a_letter():
    assert citation_key(Paper("x", "2024: a year", "a", "f.txt", 7, year=2024)) == "year2024"
    assert citation_key(Paper("x", "2024", "a", "f.txt", 7, year=2024)) == "paper72024"


def test_csv_parses_back_to_the_papers():
    rows = list(csv.DictReader(io.StringIO(papers_csv([ADAM, PLAIN], collection="mine"))))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert rows[0]["authors"] == "Diederik P. Kingma; Jimmy Ba" and rows[0]["year"] == "2015"
    assert rows[0]["abstract"] == ADAM.abstract and rows[0]["url"] == ADAM.urls[0]
    assert rows[1]["year"] == "" and rows[1]["label"] == "mine · #3 of 000.txt"


def an_answer() -> Answer:
    hits = [Hit.of_paper(ADAM, rank=1, score=1.0), Hit.of_paper(GAN, rank=2, score=0.5),
            Hit.of_paper(PLAIN, rank=3, score=0.2)]
    return Answer(
        question="Which optimisers <b>adapt</b> step sizes?",
        answer="Adam adapts step sizes [1][3]. GANs train two nets [2]. Not a citation: [9]. <img src=x>",
        citations=[Citation(1, "adam", ADAM.title, ADAM.source, 1, evidence="We introduce *Adam*."),
                   Citation(3, "000.txt#3", "FedSSM", "000.txt", 3), Citation(2, "gan", GAN.title, GAN.source, 2)],
        sources=hits, backend="extractive (no LLM)")


def test_markdown_answer_links_each_marker_to_its_reference():
    text = answer_markdown(an_answer())
    html = MarkdownIt("commonmark").render(text)
    # Each cited [n] is a link to #ref-n, and #ref-n is the anchor of the n-th reference.
    assert re.findall(r'<a href="#ref-(\d+)">\[(\d+)\]</a>', html) == [("1", "1"), ("3", "3"), ("2", "2")]
    for n, title in ((1, "Adam: A Method for Stochastic Optimization"), (2, GAN.title), (3, "FedSSM")):
        assert re.search(rf'<a id="ref-{n}"></a>\[{n}\] <strong>{re.escape(title)}</strong>', html), n
    assert html.index('id="ref-1"') < html.index('id="ref-2"') < html.index('id="ref-3"')
    assert "[9]" in html and 'href="#ref-9"' not in html  # not a citation: left as it is
    assert "Diederik P. Kingma and Jimmy Ba · ICLR · 2015" in html
    assert '<a href="https://arxiv.org/abs/1412.6980">' in html
    # Untrusted text: no HTML from the question or the answer renders; Markdown in evidence is no markup: its
    # emphasis is dropped as the other views drop it (rag/plain_text.py), nothing in it renders.
    assert "<img" not in html and "<b>" not in html and "We introduce Adam." in html and "<em>Adam" not in html


@pytest.mark.parametrize(("text", "kept"), [
    ("year>=2015", ["adam", "adam2"]), ("year<2015", ["gan"]), ("year=2014", ["gan"]),
    ("year!=2014", ["adam", "adam2"]),
    ("venue~neur", ["gan"]), ("venue=iclr", ["adam"]), ("author~kingma", ["adam", "adam2"]),
    ("author=Jimmy Ba", ["adam"]), ("author!=Jimmy Ba", ["gan", "000.txt#3", "adam2"]),
    ("title~adam", ["adam", "adam2"]), ("source=000.txt", ["000.txt#3"]),
    (" title != fedssm ", ["adam", "gan", "adam2"]),
])
def test_filters_keep_the_papers_whose_field_matches(text, kept):
    papers = [ADAM, GAN, PLAIN, SECOND_ADAM]
    assert [p.paper_id for p in keep(papers, [parse_filter(text)])] == kept


def test_source_filter_takes_a_file_name_or_path():
    nested = Paper("n", "T", "a", "sub/mine.jsonl", 1)
    assert keep([nested, ADAM], parse_filters([], "mine.jsonl")) == [nested]
    assert keep([nested, ADAM], parse_filters([], "sub/mine.jsonl")) == [nested]
    assert keep([nested, ADAM], parse_filters(["year>=2000"], "mine.jsonl")) == []


@pytest.mark.parametrize(("text", "says"), [
    ("yeer>=2024", "unknown filter field 'yeer'"), ("year=>2024", "the field 'year' takes a year"),
    ("year 2024", "bad filter"),
    ("year>=soon", "takes a year"),
    ("title<abc", "the field 'title' takes = != or ~"), ("venue=", "has no value"), ("", "bad filter"),
])
def test_a_bad_filter_is_one_line_naming_the_field_and_the_allowed_ones(text, says):
    with pytest.raises(QueryError) as caught:
        parse_filter(text)
    message = str(caught.value)
    assert says in message and "\n" not in message
    if "unknown" in says or "bad filter" in says:
        assert ", ".join(FIELDS) in message


def test_control_characters_are_written_out_in_csv_and_bibtex_as_every_command_shows_them():
    # An id, title or link from a .jsonl corpus can hold an ESC: printed or cat'ed, the export must not obey it.
    odd = Paper("z\x1b[31m", "Red \x1b[31mtitle\u202e", "An abstract\x07 about colour.", "x\x1b.jsonl", 1,
                urls=("https://e.org/a\x1b[0m b",), venue="V")
    csv_text, bibtex = papers_csv([odd]), papers_bibtex([odd])
    for text in (csv_text, bibtex):
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text)
    row = next(csv.DictReader(io.StringIO(csv_text)))
    assert (row["paper_id"], row["title"], row["abstract"]) == (
        "z\\x1b[31m", "Red \\x1b[31mtitle\\u202e", "An abstract\\x07 about colour.")
    fields = parse_bibtex(bibtex)[0][2]
    assert fields["title"] == r"{Red \textbackslash{}x1b[31mtitle\textbackslash{}u202e}"
    assert fields["url"] == "https://e.org/a%1B[0m%20b"



@pytest.mark.parametrize(("text", "written"), [
    (r"a \emph{surprise} gain of 4.5\% over {BERT}", r"a \emph{surprise} gain of 4.5\% over {BERT}"),
    (r"the loss $\mathcal{L}_{x}$ and $$a^2$$", r"the loss $\mathcal{L}_{x}$ and $$a^2$$"),
    (r"M{\"u}ller's \'etude, 10\,ms, Fig.~1", r"M{\"u}ller's \'etude, 10\,ms, Fig.~1"),
    ("50% of runs & more_stuff #1 x^2", r"50\% of runs \& more\_stuff \#1 x\^{}2"),
    ("costs $5 and $10, about ~3", r"costs \$5 and \$10, about \textasciitilde{}3"),
    ("$a % b$ and $ x $", r"$a \% b$ and \$ x \$"),
    ("a { b } } {", r"a { b } \textbraceright{} \textbraceleft{}"),
    (r"\{x and C:\ 3", r"\textbraceleft{}x and C:\textbackslash{} 3"),
    ("a line\\\\", "a line\\\\ "),
])
def test_bibtex_keeps_the_latex_a_text_holds_and_escapes_bare_special_characters(text, written):
    from rag.exports.latex import latex_escape

    assert latex_escape(text) == written
    field = parse_bibtex(papers_bibtex([Paper("p", "T", text, "papers.jsonl", 1)]))[0][2]["abstract"]
    assert field == written
    depth = 0  # BibTeX itself counts every brace, escaped or not: they must balance as it counts them too
    for ch in written:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0


def test_bibtex_titles_are_braced_so_styles_keep_their_capitals():
    fields = parse_bibtex(papers_bibtex([Paper("p", r"FedSSM: \emph{State} Space Models", "a", "f.jsonl", 1)]))[0][2]
    assert fields["title"] == r"{FedSSM: \emph{State} Space Models}"


def test_a_follow_ups_markdown_names_its_papers_and_references_read_title_first():
    # "# what did the second one evaluate on?" named no paper, and a reference read "ICML 2026 · \#8 of file 000".
    bundled = Paper("000_dcbf1b5d2daaeff5.txt#8", "CausalAno", "We evaluate on 28 tabular datasets.",
                    "000_dcbf1b5d2daaeff5.txt", 8, venue="ICML 2026", year=2026)
    answer = Answer(question="what did the second one evaluate on?", answer="On 28 tabular datasets [1].",
                    citations=[Citation(1, bundled.paper_id, "CausalAno", bundled.source, 8)],
                    sources=[Hit.of_paper(bundled, rank=1, score=1.0, collection="paperchat")],
                    search_query="what did the second one evaluate on? CausalAno Other title")
    text = answer_markdown(answer, collection="paperchat")
    assert text.startswith("# what did the second one evaluate on?\n\n*About:* **CausalAno**\n\n")
    reference = next(line for line in text.splitlines() if line.startswith('<a id="ref-1">'))
    assert reference.endswith("\\[1\\] **CausalAno**. ICML 2026, paper 8 of `000_dcbf1b5d2daaeff5.txt`")
    assert "\\#" not in text and "file 000" not in text
    html = MarkdownIt("commonmark").render(text)
    assert "ICML 2026, paper 8 of <code>000_dcbf1b5d2daaeff5.txt</code>" in html
    # A question asked on its own (searched as written) needs no such line.
    alone = answer_markdown(Answer(question="What does CausalAno do?", answer="x [1].", citations=answer.citations,
                                   sources=answer.sources, search_query="What does CausalAno do?"))
    assert "*About:*" not in alone
