"""Post-hoc attribution: every claim of a written answer tied to the source that supports it, whoever wrote it.

After an answer is written (by an endpoint, the embedded model or the extractive writer) ``Attributor``

1. splits it into claims (``rag.answers.citations.split_claims``),
2. compares each claim with the evidence spans (sentences and adjacent pairs) of *every* numbered source,
   not only the ones it cites: the best span of each source is that source's support for the claim,
3. keeps the markers of cited sources that support the claim, re-cites a claim whose cited source does not
   support it while another does, and cites an uncited claim that a source supports,
4. flags a claim that no source supports, or that states a name or a figure found in no source and not
   in the question ("Fed-LangFRA", "(2023)"): it keeps no marker, so it is never passed off as sourced,
   and it is struck through in the text (or removed, for writers too small to be trusted with it),
5. rewrites the answer's markers to match.

It does not decide whether the question is answerable (rag.answers.extractive does) and does not fetch sources.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rag.answers.citations import Claim, ClaimCheck, split_claims, strip_markers
from rag.answers.evidence import WEAK_BELOW, evidence_spans, unit_rows
from rag.answers.extractive import mentions_title
from rag.answers.prompts import says_not_covered
from rag.corpus.titles import is_generic, looks_coined
from rag.embedding.models import Embedder
from rag.plain_text import readable
from rag.types import ClaimVerdict, Paper
from store.bm25 import Analyzer, LexicalParams

# Written in place of the markers of a claim no source supports.
UNSUPPORTED_TAG = "[unsupported]"

# A claim that only introduces what follows ("Two papers address this:") states nothing to check.
_LEAD_IN = re.compile(r":\s*$")
# Figures: 2023, 30%, 0.85, 1,200, 6.8x; not the digits inside a name such as "Agent0-VL" or "GPT-4o".
_FIGURE = re.compile(r"(?<![\w.\-#])(\d+(?:[.,]\d+)*)(?:\s?%|x\b|×)?(?![\w\-])")
_TOKEN = re.compile(r"[A-Za-z0-9][\w\-]*[\w]|[A-Za-z]")
# Acronyms a writer may use without any source spelling them out.
_COMMON_NAMES = frozenset({"ai", "ml", "nlp", "cv", "ok", "usa", "uk", "eu", "i", "ii", "iii", "iv"})


@dataclass(frozen=True)
class AttributionParams:
    support_bar: float = WEAK_BELOW  # a source supports a claim when their best span is at least this similar
    keep_margin: float = 0.1  # a cited supporting source keeps its marker unless another is this much better
    name_bonus: float = 0.1  # a claim that names a paper ("FedSSM ...") is about that paper: added to its support
    min_term_share: float = 0.5  # and a source supports a claim only if it has this share of the claim's words
    cache_papers: int = 512  # evidence vectors kept per attributor (papers), so re-asked sources cost nothing


@dataclass
class Attribution:
    """The answer text with its markers rewritten, and one verdict per claim."""

    text: str
    claims: list[ClaimVerdict]
    checks: list[ClaimCheck]

    @property
    def unsupported(self) -> list[ClaimVerdict]:
        return [c for c in self.claims if not c.supported]


class Attributor:
    def __init__(self, embedder: Embedder, params: AttributionParams | None = None) -> None:
        self.embedder = embedder
        self.params = params or AttributionParams()
        self.analyze = Analyzer(LexicalParams())
        self._evidence: OrderedDict[tuple[str, str], tuple[list[tuple[int, int]], np.ndarray]] = OrderedDict()

    # --- evidence vectors ---------------------------------------------------------------------------

    def _evidence_for(self, papers: Sequence[Paper]) -> list[tuple[list[tuple[int, int]], np.ndarray]]:
        """Each paper's evidence spans and their unit vectors; the papers not cached yet in one embed call."""
        keys = [(p.paper_id, p.abstract) for p in papers]
        missing = [p for p, key in zip(papers, keys, strict=True) if key not in self._evidence]
        if missing:
            spans = {p.paper_id: evidence_spans(p.abstract) for p in missing}
            # Answers quote abstracts without their markup (rag/plain_text.py): compare like with like.
            texts = [readable(p.abstract[s:e]) for p in missing for s, e in spans[p.paper_id]]
            vectors = unit_rows(self.embedder.embed(texts)) if texts else np.zeros((0, 1), dtype=np.float32)
            row = 0
            for p in missing:
                n = len(spans[p.paper_id])
                self._evidence[(p.paper_id, p.abstract)] = (spans[p.paper_id], vectors[row : row + n])
                row += n
        for key in keys:
            self._evidence.move_to_end(key)
        out = [self._evidence[key] for key in keys]
        while len(self._evidence) > self.params.cache_papers:
            self._evidence.popitem(last=False)
        return out

    # --- attribution ----------------------------------------------------------------------------------

    def attribute(
        self,
        text: str,
        sources: dict[int, Paper],
        *,
        question: str = "",
        drop_unsupported: bool = False,
        unfinished: bool = False,
    ) -> Attribution:
        """Check every claim of ``text`` against every source (numbered as in the text) and rewrite its markers.

        ``drop_unsupported`` removes unsupported claims from the text instead of striking them through.
        ``unfinished``: the writer was cut off, so the last claim is a fragment: it is left as written, unchecked.
        """
        claims = split_claims(text)
        # Lead-ins ("Two papers qualify:") and "the abstracts do not answer this" state nothing to check.
        checked = [c for c in claims if not _LEAD_IN.search(c.text) and not says_not_covered(c.text)]
        if unfinished and claims and checked and checked[-1] is claims[-1]:
            checked.pop()
        if not checked or not sources:
            verdicts = [_unchecked(c) for c in checked]
            return Attribution(text if not checked else _rewrite(text, claims, {}, drop_unsupported), verdicts, [])
        numbers = sorted(sources)
        papers = [sources[n] for n in numbers]
        evidence = self._evidence_for(papers)
        claim_vectors = unit_rows(self.embedder.embed([c.text for c in checked]))
        shown = [f"{p.abstract} {readable(p.abstract)}" for p in papers]
        known = _known_text(shown + [p.title for p in papers] + [question])
        paper_terms = [set(self.analyze(f"{p.title} {text}")) for p, text in zip(papers, shown, strict=True)]

        verdicts: dict[int, ClaimVerdict] = {}
        checks: list[ClaimCheck] = []
        for index, claim in enumerate(checked):
            best: dict[int, tuple[float, int, int]] = {}  # number -> (support, start, end); 0 if words differ
            nearest: dict[int, tuple[float, int, int]] = {}  # the same, whatever the words
            claim_terms = set(self.analyze(claim.text))
            for number, paper, terms, (spans, vectors) in zip(numbers, papers, paper_terms, evidence, strict=True):
                if not spans:
                    continue
                # Similar in meaning is not enough: the source must also use most of the claim's words, so a
                # string of paper names or generic praise is not "supported" by whichever abstract is closest.
                share = len(claim_terms & terms) / len(claim_terms) if claim_terms else 0.0
                similarities = vectors @ claim_vectors[index]
                top = int(np.argmax(similarities))
                support = float(np.clip(similarities[top], 0.0, 1.0))
                if mentions_title(claim.text, paper.title):  # the claim names the paper
                    support = min(1.0, support + self.params.name_bonus)
                best[number] = (support if share >= self.params.min_term_share else 0.0, *spans[top])
                nearest[number] = (support, *spans[top])
            invented = invented_terms(claim.text, known)
            markers, recited = self._choose(claim, best)
            supported = bool(markers) and not invented
            if not supported:
                markers = ()
            leader = max(nearest, key=lambda n: nearest[n][0]) if nearest else None
            shown = markers[0] if markers else leader
            evidence_of = (best if markers else nearest).get(shown) if shown is not None else None
            paper = sources[shown] if shown is not None else None
            verdicts[id(claim)] = ClaimVerdict(
                text=claim.text,
                cited=claim.markers,
                markers=markers,
                paper_id=paper.paper_id if paper else "",
                title=paper.title if paper else "",
                evidence=paper.abstract[evidence_of[1] : evidence_of[2]] if paper and evidence_of else "",
                support=evidence_of[0] if evidence_of else 0.0,
                supported=supported,
                recited=recited and supported,
                invented=invented,
            )
            for number in markers:
                support, start, end = best[number]
                paper = sources[number]
                checks.append(ClaimCheck(claim.text, number, paper.paper_id, paper.abstract[start:end], start, end,
                                         support, support < self.params.support_bar))
        new_text = _rewrite(text, claims, verdicts, drop_unsupported)
        kept = [verdicts[id(c)] for c in checked if not (drop_unsupported and not verdicts[id(c)].supported)]
        return Attribution(new_text, kept, checks)

    def _choose(self, claim: Claim, best: dict[int, tuple[float, int, int]]) -> tuple[tuple[int, ...], bool]:
        """(the claim's markers after attribution, whether they differ from the writer's)."""
        if not best:
            return (), False
        bar = self.params.support_bar
        top = max(best, key=lambda n: best[n][0])
        top_support = best[top][0]
        kept = tuple(n for n in claim.markers
                     if n in best and best[n][0] >= bar and best[n][0] >= top_support - self.params.keep_margin)
        if kept:
            return kept, kept != tuple(n for n in claim.markers if n in best)
        if top_support >= bar:
            return (top,), bool(claim.markers)
        return (), bool(claim.markers)


def _unchecked(claim: Claim) -> ClaimVerdict:
    """The verdict on a claim there is no source to check against: unsupported, no marker kept."""
    return ClaimVerdict(text=claim.text, cited=claim.markers, markers=(), paper_id="", title="",
                        evidence="", support=0.0, supported=False, recited=False, invented=())


# --- names and figures ------------------------------------------------------------------------------------------


def _known_text(texts: Sequence[str]) -> str:
    return " ".join(" ".join(t.split()) for t in texts).lower()


def invented_terms(claim: str, known: str) -> tuple[str, ...]:
    """Names (coined method names, acronyms) and figures in ``claim`` that occur nowhere in ``known``
    (the lower-cased sources and question)."""
    found: list[str] = []
    claim = strip_markers(claim)
    for match in _FIGURE.finditer(claim):
        number = match.group(1)
        if not _contains(known, number.lower()):
            found.append(number)
    for match in _TOKEN.finditer(claim):
        token = match.group(0)
        lowered = token.lower()
        if lowered in _COMMON_NAMES or not _is_name(token):
            continue
        if not _contains(known, lowered) and not _contains(known, lowered.rstrip("s")):
            found.append(token)
    return tuple(dict.fromkeys(found))


def _is_name(token: str) -> bool:
    if is_generic(token):
        return False
    letters = [ch for ch in token if ch.isalpha()]
    acronym = len(letters) >= 2 and sum(ch.isupper() for ch in letters) >= 2 and token[0].isupper()
    return looks_coined(token) or acronym


def _contains(known: str, term: str) -> bool:
    return re.search(r"(?<![\w])" + re.escape(term) + r"(?![\w])", known) is not None


# --- rewriting ----------------------------------------------------------------------------------------------------

_CLOSING_PUNCTUATION = ".!?;:"


def _rewrite(text: str, claims: Sequence[Claim], verdicts: dict[int, ClaimVerdict], drop_unsupported: bool) -> str:
    """``text`` with each checked claim's markers replaced by its verdict's; unsupported claims struck or dropped.

    Claims without a verdict (lead-ins) keep their text and lose only markers that point nowhere useful: none.
    """
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement), non-overlapping
    for claim in claims:
        verdict = verdicts.get(id(claim))
        if verdict is None or claim.start < 0:
            continue
        if drop_unsupported and not verdict.supported:
            edits.append((claim.start, claim.end, ""))
            edits.extend((_with_space_before(text, s), e, "") for s, e in claim.marker_spans)
            continue
        if verdict.markers == claim.markers and verdict.supported and claim.marker_spans:
            continue  # nothing to change: keep the writer's markers where they are
        for s, e in claim.marker_spans:
            edits.append((_with_space_before(text, s), e, ""))
        insert = claim.end
        while insert > claim.start and text[insert - 1] in _CLOSING_PUNCTUATION:
            insert -= 1
        # Markers inside the sentence's closing punctuation are already being removed: insert before it.
        label = ("[" + ", ".join(str(n) for n in verdict.markers) + "]") if verdict.supported else UNSUPPORTED_TAG
        if verdict.supported:
            edits.append((insert, insert, " " + label))
        else:
            body_start = claim.start
            edits.append((body_start, body_start, "~~"))
            edits.append((insert, insert, "~~ " + label))
    return _apply(text, edits)


def _with_space_before(text: str, start: int) -> int:
    while start > 0 and text[start - 1] in " \t":
        start -= 1
    return start


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    # Deletions may overlap (a marker inside a dropped claim): merge them; inserts go before deletions at a point.
    edits = sorted(edits, key=lambda e: (e[0], e[1]))
    out: list[str] = []
    pos = 0
    for start, end, replacement in edits:
        if start < pos:  # inside a deletion already made
            if end > pos:
                pos = end
            if replacement:
                out.append(replacement)
            continue
        out.append(text[pos:start])
        out.append(replacement)
        pos = max(pos, end)
    out.append(text[pos:])
    result = "".join(out)
    # Tidy what removals leave: empty list items, blank runs, spaces before punctuation at a removed marker.
    lines = [line.rstrip() for line in result.split("\n")]
    lines = [line for line in lines if not re.fullmatch(r"\s*(?:[-*+\u2022]|\d{1,3}[.)])", line)]
    result = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return re.sub(r"(?<=\S)[ \t]{2,}", " ", result)


_STRUCK = re.compile(r"~~.*?~~")


def shown_text(answer: str) -> str:
    """What an answer states as fact: its text without the claims struck through as unsupported."""
    return _STRUCK.sub(" ", answer)
