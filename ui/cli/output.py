"""The terminal of the commands: what they print on stdout (text with control characters shown, not
obeyed, and JSON lines) and the lines the interactive ones read. Status, warnings and errors go to stderr
through ``rag.text.say`` instead.
"""

from __future__ import annotations

from rag.text import clean_input, json_line_safe, terminal_safe


def show(*parts: object, **kwargs) -> None:
    """``print`` for text that may hold corpus or model text: control characters are shown, not obeyed."""
    print(*(terminal_safe(str(part)) for part in parts), **kwargs)


def show_json(line: str, **kwargs) -> None:
    print(json_line_safe(line), **kwargs)


# What people type to leave a prompt (shells, Python, vim, chat apps): the end of the session, not a question.
QUIT_WORDS = frozenset({"quit", "exit", "/quit", "/exit", ":q", "quit()", "exit()"})


def read_line(prompt: str) -> str | None:
    """One line typed at ``prompt``, stripped; None when the user is done (an empty line, Ctrl-D or a word of
    ``QUIT_WORDS``)."""
    try:
        line = clean_input(input(prompt)).strip()
    except EOFError:
        return None
    return None if not line or line.lower() in QUIT_WORDS else line
