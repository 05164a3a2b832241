"""Short readable labels for abstracts that come without a title.

The bundled corpus (and many scraped ones) has abstracts only, but people scan a list of sources by
title. Most abstracts name the method, system or benchmark they introduce ("We propose FedSSM, which
..."), and that name is what readers remember, so it is the best label. When there is no such name we
fall back to a short phrase from the first sentence.

Everything here is heuristic and works on plain strings: no model, no corpus-specific word lists
beyond a few generic field acronyms that are never the name of a new method.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rag.corpus.title_phrase import fallback_phrase
from rag.corpus.title_text import (
    ARTICLES,
    AUXILIARIES,
    PREPOSITIONS,
    SENTENCE_END,
    capitalise,
    clean_markup,
    trim_token,
    word_set,
)

# --- where new names show up, and what a name looks like ----------------------------------------

_INTRO = re.compile(
    r"(?:we|this (?:paper|work|study)|our (?:paper|work))\s+"
    r"(?:(?:first|further|also|then|here|now|therefore|thus|hence)\s+)?"
    r"(?:propose|introduce|present|develop|design|release|unveil|contribute)[sd]?"
    r"(?:\s+and\s+[a-z]+)?\s+",
    re.IGNORECASE,
)
# "To resolve this, we employ Geodesic Flow Matching, adapting ...": what answers the stated problem is the
# contribution, whatever the verb.
_REMEDY = re.compile(
    r"to\s+(?:resolve|address|overcome|tackle|mitigate|solve|remedy|close|bridge|fix|alleviate)\s+"
    r"(?:this|these|that|those|such|the)\b[^,.;]{0,40},\s+we\s+(?:[a-z]+ly\s+)?[a-z]+\s+",
    re.IGNORECASE,
)
# "The resulting Dirac-Frenkel-Onsager dynamics preserve ...": the abstract names what it arrives at.
_RESULTING = re.compile(r"\b(?:the|our)\s+(?:resulting|proposed)\s+", re.IGNORECASE)
# "We bridge this gap via the Latent Persona Vector, a differentiable proxy": a name defined in passing.
_VIA = re.compile(r"\bwe\s+[a-z]+\s+(?:[\w-]+\s+){0,4}?(?:via|through)\s+(?:the\s+)?", re.IGNORECASE)
_CALLED = re.compile(r"(?:called|named|dubbed)\s+")
_TERMED = re.compile(r"termed\s+")
_WE_TERM = re.compile(r"we\s+(?:term|call|name|dub)\s+", re.IGNORECASE)
_OUR_THING = re.compile(
    r"our\s+(?:[\w-]+\s+){0,3}?(?:method|approach|framework|model|system|algorithm|benchmark|dataset|tool|"
    r"agent|architecture|pipeline|library|toolkit)\s*,\s+",
    re.IGNORECASE,
)
# "Code: https://github.com/owner/MeGan": the repository is usually named after the method.
_REPO = re.compile(r"(?:github|gitlab)\.com/[\w.-]+/([A-Za-z0-9][\w.-]*)", re.IGNORECASE)
_OPENING_NAME = re.compile(r"^\s*(\S+)\s+(?:is|are)\s+(?:a|an|the)\b")
_HAS_LETTER = re.compile(r"[A-Za-z]")
# FedSSM, CogRouter, MoDEX (lower then upper); SPARe, XYZFlow (caps then lower, not a plural "s").
_INNER_CAPS = re.compile(r"[a-z][A-Z]|[A-Z]{2,}[a-z](?!$)|[A-Z]{2,}[a-rt-z]$")
_ACRONYM = re.compile(r"^[A-Z][A-Z0-9]+s?$")
# Field acronyms that a paper uses but never introduces; never taken as the paper's "name".
GENERIC_ACRONYMS = word_set(
    "ai api asr cnn cot cpu cv dnn dpo dr ffn gan gd gnn gpt gpu iid kl llm lm lvlm mdp ml mllm mlp moe nlp ode ood "
    "pde pomdp ppo qa rag rl rlhf rnn sde sgd sota tpu tts vae vit vlm vqa "
    "csv gui html http json pdf sql url xml"  # formats and interfaces: "800 PDF documents" names no dataset
)
_CONNECTORS = word_set("of and for with in on to via")
_APPOSITIVE_NEXT = word_set("a an the which that one our whose")
_HEAD_NOUNS = word_set(
    "model models framework method benchmark dataset algorithm architecture engine network agent system library "
    "toolkit suite estimator estimators module"
)
_MARKERS = (  # pattern, whether only coined names count, words that must occur for the pattern to match
    (_CALLED, False, ("called", "named", "dubbed")),
    (_TERMED, True, ("termed",)),
    (_WE_TERM, False, ("we term", "we call", "we name", "we dub")),
    (_OUR_THING, False, ("our ",)),
)
STRONG, MEDIUM, WEAK = 2, 1, 0
UNTITLED = "Untitled abstract"
MAX_SCAN_CHARS = 6000  # names are introduced early; bounds the work on pathological inputs
MAX_TITLE_CHARS = 100
MAX_TERM_WORDS = 5  # "which we term embedding condensation": a term, not a clause


@dataclass(frozen=True)
class _Candidate:
    """A possible name with how sure we are (``strength``) and where it was found (``position``)."""

    name: str
    strength: int
    position: int


def derive_title(abstract: str, max_words: int = 8) -> str:
    """A short label for an untitled abstract: the name it introduces, else a phrase from its first sentence."""
    max_words = max(1, max_words)
    text = clean_markup(abstract[:MAX_SCAN_CHARS])
    candidates = [c for c in _name_candidates(text, max_words) if len(c.name.split()) <= max_words]
    candidates += _repository_names(abstract[:MAX_SCAN_CHARS])
    if candidates:
        title = min(candidates, key=lambda c: (-c.strength, c.position)).name
    else:
        title = fallback_phrase(text, max_words)
    if len(title) > MAX_TITLE_CHARS:  # one endless "word" (a URL, a formula): keep the label readable
        title = title[: MAX_TITLE_CHARS - 1].rstrip() + "…"
    return capitalise(title) or UNTITLED


def name_regex(title: str) -> str:
    """A regex for a short title as people type it: whole, in any case, its parts run together or apart ("FedSSM",
    "Fed SSM", "fed-ssm"; "MA-RAG", "MA RAG", "marag"; "CogRouter", "cog router"). Parts are split where the
    title has a space or hyphen, or where a capital follows a small letter."""
    parts = [p for p in re.split(r"[\s-]+|(?<=[a-z])(?=[A-Z])", title.strip()) if p]
    return r"(?<![\w-])" + r"[\s-]?".join(re.escape(p) for p in parts) + r"(?![\w-])"


def is_generic(token: str) -> bool:
    """True for field acronyms (LLM, LLMs, RL, PDE, CoT...) that are never the introduced method."""
    word = trim_token(token)
    key = word[:-1] if word.endswith("s") and len(word) > 2 and word[:-1].isupper() else word
    return key.lower() in GENERIC_ACRONYMS


def looks_coined(token: str) -> bool:
    """A coined name: FedSSM, MoDEX, CogRouter, MA-RAG, Agent0-VL, T2PO; not We, This, LLMs, Large."""
    word = trim_token(token)
    if len(word) < 2 or not _HAS_LETTER.search(word) or is_generic(word):
        return False
    parts = [p for p in word.split("-") if p]
    if any(_INNER_CAPS.search(p) for p in parts):
        return True
    if any(ch.isdigit() for ch in word) and any(ch.isupper() for ch in word) and len(word) >= 3:
        return True
    # MA-RAG, PR-BAST, VAE-Diffusion: every part capitalised, one an acronym; not "EM-based", "GRPO-style".
    return (
        len(parts) > 1
        and all(p[0].isupper() or p[0].isdigit() for p in parts)
        and any(_ACRONYM.match(p) and not is_generic(p) for p in parts)
    )


def _is_acronym(token: str) -> bool:
    word = trim_token(token)
    return bool(_ACRONYM.match(word)) and not is_generic(word)


def _name_like(token: str) -> bool:
    return looks_coined(token) or _is_acronym(token)


def _is_capitalised(token: str) -> bool:
    word = trim_token(token)
    return bool(word) and (word[0].isupper() or (word[0].isdigit() and _HAS_LETTER.search(word) is not None))


def _long_enough(name: str) -> bool:
    """Two-letter acronyms (PV, CT) are too cryptic to stand alone as a title."""
    return sum(ch.isalnum() for ch in name) >= 3


def _name_candidates(text: str, max_words: int) -> list[_Candidate]:
    found: list[_Candidate] = []
    lowered = text.lower()
    for match in _matches(_INTRO, text, lowered, ("we ", "this ", "our ")):
        candidate = _name_from_object(_rest_of_sentence(text, match.end()), max_words)
        if candidate:
            found.append(_Candidate(candidate[0], candidate[1], match.start()))
    for match in _matches(_REMEDY, text, lowered, ("to ",)):
        candidate = _name_from_object(_rest_of_sentence(text, match.end()), max_words)
        if candidate:
            found.append(_Candidate(candidate[0], MEDIUM, match.start()))
    for match in _matches(_RESULTING, text, lowered, ("resulting", "proposed")):
        name = _resulting_name(_rest_of_sentence(text, match.end()).split(), max_words)
        if name:
            found.append(_Candidate(name, MEDIUM, match.start()))
    for match in _matches(_VIA, text, lowered, (" via ", " through ")):
        run = _title_run(_rest_of_sentence(text, match.end()).split(), max_words)  # only with an appositive
        if run:
            found.append(_Candidate(run[0], MEDIUM, match.start()))
    for pattern, coined_only, keys in _MARKERS:
        for match in _matches(pattern, text, lowered, keys):
            candidate = _name_after_marker(_rest_of_sentence(text, match.end()), coined_only, max_words)
            if candidate:
                found.append(_Candidate(candidate[0], candidate[1], match.start()))
    opening = _OPENING_NAME.match(text)
    if opening and looks_coined(opening.group(1)):
        found.append(_Candidate(trim_token(opening.group(1)), STRONG, 0))
    return found


def _matches(pattern: re.Pattern[str], text: str, lowered: str, keys: tuple[str, ...]) -> list[re.Match[str]]:
    """Matches that start a word; skips the scan when no key word occurs (regex scans dominate the cost)."""
    if not any(key in lowered for key in keys):
        return []
    return [m for m in pattern.finditer(text) if m.start() == 0 or not text[m.start() - 1].isalnum()]


def _repository_names(abstract: str) -> list[_Candidate]:
    """A coined repository name in a code link; the weakest hint, used only when nothing else names the work."""
    found = []
    lowered = abstract.lower()
    for match in _matches(_REPO, abstract, lowered, ("github.com/", "gitlab.com/")):
        name = match.group(1).removesuffix(".git").rstrip(".")
        if looks_coined(name):
            found.append(_Candidate(name, WEAK, match.start()))
    return found


def _rest_of_sentence(text: str, start: int) -> str:
    rest = text[start:]
    end = SENTENCE_END.search(rest)
    return rest[: end.start() + 1] if end else rest


def _name_from_object(obj: str, max_words: int) -> tuple[str, int] | None:
    """The name in what follows "we propose": ``FedSSM, which``, ``the Adaptive Memory Agent (AdaMEM)``..."""
    words = obj.split()
    while words and words[0].lower() in ARTICLES:
        words = words[1:]
    if not words:
        return None
    if _name_like(words[0]) and not words[0].startswith("("):
        run = _title_run(words[:4], max_words)  # "BFCL Audio, a benchmark" keeps both words
        return (run[0], STRONG) if run else (trim_token(words[0]), STRONG)
    acronym = _defined_acronym(words)
    if acronym:
        return acronym, STRONG
    run = _title_run(words, max_words)
    if run:
        return run
    return _coined_in_noun_phrase(words)


def _defined_acronym(words: list[str], window: int = 16) -> str | None:
    """A parenthesised short name right after the long one: ``Linear Feature Path Minimization (LFPM)``.

    Skipped when it abbreviates a lowercase phrase after a preposition, since that names the task or
    domain ("confidence estimation in computed tomography (CT)"), not the contribution.
    """
    for i, word in enumerate(words[:window]):
        if not word.startswith("("):
            if word.endswith(","):  # past the name: "Caracal, a novel ... (MHF) module" is a part
                return None
            continue
        inner = trim_token(word.split(")")[0])
        if not (_name_like(inner) and _long_enough(inner)):
            continue
        if _abbreviates_a_topic(words[:i]):
            continue
        return inner
    return None


def _abbreviates_a_topic(before: list[str]) -> bool:
    long_form: list[str] = []
    for word in reversed(before):
        if word.lower() in PREPOSITIONS:
            return bool(long_form) and all(w[:1].islower() for w in long_form)
        long_form.append(word)
    return False


def _title_run(words: list[str], max_words: int) -> tuple[str, int] | None:
    """A run of Capitalised words ended by an appositive: ``Reward-Shaping Control Variates, a new family``."""
    run: list[str] = []
    ended_by = ""
    i = 0
    while i < len(words) and not ended_by:
        word, i = words[i], i + 1
        if word.startswith("("):
            close = _closing(words, i - 1)
            inner = trim_token(word)
            if not run or close is None or (close == i - 1 and _name_like(inner) and _long_enough(inner)):
                return None
            # skip a cryptic "(LC)" or a spelled-out "(Multi-Round Agentic RAG)" inside the name
            i = close + 1
            ended_by = words[close][-1] if words[close][-1] in ",.;:" else ""
            continue
        is_connector = bool(run) and word.lower() in _CONNECTORS and i < len(words) and _is_capitalised(words[i])
        is_head = bool(run) and word.rstrip(",.;:").lower() in _HEAD_NOUNS
        if not (_is_capitalised(word) or is_connector or is_head):
            i -= 1
            break
        run.append(trim_token(word))
        ended_by = word[-1] if word[-1] in ",.;:" else ""
        if is_head and not ended_by:
            break
    if not run or len(run) > max_words or run[-1].lower() in _CONNECTORS:
        return None
    following = words[i].lower() if i < len(words) else ""
    if ended_by == ",":
        appositive = following in _APPOSITIVE_NEXT or following.endswith("ing")
    else:
        appositive = ended_by == "." or not following or following in {"which", "that", "—"}
    if not appositive or (len(run) == 1 and not _name_like(run[0]) and (ended_by != "," or is_generic(run[0]))):
        return None
    strength = STRONG if len(run) == 1 or any(looks_coined(w) for w in run) else MEDIUM
    return " ".join(run), strength


def _resulting_name(words: list[str], max_words: int) -> str | None:
    """The name after "the resulting" / "the proposed": a coined run ("FedSSM"), or proper names with the noun
    they qualify ("Dirac-Frenkel-Onsager dynamics"); None for ordinary words ("the proposed method")."""
    run: list[str] = []
    for word in words[:max_words]:
        if not _is_capitalised(word) or word.startswith("("):
            break
        run.append(trim_token(word))
        if word[-1] in ",.;:)":
            break
    if not run or len(run) == len(words) or words[len(run) - 1][-1] in ",.;:)":
        return " ".join(run) if run and any(looks_coined(w) for w in run) else None
    if any(looks_coined(w) for w in run):
        return " ".join(run)
    noun = trim_token(words[len(run)])
    proper_names = len(run) >= 2 or "-" in run[0]  # "Dirac-Frenkel-Onsager", "Kalman Bucy": names of people
    if not proper_names or not noun.isalpha() or noun.lower() in PREPOSITIONS | ARTICLES | AUXILIARIES:
        return None
    return " ".join([*run, noun]) if len(run) < max_words else None


def _closing(words: list[str], start: int, limit: int = 12) -> int | None:
    """Index of the word that closes the parenthesis opened at ``words[start]``."""
    for j in range(start, min(len(words), start + limit)):
        if ")" in words[j]:
            return j
    return None


def _coined_in_noun_phrase(words: list[str]) -> tuple[str, int] | None:
    """``a lightweight PoLar prediction network``: a coined word inside the object's noun phrase."""
    for word in words:
        if word.lower() in PREPOSITIONS or word.lower() in {"which", "that", "to"}:
            break
        if looks_coined(word):
            return trim_token(word), MEDIUM
        if word[-1:] in ",;:.":
            break
    return None


def _name_after_marker(rest: str, coined_only: bool, max_words: int) -> tuple[str, int] | None:
    """What follows "called", "named", "termed", "we term" or "our method,"."""
    words = rest.split()
    if not words:
        return None
    if looks_coined(words[0]) or (not coined_only and _is_acronym(words[0])):
        return trim_token(words[0]), STRONG
    if coined_only:
        return None
    capitalised = _is_capitalised(words[0])
    phrase: list[str] = []
    for i, word in enumerate(words[: max_words + 1]):
        if word.startswith("(") or word.lower() in {"which", "where", "that", "and", "—", "to"}:
            break
        is_connector = word.lower() in _CONNECTORS and i + 1 < len(words) and _is_capitalised(words[i + 1])
        if capitalised and phrase and not (_is_capitalised(word) or is_connector):
            break  # "we term Neural Graph Dispersion avoids ...": the name is the Capitalised run
        phrase.append(trim_token(word))
        if word[-1:] in ",.;:)":
            break
    if not phrase or len(phrase) > min(max_words, MAX_TERM_WORDS) or not _HAS_LETTER.search(phrase[0]):
        return None
    return " ".join(phrase), MEDIUM
