"""The README's command reference is the argument parser's (``python -m ui.cli.reference``)."""

from __future__ import annotations

from tests.conftest import PROJECT_ROOT
from ui.cli.main import build_parser
from ui.cli.reference import reference


def test_readme_command_reference_matches_the_parser():
    readme = (PROJECT_ROOT / "README.md").read_text()
    block = readme.split("<!-- commands:start -->")[1].split("<!-- commands:end -->")[0]
    assert block.strip() == reference().strip(), "run `python -m ui.cli.reference` and paste it into README.md"


def test_the_reference_names_every_command_and_option():
    text = reference()
    parser = build_parser()
    for command in ("ingest", "search", "ask", "chat", "doctor", "serve", "mcp", "prompt", "stats", "eval"):
        args = parser.parse_args([command] + (["x"] if command == "eval" else []))
        assert f"**`paperchat {command}" in text
        for option in vars(args):
            if option not in ("command", "func", "open_browser", "question", "paths", "file"):
                assert f"`--{option}" in text, (command, option)
    assert "`--open`" in text and "[-h]" not in text
