"""Keeping secrets out of what paperchat shows: URL credentials and API keys, however a server echoes them.

``redact_url`` drops ``user:password@`` from a URL (the UI's settings field and page config, ``doctor``,
labels, messages and log lines all show URLs through it). ``redact_secret`` removes a secret from text a
server sent back: verbatim, in any letter case, spaced or dotted out (``s k - 1 2 3``), percent-encoded,
and base64-encoded at any alignment (a 401 that quotes the ``Authorization`` header it got).
"""

from __future__ import annotations

import base64
import re
from urllib.parse import quote, unquote, urlsplit, urlunsplit

MASK = "***"
_MIN_ENCODED = 8  # shorter base64 fragments would match innocent text
_USERINFO = re.compile(r"(?<=://)[^/?#@\s]*@")


def redact_url(url: str) -> str:
    """``url`` without any ``user:password@`` in it (also for URLs too malformed to parse)."""
    try:
        parts = urlsplit(url)
        has_credentials = parts.username is not None or parts.password is not None
    except ValueError:
        return _USERINFO.sub("", url)
    if not has_credentials:
        return _USERINFO.sub("", url)  # "@" in an odd place: nothing before it is shown either
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def url_credentials(url: str) -> tuple[str, str] | None:
    """The ``(user, password)`` of a URL, if it has any."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.username is None and parts.password is None:
        return None
    return unquote(parts.username or ""), unquote(parts.password or "")


def redact_secret(text: str, secret: str | None) -> str:
    """``text`` with every recognisable copy of ``secret`` replaced by ``***``.

    A secret under 8 characters (a short URL password) is only matched as it is: its disguised forms would
    match ordinary words; one under 4 characters is not looked for at all.
    """
    if not secret or not text or len(secret) < 4:
        return text
    if len(secret) < 8:
        return text.replace(secret, MASK)
    for pattern in _secret_patterns(secret):
        text = pattern.sub(MASK, text)
    return text


def redact_secrets(text: str, secrets: list[str | None]) -> str:
    for secret in secrets:
        text = redact_secret(text, secret)
    return text


def _secret_patterns(secret: str) -> list[re.Pattern[str]]:
    # Spaced out: any run of up to 3 spaces or punctuation between the characters, any case.
    gap = r"[\s\W_]{0,3}"
    patterns = [re.compile(gap.join(re.escape(ch) for ch in secret), re.IGNORECASE)]
    encoded = quote(secret, safe="")
    if encoded != secret:
        patterns.append(re.compile(re.escape(encoded), re.IGNORECASE))
    for fragment in _base64_fragments(secret.encode("utf-8")):
        patterns.append(re.compile(re.escape(fragment)))
    return patterns


def _base64_fragments(raw: bytes) -> set[str]:
    """The base64 text that ``raw`` always turns into, whatever bytes come before and after it.

    Base64 works on groups of 3 bytes, so ``raw`` is encoded one of three ways depending on where it
    starts; the characters that depend only on ``raw`` are those of the groups it fills completely.
    """
    fragments: set[str] = set()
    for shift in range(3):
        padded = bytes(shift) + raw
        whole_groups = len(padded) // 3
        first = 1 if shift else 0
        if whole_groups <= first:
            continue
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(padded[: whole_groups * 3]).decode("ascii")[first * 4 :]
            if len(text) >= _MIN_ENCODED:
                fragments.add(text)
    return fragments
