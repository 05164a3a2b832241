"""``paperchat topics`` and ``paperchat related``: in-process over an index built with the fake embedder, and
once as a user runs them on the bundled corpus (slow: real model)."""

from __future__ import annotations

import io
import json
import re

import pytest

from rag.corpus.load import load_corpus
from rag.exports.papers import CSV_COLUMNS
from tests.conftest import BUNDLED_CORPUS, FakeEmbedder
from ui.cli.main import main


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """The bundled corpus indexed with the fake embedder."""
    from rag.components import Components
    from rag.settings import load_settings

    folder = tmp_path_factory.mktemp("cli-corpus")
    Components(load_settings(data_dir=folder), embedder=FakeEmbedder(), warn=lambda _l: None).ingest_files(
        [BUNDLED_CORPUS])
    return folder


@pytest.fixture
def cli(data_dir, monkeypatch, capsys):
    for key in [k for k in __import__("os").environ if k.startswith("PAPERCHAT_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PAPERCHAT_DATA_DIR", str(data_dir))

    def run(*argv):
        code = main(list(argv), parts={"embedder": FakeEmbedder()})
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def abstracts() -> dict[str, str]:
    return {p.paper_id: p.abstract for p in load_corpus([BUNDLED_CORPUS], namespace_under=BUNDLED_CORPUS).papers}


def words_of(text: str) -> set[str]:
    return set(re.findall(r"[^\W_]+(?:-[^\W_]+)*", text.lower()))


def check_topics(payload: dict) -> None:
    """Every paper of the bundled corpus in exactly one topic; labels made of words of the topic's abstracts."""
    texts = abstracts()
    listed = [p["paper_id"] for t in payload["topics"] for p in t["papers"]]
    assert sorted(listed) == sorted(texts) and payload["papers"] == 76
    for topic in payload["topics"]:
        assert topic["size"] == len(topic["papers"]) and topic["label"] == ", ".join(topic["terms"])
        assert topic["central"] == [p["paper_id"] for p in topic["papers"][:3]]
        words = set().union(*(words_of(texts[p["paper_id"]]) for p in topic["papers"]))
        assert topic["terms"] and set(topic["terms"]) <= words


def test_topics_json_and_text(cli):
    code, out, err = cli("topics", "--json")
    assert code == 0, err
    payload = json.loads(out)
    check_topics(payload)
    code, text, _ = cli("topics")
    assert code == 0
    first = payload["topics"][0]
    assert text.splitlines()[0] == f"Topic 1: {first['label']}  ({first['size']} papers)"
    assert f"  * {first['papers'][0]['title']}  [{first['papers'][0]['label']}]" in text
    assert text.rstrip().endswith(f"76 papers in {len(payload['topics'])} topics; * = most central")


def test_related_lists_the_nearest_papers_with_what_they_share(cli):
    code, out, err = cli("related", "000_dcbf1b5d2daaeff5.txt#1", "--k", "2", "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["paper"]["title"] == "FedSSM" and len(payload["related"]) == 2
    assert all(r["paper_id"] != "000_dcbf1b5d2daaeff5.txt#1" and "shared words: " in r["shares"]
               for r in payload["related"])
    code, text, _ = cli("related", "000_dcbf1b5d2daaeff5.txt#1", "--k", "2")
    lines = text.splitlines()
    assert lines[0] == "Papers related to FedSSM:" and lines[1].startswith(f"1. {payload['related'][0]['title']}  [")
    assert lines[2] == f"   {payload['related'][0]['shares']}"
    # By its title or short name, as typed: the same list.
    for named in ("FedSSM", "fed ssm", "  fedssm "):
        code, by_name, err = cli("related", named, "--k", "2", "--json")
        assert code == 0 and json.loads(by_name) == payload, err
    code, _out, err = cli("related", "FedSSMM")
    assert code == 1 and "no paper with id 'FedSSMM'" in err


@pytest.mark.parametrize("question", ["Which papers are most similar to FedSSM?", "what else is like fed ssm?",
                                      "papers related to the FedSSM paper"])
def test_asked_in_chat_which_papers_are_like_one_the_answer_lists_its_nearest_cited(cli, question):
    code, out, err = cli("related", "000_dcbf1b5d2daaeff5.txt#1", "--k", "5", "--json")
    nearest = [r["title"] for r in json.loads(out)["related"]]
    code, out, err = cli("ask", question, "--extractive", "--json")
    assert code == 0, err
    answer = json.loads(out)
    lines = answer["answer"].splitlines()
    assert lines[0].startswith("The papers nearest to FedSSM [1]") and not answer["refused"]
    assert [line.split(" [")[0].removeprefix("- ") for line in lines[1:]] == nearest  # as `paperchat related`
    assert [c["title"] for c in answer["citations"]] == ["FedSSM", *nearest]


FEDSSM_TURN = [{"role": "user", "content": "What is FedSSM?"},
               {"role": "assistant", "content": "FedSSM selects clients with state space models [1]."}]


def test_follow_ups_that_compare_it_with_a_named_paper_or_ask_what_is_like_it(cli, tmp_path):
    batch = tmp_path / "follow_ups.jsonl"
    batch.write_text("".join(json.dumps({"id": ident, "question": q, "history": FEDSSM_TURN}) + "\n" for ident, q in [
        ("compare", "how does it compare to Fed-Kalter?"), ("like", "what else is like it?"),
        ("detail", "what were its results?")]))
    code, out, err = cli("ask", "--batch", str(batch), "--json", "--extractive")
    assert code == 0, err
    answers = {row["id"]: row for row in map(json.loads, out.splitlines())}
    # "it" is the paper the conversation was about; the named one is answered from its own abstract beside it
    compare = answers["compare"]
    assert [c["title"] for c in compare["citations"]] == ["FedSSM", "Fed-Kalter"] and not compare["refused"]
    assert compare["answer"].startswith("- FedSSM: ") and "\n- Fed-Kalter: " in compare["answer"]
    assert answers["like"]["answer"].startswith("The papers nearest to FedSSM [1]")
    assert [c["title"] for c in answers["detail"]["citations"]] == ["FedSSM"]


def test_a_likeness_question_with_more_to_it_is_not_answered_by_nearness_alone(cli):
    code, out, err = cli("ask", "Are there papers like FedSSM that use graph neural networks?", "--extractive",
                         "--json")
    assert code == 0, err
    assert not json.loads(out)["answer"].startswith("The papers nearest to")


@pytest.mark.parametrize("paper_id", ["nope", "000_dcbf1b5d2daaeff5.txt#999"])
def test_an_unknown_paper_id_is_one_line_saying_how_to_find_ids(cli, paper_id):
    code, out, err = cli("related", paper_id)
    assert code != 0 and out == ""
    assert err.strip().count("\n") == 0 and "paperchat search QUESTION --json" in err and repr(paper_id) in err


@pytest.mark.slow
def test_topics_on_the_bundled_corpus_as_a_user_runs_it(bundled_index):
    import shutil

    from store.layout import topics_dir
    from tests.ui.test_cli import run

    first = run(["topics", "--json"], bundled_index)
    assert first.returncode == 0, first.stderr
    check_topics(json.loads(first.stdout))
    second = run(["topics", "--json"], bundled_index)
    assert second.stdout == first.stdout  # the same output on a second run (the saved copy)
    shutil.rmtree(topics_dir(bundled_index / "lexical" / "paperchat"))
    rebuilt = run(["topics", "--json"], bundled_index)
    assert rebuilt.stdout == first.stdout  # and when built again from the index
    related = run(["related", "000_dcbf1b5d2daaeff5.txt#1", "--json", "--k", "3"], bundled_index)
    assert related.returncode == 0, related.stderr
    assert json.loads(related.stdout)["related"][0]["title"] == "FedVPA-GP"  # the other federated-learning paper


# --- export, filters, ask --markdown ------------------------------------------------------------------------


def test_export_all_as_csv_to_a_file(cli, tmp_path):
    import csv

    target = tmp_path / "papers.csv"
    code, out, err = cli("export", "all", "-o", str(target))
    assert code == 0 and out == "" and f"wrote 76 papers to {target} (csv)" in err
    rows = list(csv.DictReader(target.open(encoding="utf-8")))
    assert sorted(r["paper_id"] for r in rows) == sorted(abstracts())
    assert {r["venue"] for r in rows} == {"ICML 2026"} and {r["year"] for r in rows} == {"2026"}


def test_export_a_topic_as_bibtex(cli):
    from tests.rag.test_exports import parse_bibtex

    _, topics, _ = cli("topics", "--json")
    second = json.loads(topics)["topics"][1]
    code, out, err = cli("export", "--topic", "2", "--format", "bibtex")
    assert code == 0, err
    entries = parse_bibtex(out)
    assert [fields["title"] for _kind, _key, fields in entries] == ["{" + p["title"] + "}" for p in second["papers"]]
    assert len({key for _kind, key, _f in entries}) == len(entries)


def test_export_a_search_with_filters(cli):
    import csv
    import io

    code, out, _ = cli("export", "--query", "federated learning clients", "--k", "2")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == 2
    code, found, _ = cli("search", "federated learning clients", "--k", "2", "--json")
    assert [r["paper_id"] for r in rows] == [h["paper_id"] for h in json.loads(found)["hits"]]  # what a search finds
    code, out, err = cli("export", "--query", "federated learning clients", "--source", "003_8199ee2742a631b5.txt")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and rows and {r["source"] for r in rows} == {"003_8199ee2742a631b5.txt"}
    code, out, err = cli("export", "--where", "year>=2027")
    assert code == 0 and out.strip() == ",".join(CSV_COLUMNS)  # the header only
    assert "no paper matches" in err


def test_search_keeps_only_the_hits_that_pass_the_filters(cli):
    code, out, err = cli("search", "federated learning", "--json", "--k", "3", "--where", "title~fed",
                         "--source", "002_735305cd7294d037.txt")
    assert code == 0, err
    hits = json.loads(out)["hits"]
    assert [h["title"] for h in hits] == ["Fed-Kalter"] and hits[0]["rank"] == 1
    code, out, _ = cli("search", "federated learning", "--json", "--k", "3", "--where", "title~e")
    hits = json.loads(out)["hits"]
    assert len(hits) == 3 and all("e" in h["title"].lower() for h in hits) and [h["rank"] for h in hits] == [1, 2, 3]


@pytest.mark.parametrize(("argv", "says"), [
    (["export", "--where", "yeer>=2024"], "unknown filter field 'yeer'"),
    (["search", "federated", "--where", "year~20"], "the field 'year' takes a year"),
    (["export", "--source", "nope.txt"], "no paper in the index comes from 'nope.txt'; its files: 000_"),
    (["export", "--topic", "99"], "no topic 99: the index has topics 1 to 6"),
    (["ask", "federated", "--extractive", "--where", "yeer>=2024"], "unknown filter field 'yeer'"),
    (["ask", "federated", "--extractive", "--where", "venue>2024"], "the field 'venue' takes = != or ~"),
    (["ask", "federated", "--extractive", "--source", "nope.txt"], "no paper in the index comes from 'nope.txt'"),
    (["ask", "federated", "--extractive", "--where", "year>=2027"], "no paper of the 76 in the index passes year>="),
    (["ask", "federated", "--extractive", "--where", "author~Bengio"], "no paper in the index records authors"),
    (["ask", "--batch", "-", "--markdown"], "--markdown writes one answer"),
    # Filters no paper passes: search says so as ask does, not "no matching papers" (an export writes its header).
    (["search", "federated", "--where", "year>=2027"], "no paper of the 76 in the index passes year>="),
    (["search", "federated", "--json", "--where", "author~Bengio"], "no paper in the index records authors"),
])
def test_bad_export_and_filter_input_is_one_line(cli, argv, says):
    code, out, err = cli(*argv)
    assert code != 0 and out == "" and says in err and err.strip().count("\n") == 0


def test_ask_markdown_links_markers_to_references(cli):
    from markdown_it import MarkdownIt

    code, out, err = cli("ask", "which papers work on federated learning?", "--extractive", "--markdown")
    assert code == 0, err
    html = MarkdownIt("commonmark").render(out)
    linked = set(re.findall(r'<a href="#ref-(\d+)">', html))
    assert linked and all(f'<a id="ref-{n}"></a>' in html for n in linked)
    assert out.startswith("# which papers work on federated learning?") and "## References" in out


def test_ask_answers_from_the_papers_that_pass_the_filters(cli):
    question = "which papers work on federated learning?"
    code, out, err = cli("ask", question, "--extractive", "--json")
    assert code == 0, err
    everywhere = json.loads(out)
    assert {c["source"] for c in everywhere["citations"]} - {"002_735305cd7294d037.txt"}  # other files too
    code, out, err = cli("ask", question, "--extractive", "--json", "--source", "002_735305cd7294d037.txt")
    assert code == 0, err
    narrowed = json.loads(out)
    assert narrowed["citations"] and narrowed["sources"]
    assert {h["source"] for h in narrowed["sources"]} == {"002_735305cd7294d037.txt"}
    assert {c["source"] for c in narrowed["citations"]} == {"002_735305cd7294d037.txt"}
    code, out, err = cli("ask", "how many papers are about federated learning?", "--extractive", "--json",
                         "--where", "title~fed")
    assert code == 0, err
    counted = json.loads(out)
    assert counted["sources"] and all("fed" in h["title"].lower() for h in counted["sources"])


@pytest.mark.parametrize("typed", ["quit", "exit", "/quit", "/exit", ":q", "Quit", "  exit  "])
def test_chat_ends_when_the_user_types_quit_not_answering_it_as_a_question(cli, monkeypatch, typed):
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{typed}\nwhat does FedSSM propose?\n"))
    code, out, err = cli("chat", "--extractive")
    assert code == 0, err
    assert "quit, an empty line or Ctrl-D ends the chat" in out.splitlines()[0]
    assert "abstracts do not answer" not in out and "FedSSM" not in out  # neither it nor the next line answered


def test_the_search_prompt_ends_on_quit_too(cli, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("exit\nfederated learning\n"))
    code, out, _ = cli("prompt")
    assert code == 0 and "quit, an empty line or Ctrl-D to end" in out and "1. " not in out


@pytest.mark.parametrize("question", ["¿Qué artículos tratan sobre aprendizaje federado?", "hello", "the second one?"])
def test_a_question_with_a_fixed_reply_starts_no_model_and_says_no_model_answered(cli, monkeypatch, tmp_path,
                                                                                  question):
    # The embedded model is the answer writer, and it cannot start (no model file): nothing may try to.
    monkeypatch.setenv("PAPERCHAT_LLM", "embedded")
    monkeypatch.setenv("PAPERCHAT_LOCAL_MODEL_PATH", str(tmp_path / "no-model.gguf"))
    code, out, err = cli("ask", question)
    assert code == 0 and err == "", err
    assert out.rstrip().endswith("answered by: paperchat (a fixed reply: nothing searched, no model)")
    code, out, err = cli("ask", question, "--markdown")
    assert code == 0 and err == "" and "*Answered by paperchat (a fixed reply: nothing searched, no model).*" in out
