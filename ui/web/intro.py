"""The header text and example questions of the web UI, from the collection being served.

The bundled ICML 2026 corpus keeps its own intro and hand-picked examples (they name its papers). Any other
collection gets a neutral intro naming it (the venue of its ``.txt`` header line, else the collection's
name) and examples built from its own titles and metadata, so no example asks about papers it does not hold.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rag.labels import corpus_name
from rag.settings import BUNDLED_CORPUS
from rag.types import Paper
from ui.web import render

MAX_EXAMPLES = 4
MAX_TITLE_WORDS = 10  # a derived title longer than this makes a poor example question
_TITLE_WORD = re.compile(r"[a-z]{5,}")
_BLAND_WORDS = frozenset({"based", "using", "towards", "toward", "through", "about", "their", "which", "under"})


@dataclass(frozen=True)
class Intro:
    name: str  # the corpus, as the header names it
    text: str  # the Markdown under the header
    examples: list[str]
    bundled: bool = False

    @property
    def markdown(self) -> str:
        """The page's header: "paperchat" and the intro (another corpus's name in the title too)."""
        heading = "# paperchat" if self.bundled else f"# paperchat · {render.chat_text(self.name)}"
        return f"{heading}\n{self.text}"


def bundled_files() -> set[str]:
    return {p.name for p in BUNDLED_CORPUS.glob("*.txt")}


def intro_for(papers: Sequence[Paper], collection: str, bundled: set[str] | None = None) -> Intro:
    """The intro for a collection holding ``papers``: the bundled text when it holds the bundled corpus (or
    nothing yet: an empty index is built from it), else a neutral one naming the collection."""
    bundled = bundled_files() if bundled is None else bundled
    # Every bundled file indexed (papers of the user's beside them or not): the examples name papers it holds.
    if not papers or bundled <= {p.source for p in papers}:
        return Intro("ICML 2026", render.INTRO, list(render.EXAMPLE_QUESTIONS), bundled=True)
    names = Counter(corpus_name(p.source, p.venue, collection) for p in papers)
    name = (names.most_common(1)[0][0] if len(names) == 1 else "") or collection
    count = f"{len(papers):,} paper{'s' if len(papers) != 1 else ''}"
    text = (
        f"Ask about the **{render.chat_text(name)}** abstracts ({count}). "
        "Every answer cites its sources as [1], [2], …; the panel on the right shows each cited abstract "
        "with the supporting sentences highlighted, so you can check every claim."
    )
    return Intro(name, text, examples_from(papers))


def examples_from(papers: Sequence[Paper]) -> list[str]:
    """Example questions about this collection's papers: what a titled one is about, who wrote one whose
    authors are known, the papers of a year its records give."""
    titled = [p for p in papers if p.title_given and len(p.title.split()) <= MAX_TITLE_WORDS]
    short = titled or [p for p in papers if len(p.title.split()) <= MAX_TITLE_WORDS]
    examples = [f"What does “{p.title}” propose?" for p in short[:2]]
    if with_authors := [p for p in titled if p.authors]:
        examples.append(f"Who wrote “{with_authors[-1].title}”?")
    if years := Counter(p.year for p in papers if p.year is not None):
        examples.append(f"Papers from {years.most_common(1)[0][0]}")
    return examples[:MAX_EXAMPLES] or ["What are these papers about?"]


def filter_placeholder(papers: Sequence[Paper]) -> str:
    """The chat filter box's placeholder, its examples ones that match papers of this collection: the newest year
    recorded, an author's surname when any paper records authors, a word several titles share. "author~Bengio"
    matched nothing in the bundled corpus, which records no authors."""
    examples = []
    if years := [p.year for p in papers if p.year is not None]:
        examples.append(f"year>={max(years)}")
    if authors := [p.authors[0] for p in papers if p.authors and p.authors[0].strip()]:
        examples.append(f"author~{Counter(a.split()[-1] for a in authors).most_common(1)[0][0]}")
    words = Counter(w for p in papers for w in set(_TITLE_WORD.findall(p.title.lower())) if w not in _BLAND_WORDS)
    if words:
        examples.append(f"title~{words.most_common(1)[0][0]}")
    examples.append("source=FILE")
    return "blank: every paper; e.g. " + "; ".join(examples)
