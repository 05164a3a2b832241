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


def test_eval_details_without_answers_says_it_needs_them(tmp_path, capsys):
    from ui.cli.main import main

    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "q", "gold": [{"file": "a.txt", "ordinal": 1}]}\n')
    code = main(["eval", str(questions), "--details", str(tmp_path / "out.jsonl")])
    err = capsys.readouterr().err
    assert code == 1 and err == ("paperchat: error: --details writes every answer: add --answers, e.g. paperchat "
                                 "eval FILE --answers --details answers.jsonl\n")
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(("content", "says"), [
    ("", "no questions in"), ('{"question": "q", "gold": []}\n', "has gold papers"),
    ('{"question": "q", "gold": [{"paper_id": "002_x.txt#19"}]}\n', "line 1: gold entry 1"),
])
def test_eval_of_a_file_it_cannot_measure_is_one_line_before_any_index_is_built(tmp_path, capsys, monkeypatch,
                                                                                content, says):
    from ui.cli.main import main

    monkeypatch.setenv("PAPERCHAT_DATA_DIR", str(tmp_path / "never-built"))
    questions = tmp_path / "q.jsonl"
    questions.write_text(content)
    code = main(["eval", str(questions)])
    err = capsys.readouterr().err
    assert code == 1 and says in err and err.count("\n") == 1 and not (tmp_path / "never-built").exists()


@pytest.mark.parametrize("command", ["ask", "search"])
def test_a_question_and_batch_together_is_one_usage_line_not_a_question_dropped(tmp_path, capsys, monkeypatch,
                                                                                command):
    from ui.cli.main import main

    monkeypatch.setenv("PAPERCHAT_DATA_DIR", str(tmp_path / "never-built"))
    batch = tmp_path / "q.jsonl"
    batch.write_text('{"question": "what is FedSSM?"}\n')
    code = main([command, "--batch", str(batch), "extra", "question"])
    err = capsys.readouterr().err
    assert code == 1 and err == (f"paperchat: error: give a question or --batch FILE, not both: put 'extra question' "
                                 f"in {batch} as {{\"question\": \"...\"}}, or drop --batch\n")
    assert not (tmp_path / "never-built").exists()
