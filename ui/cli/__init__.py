"""The ``paperchat`` command line: ``main`` (the parser and the entry point) and one module per group of
commands (the index, search, answers, doctor); ``reference`` prints the README's command reference."""
