"""Text as people read it: LaTeX and Markdown markup of abstracts made plain for display.

Abstracts come with the markup their authors wrote: ``\\textsc{RepCore}``, ``$\\texttt{(CTDG-SSM)}$``,
``Q\\&A``, ``0.910$\\pm$0.008``, ``**consensus**``. Stored text is never changed (ids, offsets, highlighted
evidence and search all work on it); ``readable`` is applied where text is shown or quoted to a reader.
It only removes markup it recognises and leaves anything else as written, so it never loses words.
"""

from __future__ import annotations

import re

# Commands whose argument is the text to show (font and text-mode wrappers).
_WRAPPERS = ("textsc", "textbf", "textit", "texttt", "textrm", "textsf", "textup", "textnormal", "text", "emph",
             "mathrm", "mathbf", "mathit", "mathtt", "mathsf", "mathcal", "mathbb", "operatorname", "underline",
             "url", "boldsymbol", "bm")
_WRAPPER = re.compile(r"\\(?:" + "|".join(_WRAPPERS) + r")\s*\{([^{}]*)\}|\\(?:" + "|".join(_WRAPPERS) + r")\s+(?=\w)")
_GROUP_FONT = re.compile(r"\{\\(?:em|bf|it|sc|tt|rm|sf)\s+([^{}]*)\}")  # {\em behavioral robustness}
_SYMBOLS = {
    "pm": "±", "times": "×", "cdot": "·", "rightarrow": "→", "to": "→", "leftarrow": "←", "Rightarrow": "⇒",
    "leq": "≤", "le": "≤", "geq": "≥", "ge": "≥", "neq": "≠", "approx": "≈", "sim": "~", "infty": "∞",
    "subset": "⊂", "subseteq": "⊆", "in": "∈", "circ": "∘", "ell": "ℓ", "log": "log", "exp": "exp",
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε", "eta": "η",
    "theta": "θ", "lambda": "λ", "mu": "μ", "pi": "π", "sigma": "σ", "tau": "τ", "phi": "φ", "omega": "ω",
    "Delta": "Δ", "Omega": "Ω", "ldots": "…", "dots": "…", "cdots": "⋯",
}
_SYMBOL = re.compile(r"\\(" + "|".join(sorted(_SYMBOLS, key=len, reverse=True)) + r")(?![A-Za-z])")
_ESCAPED = re.compile(r"\\([%&_#$]|\{|\})")
# A tie ("Fig.~3", "Table~2"), not the "~" that "$\\sim$" becomes ("$2\\sim3\\times$" -> "2~3×", "$\\sim$5%").
_SPACING = re.compile(r"\\[,;:! ]|(?<=[A-Za-z.])~(?=\d)")
# Inline math between single dollars on one line; a lone "$5" price is left alone.
_MATH = re.compile(r"(?<![\\$])\$(?!\s)([^$\n]{1,200}?)(?<![\s\\])\$(?=(\d)?)")
_NUMBER = re.compile(r"[\d.,\s-]*")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
# *emphasis* ("the *self-consistency* principle", "multim***o***dal"), not a footnote mark ("0.05*").
_ITALIC = re.compile(r"(?<![*\\])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?!\*)")
_SUPER_SUB = re.compile(r"([\^_])\{([^{}]*)\}")


def readable(text: str) -> str:
    """``text`` without the LaTeX and Markdown markup a reader would otherwise see (see the module docstring)."""
    if not any(ch in text for ch in "\\$*_{"):
        return text
    for _ in range(3):  # math inside math: "$\textit{Spherical $\mathrm{SO}(3)$-Equivariant}$", the inner first
        plain = _MATH.sub(_math_or_prices, text)
        if plain == text:
            break
        text = plain
    text = _plain_commands(text)
    text = _BOLD.sub(r"\2", text)
    text = _ITALIC.sub(r"\1", text)
    return text


def _math_or_prices(match: re.Match[str]) -> str:
    if match.group(2) and _NUMBER.fullmatch(match.group(1)):
        return match.group(0)  # "$5-$10": two prices, not math
    return _plain_math(match.group(1))


def _plain_math(math: str) -> str:
    math = _plain_commands(math)
    math = _SUPER_SUB.sub(lambda m: ("^" if m.group(1) == "^" else "_") + m.group(2), math)
    return math.replace("{", "").replace("}", "")


def _plain_commands(text: str) -> str:
    # Symbols first: in "\rightarrow\text{LLM}" the arrow's name ends where the next command begins.
    text = _SYMBOL.sub(lambda m: _SYMBOLS[m.group(1)], text)
    for _ in range(3):  # nested wrappers: \textbf{\textit{x}}
        unwrapped = _GROUP_FONT.sub(r"\1", _WRAPPER.sub(lambda m: m.group(1) or "", text))
        if unwrapped == text:
            break
        text = unwrapped
    text = _SPACING.sub(" ", text)
    return _ESCAPED.sub(r"\1", text)
