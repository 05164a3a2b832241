"""Source markers in answers: parsing, cleaning, and checking each cited claim against its abstract.

An answer cites its sources with numbered markers, ``[1]``, ``[1, 3]``, ``[1-3]``. This module

1. finds the markers (``find_markers``) and removes those that point at no source (``clean_markers``),
2. splits the answer into claims, each with the markers it carries (``split_claims``),
3. records how well a source supports a claim (``ClaimCheck``: the evidence, a verbatim slice of the
   abstract with its offsets, and its similarity to the claim; rag.answers.evidence finds them),
4. folds the checks into one ``Citation`` per marker (``citations_from_checks``) and gives the spans
   of an abstract to highlight (``highlight_spans``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from rag.answers.sentence_kinds import sentence_penalties
from rag.corpus.chunking import split_sentences
from rag.types import Citation, Paper

# A range marker never expands to more numbers than this: "[1-100000]" is a typo, not 100000 sources.
MAX_RANGE = 50

_NUMBER = r"[0-9]{1,3}"  # ASCII digits only; "[2024]" is a year, not a source
_DASH = r"[-\u2010\u2011\u2012\u2013\u2014\u2212]"  # hyphen, the Unicode hyphens and dashes, minus sign
_SPACE = r"[^\S\n]*"  # spaces, never a line break
_ITEM = rf"{_NUMBER}(?:{_SPACE}{_DASH}{_SPACE}{_NUMBER})?"
MARKER = re.compile(rf"\[{_SPACE}{_ITEM}(?:{_SPACE}[,;]{_SPACE}{_ITEM})*{_SPACE}\]")
_ITEM_RE = re.compile(rf"({_NUMBER})(?:{_SPACE}{_DASH}{_SPACE}({_NUMBER}))?")

# Characters before which the space in front of a removed marker goes too: "shown [99]." -> "shown.".
_CLOSING = set(".,;:!?)]}\"'\u2019\u201d\u2026")


@dataclass(frozen=True)
class Marker:
    """One marker: its span ``text[start:end]`` and the source numbers it cites, ranges expanded."""

    start: int
    end: int
    numbers: tuple[int, ...]


def find_markers(text: str) -> list[Marker]:
    """Every marker in ``text``, in order. Adjacent groups such as ``[1][2]`` are separate markers."""
    return [Marker(m.start(), m.end(), _numbers(m.group(0))) for m in MARKER.finditer(text)]


def _numbers(marker: str) -> tuple[int, ...]:
    """The numbers of one marker's text, in order of appearance, without repeats."""
    seen: dict[int, None] = {}
    for item in _ITEM_RE.finditer(marker):
        first = int(item.group(1))
        last = int(item.group(2)) if item.group(2) is not None else first
        low, high = min(first, last), max(first, last)
        for number in range(low, min(high, low + MAX_RANGE - 1) + 1):
            seen.setdefault(number, None)
    return tuple(seen)


def _format(numbers: Sequence[int]) -> str:
    return "[" + ", ".join(str(n) for n in numbers) + "]"


def clean_markers(text: str, valid: Collection[int]) -> tuple[str, int]:
    """Drop the numbers that are not in ``valid`` and normalise the markers that remain.

    ``"[1, 99]"`` becomes ``"[1]"``; ``"[99]"`` disappears with the space before it (``"shown [99]."``
    becomes ``"shown."``); kept markers are written as ``"[1, 2, 3]"``. Returns the text and how many
    invalid numbers were removed. Text without markers comes back unchanged.

    Removing a marker can join its neighbours into a new one (``"[[99]1]"`` -> ``"[1]"``). One pass finds
    those too, in time linear in the text: a marker holds no ``[``, so the only place a new one can start
    is the last ``[`` written out with nothing but marker characters after it (``opens`` keeps those).
    Each character is part of at most one completed candidate, so nested input such as ``[[[...[99]99]99]``
    costs no more than plain text.
    """
    if MARKER.search(text) is None:
        return text, 0
    valid = frozenset(valid)
    out: list[str] = []  # the cleaned text so far, in pieces
    opens: list[int] = []  # indexes in ``out`` of "[" pieces followed only by marker characters
    removed = 0
    pos = 0
    while pos < len(text):
        if not opens:  # nothing can be a marker before the next "[": copy up to it in one piece
            following = text.find("[", pos)
            if following == -1:
                out.append(text[pos:])
                break
            if following > pos:
                out.append(text[pos:following])
            pos = following
        token = _MARKER_TOKEN.match(text, pos)
        piece, pos = token.group(0), token.end()
        if piece == "[":
            opens.append(len(out))
            out.append(piece)
        elif piece == "]" and opens:
            start = opens[-1]
            candidate = "".join(out[start:]) + "]"
            if MARKER.fullmatch(candidate) is None:
                out.append(piece)
                opens.clear()
                continue
            numbers = _numbers(candidate)
            kept = [n for n in numbers if n in valid]
            removed += len(numbers) - len(kept)
            del out[start:]
            opens.pop()
            if kept:
                out.append(_format(kept))
                opens.clear()  # a "]" was written: nothing before it can still become a marker
            else:
                pos = _drop_marker(text, pos, out)
        else:
            out.append(piece)
            if not _MARKER_INSIDE.fullmatch(piece):
                opens.clear()  # text no marker can hold ("]", a letter, a line break)
    return "".join(out), removed


# A run of characters a marker may hold between its brackets, or of characters it may not, or one bracket.
_INSIDE = r"[0-9,;\-\u2010-\u2014\u2212]|[^\S\n]"
_MARKER_INSIDE = re.compile(rf"(?:{_INSIDE})+")
_MARKER_TOKEN = re.compile(rf"\[|\]|(?:{_INSIDE})+|(?:(?!{_INSIDE})[^\[\]])+")


def _drop_marker(text: str, end: int, out: list[str]) -> int:
    """Tidy the space around a marker being dropped; ``out`` holds the text before it. Returns where to go on."""
    following = text[end : end + 1]
    if following == "" or following.isspace() or following in _CLOSING:
        _rstrip_spaces(out)  # "shown [99]." -> "shown."; "see [99] more" -> "see more"
    previous = _last_char(out)
    if previous in ("", "\n"):
        # At the start of a line there is no space before it to drop: drop the one after it instead.
        while end < len(text) and text[end].isspace() and text[end] != "\n":
            end += 1
    return end


def _rstrip_spaces(out: list[str]) -> None:
    """Remove the spaces (never a line break) at the end of the text in ``out``."""
    while out:
        end = len(out[-1])
        while end and out[-1][end - 1].isspace() and out[-1][end - 1] != "\n":
            end -= 1
        if end:
            out[-1] = out[-1][:end]
            return
        out.pop()


def _last_char(out: list[str]) -> str:
    for piece in reversed(out):
        if piece:
            return piece[-1]
    return ""


def strip_markers(text: str) -> str:
    """``text`` without any marker, spaces tidied as ``clean_markers`` does."""
    return clean_markers(text, ())[0]


# --- claims --------------------------------------------------------------------------------------------------------

# "- ", "* ", "+ ", "• ", "1. ", "2) " at the start of a line, possibly indented (nested lists).
_BULLET = re.compile(r"^[^\S\n]*(?:[-*+\u2022\u2023\u25e6\u25aa\u00b7]|[0-9]{1,3}[.)])[^\S\n]+")
_HEADING = re.compile(r"^[^\S\n]{0,3}#{1,6}(?:[^\S\n]+|$)")
_WORD = re.compile(r"\w")


@dataclass(frozen=True)
class Claim:
    """A sentence (or list item) of an answer, without its marker text, and the source numbers it cites.

    ``start``/``end`` locate the sentence in the answer it was split from and ``marker_spans`` the markers
    that belong to it (they may follow the sentence, or stand on a line of their own), so that its markers
    can be rewritten in place; claims built by hand leave them empty.
    """

    text: str
    markers: tuple[int, ...]
    start: int = -1
    end: int = -1
    marker_spans: tuple[tuple[int, int], ...] = ()


def split_claims(answer: str) -> list[Claim]:
    """The claims of ``answer``, in order.

    Sentences of a paragraph and items of a bulleted or numbered list are claims; bullets, numbering and
    heading hashes are stripped. Markers after a sentence's final period (``"... improves. [2]"``) belong
    to that sentence; markers on a line or paragraph of their own belong to the claim before them. A
    heading without markers is a label, not a claim, and text with no letters or digits is no claim.
    """
    claims: list[list] = []  # [text, numbers, start, end, marker spans]
    pending: list[int] = []  # markers seen before any claim: they go to the first one
    pending_spans: list[tuple[int, int]] = []
    for offset, block, is_heading in _blocks(answer):
        for text, numbers, (start, end), spans in _block_claims(block, offset):
            if is_heading and not numbers:
                continue
            if _WORD.search(text):
                claims.append([text, pending + numbers, start, end, pending_spans + spans])
                pending, pending_spans = [], []
            elif claims:
                claims[-1][1].extend(numbers)
                claims[-1][4].extend(spans)
            else:
                pending.extend(numbers)
                pending_spans.extend(spans)
    return [Claim(text, tuple(dict.fromkeys(numbers)), start, end, tuple(spans))
            for text, numbers, start, end, spans in claims]


def _blocks(answer: str) -> list[tuple[int, str, bool]]:
    """Paragraphs, list items and headings as (offset, text, is heading).

    Each block's text is ``answer[offset:offset + len(text)]`` with its line breaks, bullets, numbering and
    heading hashes turned into spaces, so that positions in it are positions in the answer.
    """
    blocks: list[list] = []  # [offset, text, is heading]
    continuing = False
    position = 0
    for line in answer.split("\n"):
        line_start, position = position, position + len(line) + 1
        if not line.strip():
            continuing = False
            continue
        heading = _HEADING.match(line)
        if heading:
            body = line[heading.end() :]
            trailing = len(body) - len(body.rstrip().rstrip("#"))
            text = " " * heading.end() + body[: len(body) - trailing] + " " * trailing
            blocks.append([line_start, text, True])
            continuing = False
            continue
        bullet = _BULLET.match(line)
        if bullet or not continuing:
            blocks.append([line_start, " " * bullet.end() + line[bullet.end() :] if bullet else line, False])
            continuing = True
        else:
            blocks[-1][1] += " " + line  # the line break between the two lines, as a space
    return [(offset, text, heading) for offset, text, heading in blocks]


def _block_claims(block: str, offset: int) -> list[tuple[str, list[int], tuple[int, int], list[tuple[int, int]]]]:
    """Sentences of one block with their markers, spans and marker spans (in the answer's positions);
    markers between sentences go to the sentence before."""
    markers = find_markers(block)
    masked = block
    if markers:
        pieces, pos = [], 0
        for marker in markers:
            pieces += [block[pos : marker.start], " " * (marker.end - marker.start)]
            pos = marker.end
        masked = "".join(pieces) + block[pos:]
    # Masked markers are spaces, so a sentence never ends inside one and "improves.[2] Next" splits.
    spans = split_sentences(masked)
    if not spans:
        return [("", [n for marker in markers for n in marker.numbers], (-1, -1),
                 [(offset + m.start, offset + m.end) for m in markers])]
    numbers: list[list[int]] = [[] for _ in spans]
    marker_spans: list[list[tuple[int, int]]] = [[] for _ in spans]
    index = 0
    for marker in markers:
        while index + 1 < len(spans) and spans[index + 1][0] <= marker.start:
            index += 1
        numbers[index].extend(marker.numbers)
        marker_spans[index].append((offset + marker.start, offset + marker.end))
    return [
        (" ".join(strip_markers(block[s:e]).split()), found, (offset + s, offset + e), where)
        for (s, e), found, where in zip(spans, numbers, marker_spans, strict=True)
    ]


# --- how well a source supports a claim ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimCheck:
    """How well one cited source supports one claim.

    ``evidence`` is ``abstract[evidence_start:evidence_end]`` of the cited paper: its sentence (or two
    adjacent sentences) most similar to the claim. ``support`` is that similarity, 0..1.
    """

    claim: str
    marker: int
    paper_id: str
    evidence: str
    evidence_start: int
    evidence_end: int
    support: float
    weak: bool


def citations_from_checks(checks: list[ClaimCheck], sources: dict[int, Paper], question: str = "") -> list[Citation]:
    """One ``Citation`` per marker, in order of first appearance, from its best-supported claim; among claims
    supported about as well (an extractive answer quotes each of its sentences verbatim), the one that shares the
    most words with ``question``: the sentence that answers, not the background it opens with.

    A citation is weak only when every claim citing it is weakly supported.
    """
    by_marker: dict[int, list[ClaimCheck]] = {}
    for check in checks:
        if check.marker in sources:
            by_marker.setdefault(check.marker, []).append(check)
    citations = []
    for number, group in by_marker.items():
        top = max(check.support for check in group)
        near = [check for check in group if check.support >= top - EVIDENCE_TIE]
        paper = sources[number]
        # Then the one that is no background or code link, or that reports results when results are asked ("How
        # well does FedSSM perform?" showed the sentence it opens with, "Multimodal Federated Learning addresses").
        penalties = sentence_penalties(question, [check.claim for check in near], links=1.0, background=1.0)
        best = max(zip(near, penalties, strict=True),  # the first of equals
                   key=lambda pair: (_shared_words(question, pair[0].claim, paper.title), -pair[1]))[0]
        citations.append(
            Citation(
                marker=number,
                paper_id=paper.paper_id,
                title=paper.title,
                source=paper.source,
                ordinal=paper.ordinal,
                evidence=best.evidence,
                support=best.support,
                claim=best.claim,
                weak=all(check.weak for check in group),
            )
        )
    return citations


EVIDENCE_TIE = 0.02  # claims whose support differs by less are supported equally well
_STOP = frozenset(["the", "a", "an", "of", "in", "on", "to", "for", "and", "or", "with", "by", "from", "what", "which",
                   "how", "does", "did", "do", "is", "are", "was", "were", "its", "their", "this", "that", "these",
                   "those", "it", "they", "who", "why", "when", "where"])


def _shared_words(question: str, claim: str, title: str = "") -> int:
    """How many of the question's words the claim uses (word starts compared: "reduction" ~ "reduces"), the
    paper's own name aside: it says which paper, not which sentence."""
    def starts(text: str) -> set[str]:
        return {w[:5] for w in re.findall(r"[a-z0-9][a-z0-9-]+", text.lower()) if w not in _STOP}

    return len((starts(question) - starts(title)) & starts(claim))


def highlight_spans(abstract: str, checks: list[ClaimCheck], paper_id: str) -> list[tuple[int, int]]:
    """The evidence spans of ``paper_id``'s checks in ``abstract``, sorted, overlapping or touching ones merged."""
    spans = sorted(
        (check.evidence_start, check.evidence_end)
        for check in checks
        if check.paper_id == paper_id and 0 <= check.evidence_start < check.evidence_end <= len(abstract)
    )
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
