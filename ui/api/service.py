"""The API and the MCP server in front of the web UI, on the same port (``paperchat serve``).

``ServiceRoutes`` sends requests under ``/v1`` to the OpenAI-compatible API (``ui.api.v1``) and under
``/mcp`` to the MCP server (``ui.api.mcp_server``), everything else to the UI. ``RequireKey`` guards both
with ``PAPERCHAT_API_KEY``; without a key they are open on a loopback address and refused on any other.
"""

from __future__ import annotations

import contextlib
import hmac
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from rag.components import Components
from ui.api.answers import AnswerGate
from ui.api.errors import APIError
from ui.api.v1 import API_PREFIX, build_api

MCP_PATH = "/mcp"


# --- access ---------------------------------------------------------------------------------------------------


def key_matches(header: str, key: str) -> bool:
    """``Authorization: Bearer <key>``, compared in constant time."""
    scheme, _, token = header.strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode())


class RequireKey:
    """Every HTTP request needs ``Authorization: Bearer <key>``; ``key=None`` lets everything through."""

    def __init__(self, app: ASGIApp, key: str | None) -> None:
        self.app = app
        self.key = key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.key is not None:
            header = Headers(scope=scope).get("authorization", "")
            if not key_matches(header, self.key):
                message = ("invalid API key: send the server's PAPERCHAT_API_KEY as 'Authorization: Bearer KEY'"
                           if header else "missing API key: send 'Authorization: Bearer KEY' "
                                          "(the server's PAPERCHAT_API_KEY)")
                error = APIError(401, message, kind="authentication_error", code="invalid_api_key",
                                 headers={"WWW-Authenticate": "Bearer"})
                await error.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Refuse:
    """Answers every request with one error (the API is off: served on an open address without a key)."""

    def __init__(self, error: APIError) -> None:
        self.error = error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.error.response()(scope, receive, send)


class ServiceRoutes:
    """ASGI middleware in front of the Gradio app: ``/v1...`` -> the API, ``/mcp...`` -> MCP, the rest -> UI."""

    def __init__(self, app: ASGIApp, *, api: ASGIApp, mcp: ASGIApp | None = None) -> None:
        self.app = app
        self.api = api
        self.mcp = mcp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            if path == API_PREFIX or path.startswith(API_PREFIX + "/"):
                await self.api(scope, receive, send)
                return
            if self.mcp is not None and (path == MCP_PATH or path.startswith(MCP_PATH + "/")):
                await self.mcp(scope, receive, send)
                return
        await self.app(scope, receive, send)


# --- the service: API + MCP beside the UI ---------------------------------------------------------------------


@dataclass
class Service:
    """What ``ui.serve`` puts in front of the web UI: its middleware, and a lifespan for the MCP sessions."""

    middleware: list
    lifespan: object
    message: str


def build_service(components: Components, *, host: str, loopback: bool, mcp: bool = True) -> Service:
    """The API (and MCP server) over ``components``, guarded by ``PAPERCHAT_API_KEY``.

    Without a key they are open on a loopback address and refused on any other (with a message saying
    how to set one): an open address would hand the index and the LLM endpoint to anyone who can reach it.
    """
    from starlette.middleware import Middleware

    settings = components.settings
    key = settings.api_key.get_secret_value() if settings.api_key is not None else None
    gate = AnswerGate(settings.api_max_concurrent, settings.api_max_waiting)
    if key is None and not loopback:
        refusal = APIError(
            403, f"the API and MCP server are off: paperchat serves on {host}, reachable from other machines, "
                 "without a key; set PAPERCHAT_API_KEY=<a long random string> and restart", kind="permission_error",
            code="api_disabled",
        )
        refuse = Refuse(refusal)
        return Service([Middleware(ServiceRoutes, api=refuse, mcp=refuse)], None,
                       f"{refusal.message} (e.g. PAPERCHAT_API_KEY=$(python -c 'import secrets; "
                       "print(secrets.token_urlsafe(32))'))")
    api = RequireKey(build_api(components, gate, max_body_bytes=settings.api_max_body_bytes), key)
    mcp_app = lifespan = None
    if mcp:
        from ui.api.mcp_server import build_mcp_server

        server = build_mcp_server(components, gate)
        mcp_asgi = server.streamable_http_app(
            streamable_http_path=MCP_PATH, host=host, max_request_body_size=settings.api_max_body_bytes,
            transport_security=_transport_security(key is not None),
        )
        mcp_app = RequireKey(mcp_asgi, key)

        @contextlib.asynccontextmanager
        async def lifespan(app):
            async with server.session_manager.run():
                yield

    guard = "each request needs PAPERCHAT_API_KEY" if key else "open on loopback, no key set"
    return Service([Middleware(ServiceRoutes, api=api, mcp=mcp_app)], lifespan,
                   f"OpenAI-compatible API at {API_PREFIX}" + (f", MCP at {MCP_PATH}" if mcp else "") + f" ({guard})")


def _transport_security(keyed: bool):
    """With a key, any Host may reach MCP (the key guards it); without, the SDK's localhost-only default."""
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(enable_dns_rebinding_protection=False) if keyed else None
