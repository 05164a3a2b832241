"""Text for a BibTeX field: the LaTeX it already holds kept, the characters LaTeX would misread escaped.

Abstracts and titles from arXiv and the like are written in LaTeX (``\\emph{surprise}``, ``4.5\\%``, ``$x_1$``),
others in plain text (``50% of runs``, ``a_b``). Escaping every special character turned the first kind into
``\\textbackslash{}emph\\{surprise\\}``; escaping none lets ``%`` comment out the rest of a field. The rule:

* a backslash starts LaTeX and is kept with what follows (``\\emph``, ``\\%``, ``\\'e``, ``\\,``); before a
  space, a digit or the end it is a plain backslash (``\\textbackslash{}``);
* ``$...$`` and ``$$...$$`` in one brace group are math and kept, when the ``$`` that opens comes before a
  non-space and the one that closes after one (``costs $5 and $10`` is money: its second ``$`` follows a
  space; ``0.91$\\pm$0.01`` is math); any other ``$`` is ``\\$``;
* ``{`` and ``}`` that pair up are kept; one that does not is ``\\textbraceleft{}``/``\\textbraceright{}``
  (``\\{`` would not do: BibTeX counts it, so the field's braces would not balance);
* ``%``, ``&`` and ``#`` are escaped everywhere (in math too, where they are errors or a comment); ``_`` and
  ``^`` outside math; ``~`` between two words is LaTeX's tie (``Fig.~1``), elsewhere ``\\textasciitilde{}``;
* ``\\\\`` (a line break) gets a space after it, so that no reader takes ``\\\\}`` for an escaped brace;
* control characters are written out as every command shows them (``\\textbackslash{}x1b``).
"""

from __future__ import annotations

import re

from rag.text import terminal_safe

_TOKEN = re.compile(
    r"\\[A-Za-z]+"  # a command: \emph, \alpha
    r"|\\[^\sA-Za-z0-9]"  # a control symbol: \% \{ \' \, \\ \$
    r"|\\"  # a backslash before a space, a digit or the end: a plain one
    r"|\$\$|\$"  # math delimiters (or money)
    r"|[{}%&#_^~]"  # characters LaTeX reads specially
    r"|[^\\${}%&#_^~]+"  # plain text
)
_ALWAYS_ESCAPED = {"%": r"\%", "&": r"\&", "#": r"\#"}
_OUTSIDE_MATH = {"_": r"\_", "^": r"\^{}"}
_TIE_BEFORE = re.compile(r"[\w.,;:)]\Z")  # "Fig.~1", "et~al.": a tie joins two words
_TIE_AFTER = re.compile(r"[\w\\(]")


def latex_escape(text: str) -> str:
    """``text`` (whitespace made single spaces) as the value of a BibTeX field in braces: valid BibTeX, and the
    LaTeX it holds kept (the module's docstring gives the rule)."""
    tokens = _TOKEN.findall(" ".join(text.split()))
    unpaired = _unpaired_braces(tokens, ("{", "}")) | _unpaired_braces(tokens, ("\\{", "\\}"))
    math = _math_delimiters(tokens, unpaired)
    out = []
    in_math = False
    for i, token in enumerate(tokens):
        if i in math:
            in_math = not in_math
            out.append(token)
        elif i in unpaired:
            out.append(r"\textbraceleft{}" if token.endswith("{") else r"\textbraceright{}")
        elif token in ("$", "$$"):
            out.append(r"\$" * len(token))
        elif token == "\\":
            out.append(r"\textbackslash{}")
        elif token in _ALWAYS_ESCAPED:
            out.append(_ALWAYS_ESCAPED[token])
        elif token in _OUTSIDE_MATH:
            out.append(token if in_math else _OUTSIDE_MATH[token])
        elif token == "~":
            out.append(token if in_math or _is_tie(tokens, i) else r"\textasciitilde{}")
        elif token == "\\\\":  # a line break; a space after it, so no reader takes "\\{" or "\\}" for an escaped brace
            out.append(token + ("" if i + 1 < len(tokens) and tokens[i + 1][0].isspace() else " "))
        elif token.startswith("\\") or token in ("{", "}"):
            out.append(token)
        else:  # plain text: its control characters written out, their backslash a plain one
            out.append(terminal_safe(token).replace("\\", r"\textbackslash{}"))
    return "".join(out)


def _math_delimiters(tokens: list[str], unpaired_braces: set[int]) -> set[int]:
    """The indexes of the ``$``/``$$`` tokens that open or close math. As in LaTeX, a ``$`` pairs with one in
    the same brace group (``$\\textit{a $x$ b}$``); an opener comes before a non-space, a closer after one."""
    found: set[int] = set()
    opener: list[int | None] = [None]  # per brace group: the index of its ``$`` or ``$$`` waiting for a closer
    for i, token in enumerate(tokens):
        if token == "{" and i not in unpaired_braces:
            opener.append(None)
        elif token == "}" and i not in unpaired_braces:
            opener.pop()
        elif token in ("$", "$$"):
            waiting = opener[-1]
            if waiting is not None and tokens[waiting] == token and _closes(tokens, i):
                found |= {waiting, i}
                opener[-1] = None
            elif _opens(tokens, i):
                opener[-1] = i
    return found


def _opens(tokens: list[str], i: int) -> bool:
    return i + 1 < len(tokens) and (tokens[i] == "$$" or not tokens[i + 1][0].isspace())


def _closes(tokens: list[str], i: int) -> bool:
    return tokens[i] == "$$" or not tokens[i - 1][-1].isspace()


def _unpaired_braces(tokens: list[str], pair: tuple[str, str]) -> set[int]:
    """The indexes of the opening or closing ``pair`` tokens that have no partner."""
    opened: list[int] = []
    unpaired: set[int] = set()
    for i, token in enumerate(tokens):
        if token == pair[0]:
            opened.append(i)
        elif token == pair[1]:
            if opened:
                opened.pop()
            else:
                unpaired.add(i)
    return unpaired | set(opened)


def _is_tie(tokens: list[str], i: int) -> bool:
    before = tokens[i - 1] if i > 0 else ""
    after = tokens[i + 1] if i + 1 < len(tokens) else ""
    return bool(_TIE_BEFORE.search(before) and _TIE_AFTER.match(after))
