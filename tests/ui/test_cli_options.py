"""Command-line options checked where they are parsed, each error about the option the user gave."""

from __future__ import annotations

import pytest

from ui.cli.main import build_parser


@pytest.mark.parametrize("command", [["search", "q"], ["ask", "q"], ["related", "p"], ["export"], ["prompt", "q"]])
@pytest.mark.parametrize("k, said", [("500", "500 papers is out of range: choose 1 to 100"),
                                     ("0", "0 papers is out of range"), ("ten", "expected a whole number")])
def test_k_out_of_range_is_an_error_about_the_option(command, k, said, capsys):
    # Not "invalid settings: PAPERCHAT_TOP_K ... (fix the environment variable)": the user set no variable.
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([*command, "--k", k])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"paperchat {command[0]}: error: argument --k: {said}" in err
    assert f"usage: paperchat {command[0]}" in err  # the command's usage, not the top-level one


def test_after_an_answer_the_nearest_uncited_papers_are_shown_and_the_rest_counted(capsys):
    from rag.types import Answer, Hit
    from ui.cli.answers import OTHERS_SHOWN, show_sources

    hits = [Hit(rank=i, paper_id=f"p{i}", title=f"Paper {i}", score=1.0, source="s.txt", ordinal=i, text="t")
            for i in range(1, 31)]
    show_sources(Answer(question="q", answer="a", sources=hits, refused=True))
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("- ")] == [
        f"- Paper {i}  ({hits[i - 1].label})" for i in range(1, OTHERS_SHOWN + 1)]
    assert f"and {30 - OTHERS_SHOWN} more (`--json` lists every paper consulted)" in out
