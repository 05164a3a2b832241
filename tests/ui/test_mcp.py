"""The MCP server with the ``mcp`` SDK's own client: over streamable HTTP at ``/mcp`` of a served app (one
per module, with an API key), and over stdio from ``paperchat mcp`` as a process (the CLI with the fake
embedder, ``tests.hardening.driver``)."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from tests.conftest import PROJECT_ROOT
from tests.ui.conftest import API_KEY, tiny_papers

SERVED_SETTINGS = {"api_key": API_KEY}
FEDSSM = "000_dcbf1b5d2daaeff5.txt#1"
QUESTION = "Which papers use state space models for client selection?"
TOOLS = {"search_papers", "ask", "get_paper", "list_papers"}

pytestmark = [pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]


async def exercise(client) -> dict:
    """List the tools and call each one; returns what came back, by tool."""
    from mcp.types import TextContent

    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    out = {"tools": tools}
    out["search"] = await client.call_tool("search_papers", {"query": QUESTION, "k": 3})
    out["ask"] = await client.call_tool("ask", {"question": QUESTION})
    first_cited = out["ask"].structured_content["history_entry"]
    out["follow_up"] = await client.call_tool("ask", {
        "question": "Does the first one predict training dynamics?",
        "history": [{"role": "user", "content": QUESTION}, first_cited]})
    # Ids are namespaced by the file they came from (a JSON Lines corpus: "PATH#id"): take FedSSM's from the search.
    fedssm = out["search"].structured_content["hits"][0]["paper_id"]
    out["paper"] = await client.call_tool("get_paper", {"paper_id": fedssm})
    out["missing"] = await client.call_tool("get_paper", {"paper_id": "no-such-paper"})
    out["list"] = await client.call_tool("list_papers", {"filter": "causal"})
    out["too_long"] = await client.call_tool("ask", {"question": "why " * 1200})
    out["resources"] = (await client.list_resources()).resources
    quoted = next(r for r in out["resources"] if r.name == fedssm)
    out["resource"] = await client.read_resource(str(quoted.uri))
    for result in (out["search"], out["ask"], out["paper"], out["list"]):
        assert not result.is_error, result
        assert isinstance(result.content[0], TextContent)
    return out


def check(out: dict, *, answer_starts: str, where: str) -> None:
    assert set(out["tools"]) >= TOOLS
    assert "question" in out["tools"]["ask"].input_schema["properties"]
    hits = out["search"].structured_content["hits"]
    fedssm = hits[0]["paper_id"]
    assert fedssm.endswith(FEDSSM) and len(hits) == 3
    assert out["search"].content[0].text.startswith(f"1. FedSSM ({where})")  # the readable place, not "file #n"
    assert f"FedSSM ({where})" in out["paper"].content[0].text

    asked = out["ask"].structured_content
    assert [c["paper_id"] for c in asked["citations"]][:1] == [fedssm]
    assert asked["citations"][0]["evidence"] and "support" in asked["citations"][0]
    assert asked["answer"].startswith(answer_starts)
    text = out["ask"].content[0].text
    assert "[1]" in text and f"Sources:\n[1] FedSSM — {where}" in text
    follow = out["follow_up"].structured_content
    assert follow["paperchat"]["sources"][0]["paper_id"] == fedssm  # "the first one" resolved

    assert out["paper"].structured_content["title"] == "FedSSM"
    assert "Multimodal Federated Learning" in out["paper"].content[0].text
    assert out["missing"].is_error and "no paper with id 'no-such-paper'" in out["missing"].content[0].text
    listed = out["list"].structured_content
    prefix = fedssm[: -len(FEDSSM)]  # the file's namespace, empty where the papers were added as they are
    assert [p["paper_id"] for p in listed["papers"]] == [prefix + "000_dcbf1b5d2daaeff5.txt#8"]
    assert listed["total"] == 6
    assert out["too_long"].is_error and "the limit is 4,000" in out["too_long"].content[0].text
    assert "Traceback" not in out["too_long"].content[0].text
    assert len(out["resources"]) == len(tiny_papers())
    resource = json.loads(out["resource"].contents[0].text)
    assert resource["paper_id"] == fedssm and resource["abstract"].startswith("Multimodal Federated Learning")


# --- streamable HTTP at /mcp ------------------------------------------------------------------------------------------


async def over_http(url: str, key: str | None) -> dict:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=120.0)) as http,
                Client(streamable_http_client(url, http_client=http)) as client):
        return await exercise(client)


def test_mcp_over_http_in_the_served_app(served_app):
    served_app.llm.reply = "FedSSM predicts training dynamics with state space models [1]."
    out = asyncio.run(over_http(served_app.url + "mcp", API_KEY))
    check(out, answer_starts="FedSSM predicts training dynamics with state space models [1].",
          where="ICML 2026 · #1 of file 000")


@pytest.mark.parametrize("key", [None, "wrong-key"])
def test_mcp_over_http_needs_the_key(served_app, key):
    import httpx

    response = httpx.post(served_app.url + "mcp", trust_env=False, headers={
        "Accept": "application/json, text/event-stream", **({"Authorization": f"Bearer {key}"} if key else {})},
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert response.status_code == 401 and response.json()["error"]["type"] == "authentication_error"
    with pytest.raises(Exception):  # noqa: B017 - the SDK wraps the 401 in its own (version-dependent) errors
        asyncio.run(asyncio.wait_for(over_http(served_app.url + "mcp", key), 30))


# --- stdio: `paperchat mcp` -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stdio_index(tmp_path_factory) -> str:
    """An index of the tiny corpus built by the CLI with the fake embedder (what the stdio server reads)."""
    from tests.hardening.conftest import run_driver

    folder = tmp_path_factory.mktemp("mcp-stdio")
    corpus = folder / "tiny.jsonl"
    corpus.write_text("".join(json.dumps({"id": p.paper_id, "title": p.title, "abstract": p.abstract}) + "\n"
                              for p in tiny_papers()), encoding="utf-8")
    done = run_driver(["ingest", str(corpus)], folder / "data")
    assert done.returncode == 0, done.stderr
    return str(folder / "data")


async def over_stdio(data_dir: str, errlog) -> dict:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tests.hardening.conftest import clean_env

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "tests.hardening.driver", "mcp", "--extractive"], cwd=str(PROJECT_ROOT),
        env=clean_env(PAPERCHAT_DATA_DIR=data_dir, PAPERCHAT_DENSE_WEIGHT="0.5"),  # fake embedder: see served_app
    )
    async with Client(stdio_client(server, errlog=errlog)) as client:
        return await exercise(client)


def test_paperchat_mcp_over_stdio(stdio_index, tmp_path):
    log = tmp_path / "stderr.txt"
    with log.open("w") as errlog:
        out = asyncio.run(asyncio.wait_for(over_stdio(stdio_index, errlog), 120))
    # Only FedSSM qualifies for the list (the probe abstract never mentions state space models): its sentences, [1].
    check(out, answer_starts="Multimodal Federated Learning (MMFL) addresses", where="#1 of tiny.jsonl")
    assert "Traceback" not in log.read_text()
