"""Consecutive source numbers: an answer's ``[n]`` markers renumbered 1..m in the order its sources are first cited.

A writer cites a source by its place in the list it was given (the retrieval rank), and may skip one: "[1],
[2], [4]" reads as if a source were missing. After the answer is checked (rag.answers.attribution) its cited
sources are renumbered 1..m in the order they are first cited in the text, the retrieved sources it does not
cite follow (m+1, ...), and every place that carries a number says the same: the text, ``Answer.citations``
(in marker order), the claims' verdicts and checks, and ``Answer.sources`` (reordered, ``rank`` = its number).

While an answer streams, ``StreamNumbers`` gives each source the next number the first time the writer cites
it, which is the numbering of the final answer whenever the check leaves the writer's markers as they were.
"""

from __future__ import annotations

import dataclasses

from rag.answers.citations import find_markers
from rag.types import Answer, Hit


def renumber_text(text: str, numbers: dict[int, int]) -> str:
    """``text`` with each marker's numbers mapped through ``numbers`` (others kept), written ``[1, 2]``."""
    markers = find_markers(text)
    if not markers:
        return text
    out: list[str] = []
    pos = 0
    for marker in markers:
        mapped = sorted(dict.fromkeys(numbers.get(n, n) for n in marker.numbers))
        out += [text[pos : marker.start], "[" + ", ".join(str(n) for n in mapped) + "]"]
        pos = marker.end
    out.append(text[pos:])
    return "".join(out)


def first_cited(text: str, valid: int) -> list[int]:
    """The source numbers (1..``valid``) cited in ``text``, in order of first citation."""
    seen: dict[int, None] = {}
    for marker in find_markers(text):
        for number in marker.numbers:
            if 1 <= number <= valid:
                seen.setdefault(number, None)
    return list(seen)


def consecutive(answer: Answer) -> dict[int, int]:
    """Renumber ``answer`` in place (see the module's docstring); returns the old -> new numbers.

    Marker ``n`` of an answer points at ``answer.sources[n - 1]`` (each writer numbers the first sources of that
    list). A source cited only by a citation (not in the text) comes after those the text cites. Applying it
    to an answer already numbered this way changes nothing.
    """
    count = len(answer.sources)
    order = first_cited(answer.answer, count)
    order += [c.marker for c in answer.citations if 1 <= c.marker <= count and c.marker not in order]
    order += [n for n in range(1, count + 1) if n not in order]
    numbers = {old: new for new, old in enumerate(order, start=1)}
    if all(old == new for old, new in numbers.items()):
        return numbers
    answer.answer = renumber_text(answer.answer, numbers)
    answer.sources = [_ranked(answer.sources[old - 1], new) for new, old in enumerate(order, start=1)]
    answer.citations = sorted((dataclasses.replace(c, marker=numbers.get(c.marker, c.marker))
                               for c in answer.citations), key=lambda c: c.marker)
    answer.checks = [dataclasses.replace(c, marker=numbers.get(c.marker, c.marker)) for c in answer.checks]
    answer.claims = [dataclasses.replace(c, cited=_mapped(c.cited, numbers), markers=_mapped(c.markers, numbers))
                     for c in answer.claims]
    return numbers


def _mapped(markers: tuple[int, ...], numbers: dict[int, int]) -> tuple[int, ...]:
    return tuple(sorted(dict.fromkeys(numbers.get(n, n) for n in markers)))


def _ranked(hit: Hit, rank: int) -> Hit:
    return hit if hit.rank == rank else dataclasses.replace(hit, rank=rank)


class StreamNumbers:
    """Numbers for a streamed answer's markers: each source gets the next number when it is first cited."""

    def __init__(self) -> None:
        self.numbers: dict[int, int] = {}

    def apply(self, text: str) -> str:
        """``text`` (whole markers only, all pointing at sources) with its markers renumbered."""
        for marker in find_markers(text):
            for number in marker.numbers:
                self.numbers.setdefault(number, len(self.numbers) + 1)
        return renumber_text(text, self.numbers)
