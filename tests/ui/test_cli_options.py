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
