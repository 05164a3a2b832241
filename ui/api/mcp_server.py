"""paperchat as an MCP server (the official ``mcp`` SDK): ``paperchat mcp`` over stdio, and the same server
over streamable HTTP at ``/mcp`` inside ``paperchat serve``.

Tools: ``search_papers(query, k)``, ``ask(question, history?)`` (the cited answer with its citations
checked against the abstracts), ``get_paper(paper_id)``, ``list_papers(filter?)``. Every paper is also a
resource, ``paper://<paper id, percent-encoded>``. Tool results carry a readable text and the same data
as structured content (``ask``: the citations as ``Answer.to_dict`` gives them).
"""

from __future__ import annotations

import json
from urllib.parse import quote

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent

from rag.components import MAX_TOP_K, Components
from rag.errors import PaperchatError, QueryError
from rag.types import Paper, Turn, as_messages
from ui.api import answers
from ui.api.answers import AnswerGate
from ui.shared.text import answer_text, filter_papers, place

PAPER_URI = "paper://{paper_id}"
MAX_LISTED = 500  # papers in one list_papers answer (and listed as resources); a filter narrows the rest

INSTRUCTIONS = (
    "paperchat answers questions about research papers from their abstracts, with citations checked against "
    "the abstracts. Use `ask` for an answer with [n] citations, `search_papers` to find papers, `get_paper` "
    "for one abstract, `list_papers` to browse."
)


def paper_uri(paper_id: str) -> str:
    return "paper://" + quote(paper_id, safe="")


def paper_dict(paper: Paper) -> dict:
    data = paper.to_dict()
    data["uri"] = paper_uri(paper.paper_id)
    return data


def _result(text: str, data: dict) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def build_mcp_server(components: Components, gate: AnswerGate | None = None) -> MCPServer:
    """The MCP server over ``components`` (the same parts the web UI and the API use)."""
    # log_level: the SDK configures the root logger; at INFO it would log every HTTP request of the process.
    server = MCPServer(name="paperchat", instructions=INSTRUCTIONS, version="0.1.0", log_level="WARNING")

    async def in_turn(function, *args):
        """Run a blocking call in a worker thread; answers wait for a slot of the shared gate."""
        try:
            if gate is None:
                return await anyio.to_thread.run_sync(function, *args)
            async with gate.turn():
                return await anyio.to_thread.run_sync(function, *args)
        except PaperchatError as error:
            raise ToolError(str(error)) from error

    @server.tool(title="Ask the papers")
    async def ask(question: str, history: list[dict] | None = None) -> CallToolResult:
        """Answer a question from the abstracts, with [n] citations checked against the cited abstracts.

        history: the earlier turns, [{"role": "user"|"assistant", "content": "..."}]; an assistant turn may
        carry "papers" (the paper ids it cited) so that follow-ups like "the second one" resolve.
        """
        try:
            read = answers.history_from(components, history)
            question_text = question.strip()
            if not question_text:
                raise QueryError("the question is empty: ask about the papers")
        except QueryError as error:
            raise ToolError(str(error)) from error

        def answer():
            pipeline = answers.pipeline_for(components, answers.DEFAULT_MODEL)
            return pipeline.answer(question_text, as_messages(read))

        final = await in_turn(answer)
        data = {"answer": final.answer, **answers.citation_fields(final)}
        data["history_entry"] = Turn.answered(final).to_dict()
        return _result(answer_text(final), data)

    _add_paper_tools(server, components, in_turn)
    _add_paper_resources(server, components)
    return server


def _add_paper_tools(server: MCPServer, components: Components, in_turn) -> None:
    """search_papers, get_paper, list_papers, and the ``paper://`` resource template."""

    @server.tool(title="Search papers")
    async def search_papers(query: str, k: int = 5) -> CallToolResult:
        """Find the papers whose abstracts best match a query. k: how many (1-20)."""
        if not 1 <= k <= MAX_TOP_K:
            raise ToolError(f"k must be from 1 to {MAX_TOP_K}")
        hits = await in_turn(components.retriever.search, query, k)
        lines = [f"{h.rank}. {h.title} ({place(h)}) id={h.paper_id} score={h.score:.3f}"
                 for h in hits]
        data = {"query": query, "hits": [{**h.to_dict(), "uri": paper_uri(h.paper_id)} for h in hits]}
        return _result("\n".join(lines) or "no matching papers", data)

    @server.tool(title="Get a paper")
    async def get_paper(paper_id: str) -> CallToolResult:
        """One paper's title, abstract and metadata, by its id (as search_papers and ask give it)."""
        found = await in_turn(components.store.get_papers, [paper_id])
        if paper_id not in found:
            raise ToolError(f"no paper with id {paper_id!r}: find ids with search_papers or list_papers")
        paper = found[paper_id]
        return _result(f"{paper.title} ({place(paper, components.settings.collection)})\n\n{paper.abstract}",
                       paper_dict(paper))

    @server.tool(title="List papers")
    async def list_papers(filter: str = "") -> CallToolResult:
        """The papers in the index (title, id, source), optionally only those whose title, abstract, authors,
        venue, year or file name contain every word of the filter."""
        papers = await in_turn(components.papers)
        matching = filter_papers(papers, filter or "")
        shown = matching[:MAX_LISTED]
        collection = components.settings.collection
        lines = [f"- {p.title} ({place(p, collection)}) id={p.paper_id}" for p in shown]
        if len(matching) > len(shown):
            lines.append(f"... {len(matching) - len(shown)} more: narrow the filter")
        data = {"total": len(papers), "matching": len(matching),
                "papers": [{"paper_id": p.paper_id, "title": p.title, "source": p.source, "ordinal": p.ordinal,
                            "uri": paper_uri(p.paper_id)} for p in shown]}
        return _result("\n".join(lines) or "no paper matches", data)

    @server.resource(PAPER_URI, name="paper", title="A paper's abstract", mime_type="application/json")
    def paper_resource(paper_id: str) -> str:
        found = components.store.get_papers([paper_id])
        if paper_id not in found:
            raise ValueError(f"no paper with id {paper_id!r}")
        return json.dumps(paper_dict(found[paper_id]), ensure_ascii=False)


def _add_paper_resources(server: MCPServer, components: Components) -> None:
    """Each paper as a listed resource (the first ``MAX_LISTED``; any paper reads through the template)."""
    from mcp.server.mcpserver.resources import FunctionResource

    try:
        papers = components.papers()[:MAX_LISTED]
    except PaperchatError:
        return  # the index cannot be read now: the tools say so when called
    for paper in papers:
        data = json.dumps(paper_dict(paper), ensure_ascii=False)
        server.add_resource(FunctionResource(
            uri=paper_uri(paper.paper_id), name=paper.paper_id, title=paper.title, mime_type="application/json",
            description=f"{paper.title} ({place(paper, components.settings.collection)})", fn=lambda data=data: data,
        ))


def run_stdio(components: Components) -> None:
    """Serve over stdio until the client closes it (``paperchat mcp``)."""
    settings = components.settings
    server = build_mcp_server(components, AnswerGate(settings.api_max_concurrent, settings.api_max_waiting))
    server.run("stdio")
