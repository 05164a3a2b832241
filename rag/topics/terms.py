"""Distinctive words of groups of papers, c-TF-IDF style (class-based TF-IDF, as in BERTopic).

A group's words are counted over all its abstracts (title included) as one document; a word scores its
frequency in the group times ``log(1 + A / f)``, where ``A`` is the average number of words per group and
``f`` the word's frequency over every group: common everywhere scores low, frequent here and rare
elsewhere scores high. Words are grouped by stem ("learning", "learned" -> "learn") and shown in the
form the group's abstracts use most, so a label is always made of words that occur in them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

_WORD = re.compile(r"[^\W\d_][^\W_]*(?:-[^\W_]+)*", re.UNICODE)
# Words every abstract uses whatever its subject: they would label every topic.
_ABSTRACT_WORDS_TEXT = (
    "paper papers propose proposes proposed present presents introduce introduces approach approaches method methods "
    "based new novel work works result results show shows shown demonstrate demonstrates experiment experiments "
    "experimental performance existing state art achieve achieves significantly significant outperform outperforms "
    "using use used uses study task tasks framework problem problems data model models effective effectively "
    "improve improves improved different various extensive address key challenge challenges provide provides "
    "including enable enables however while across further furthermore code available github com https http "
    # Connectives and manner words: shared by two abstracts, they say nothing of why the papers are alike
    # ("shared words: upper, lower, finally, bounds"; "requiring, dynamically, design").
    "finally moreover additionally notably remarkably particularly specifically typically respectively consistently "
    "substantially efficiently dynamically require requires required requiring allow allows allowing enabling"
)
_ABSTRACT_WORDS = frozenset(_ABSTRACT_WORDS_TEXT.split())
# English function words (kept here: importing scikit-learn's list costs seconds on a cold start).
_ENGLISH_STOP_WORDS = (
    "about above after again against all almost alone along already also although always among amongst and another "
    "any anyhow anyone anything anyway anywhere are around as at back be became because become becomes becoming been "
    "before beforehand behind being below beside besides between beyond both but by can cannot could did do does doing "
    "done down due during each either else elsewhere enough etc even ever every everyone everything everywhere except "
    "few first for former formerly from full get give go had has have having he hence her here hereby herein hers "
    "herself him himself his how however i if in indeed into is it its itself just last latter least less made many "
    "may me meanwhile might more moreover most mostly much must my myself namely neither never nevertheless next no "
    "nobody none nor not nothing now nowhere of off often on once one only onto or other others otherwise our ours "
    "ourselves out over own per perhaps rather re same see seem seemed seeming seems several she should since so some "
    "somehow someone something sometime sometimes somewhere still such than that the their theirs them themselves then "
    "thence there thereafter thereby therefore therein thereupon these they this those though through throughout thru "
    "thus to together too toward towards under until up upon us very via was we well were what whatever when whence "
    "whenever where whereas whereby wherein whether which while who whoever whole whom whose why will with within "
    "without would yet you your yours yourself yourselves two three four five six ten can't cannot don't doesn't "
    "isn't aren't won't within e.g i.e et al vs"
)
MIN_WORD_LENGTH = 3


@dataclass(frozen=True)
class Vocabulary:
    """Each paper's word stems and, per stem, how its surface forms are spelt."""

    stems: list[Counter]  # per paper: stem -> count
    forms: list[dict[str, Counter]]  # per paper: stem -> Counter of the words it came from


class WordCounter:
    """Splits abstracts into lower-case content words (stop words, numbers and short words out) and stems."""

    @cached_property
    def _stemmer(self):
        import Stemmer

        return Stemmer.Stemmer("english")

    @cached_property
    def _stop_words(self) -> frozenset[str]:
        return frozenset(_ENGLISH_STOP_WORDS.split()) | _ABSTRACT_WORDS

    def words(self, text: str) -> list[str]:
        stop = self._stop_words
        return [w for w in _WORD.findall(text.lower()) if len(w) >= MIN_WORD_LENGTH and w not in stop]

    def count(self, texts: Iterable[str]) -> Vocabulary:
        stems_per_paper, forms_per_paper = [], []
        for text in texts:
            words = self.words(text)
            # Plurals the stemmer keeps ("llms", "gnns") join their singular.
            stems = [s[:-1] if len(s) > 3 and s.endswith("s") else s for s in self._stemmer.stemWords(words)]
            forms: dict[str, Counter] = {}
            for word, stem in zip(words, stems, strict=True):
                forms.setdefault(stem, Counter())[word] += 1
            stems_per_paper.append(Counter(stems))
            forms_per_paper.append(forms)
        return Vocabulary(stems_per_paper, forms_per_paper)


def distinctive_terms(vocabulary: Vocabulary, groups: Sequence[Sequence[int]], n: int) -> list[list[str]]:
    """The ``n`` most distinctive words of each group of papers (paper rows into ``vocabulary``), best first.

    A word must occur in two of the group's papers when the group has three or more: a word one abstract
    repeats says little about the others.
    """
    stems = sorted({s for counts in vocabulary.stems for s in counts})
    column = {s: i for i, s in enumerate(stems)}
    counts = np.zeros((len(groups), len(stems)), dtype=np.float64)
    papers_with = np.zeros((len(groups), len(stems)), dtype=np.int64)
    for g, rows in enumerate(groups):
        for row in rows:
            for stem, count in vocabulary.stems[row].items():
                counts[g, column[stem]] += count
                papers_with[g, column[stem]] += 1
    if not stems:
        return [[] for _ in groups]
    totals = counts.sum(axis=1, keepdims=True)
    tf = counts / np.maximum(totals, 1.0)
    average_words = float(totals.mean())
    idf = np.log(1.0 + average_words / np.maximum(counts.sum(axis=0), 1.0))
    scores = tf * idf
    labels = []
    for g, rows in enumerate(groups):
        needed = 2 if len(rows) >= 3 else 1
        eligible = np.flatnonzero((papers_with[g] >= needed) & (counts[g] > 0))
        if not len(eligible):
            eligible = np.flatnonzero(counts[g] > 0)
        # Ties broken by the stem itself: the same index always gives the same label.
        order = sorted(eligible, key=lambda c: (-scores[g, c], stems[c]))[:n]
        labels.append([_surface(vocabulary, rows, stems[c]) for c in order])
    return labels


def _surface(vocabulary: Vocabulary, rows: Sequence[int], stem: str) -> str:
    """The spelling of ``stem`` the group's abstracts use most (ties: alphabetical)."""
    forms: Counter = Counter()
    for row in rows:
        forms.update(vocabulary.forms[row].get(stem, {}))
    return min(forms.items(), key=lambda item: (-item[1], item[0]))[0]


def shared_terms(vocabulary: Vocabulary, row: int, other: int, weights: dict[str, float], n: int) -> list[str]:
    """The words two papers share, the rarer in the corpus first (``weights``: stem -> idf)."""
    common = set(vocabulary.stems[row]) & set(vocabulary.stems[other])
    order = sorted(common, key=lambda s: (-weights.get(s, 0.0), s))[:n]
    return [_surface(vocabulary, [row, other], stem) for stem in order]


def stem_idf(vocabulary: Vocabulary) -> dict[str, float]:
    """Inverse document frequency of each stem over the papers."""
    df: Counter = Counter()
    for counts in vocabulary.stems:
        df.update(counts.keys())
    n = len(vocabulary.stems)
    return {stem: float(np.log((1 + n) / (1 + d)) + 1.0) for stem, d in df.items()}
