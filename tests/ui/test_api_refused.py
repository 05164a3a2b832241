"""Served on an address other machines reach (0.0.0.0) without PAPERCHAT_API_KEY: the UI serves, the API and
the MCP server refuse every request and say how to set a key. One served app for the module."""

from __future__ import annotations

import httpx
import pytest

SERVED_SETTINGS = {"host": "0.0.0.0", "auth": "ann:s3cret"}

pytestmark = [pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]


def test_the_api_and_mcp_are_off_and_say_how_to_turn_them_on(served_app, capsys):
    for method, path in (("GET", "v1/models"), ("POST", "v1/chat/completions"), ("POST", "mcp")):
        response = httpx.request(method, served_app.url + path, json={}, trust_env=False,
                                 headers={"Authorization": "Bearer guess"})
        assert response.status_code == 403, path
        error = response.json()["error"]
        assert error["code"] == "api_disabled" and "set PAPERCHAT_API_KEY=" in error["message"]
    assert httpx.get(served_app.url, trust_env=False).status_code == 200  # the UI (behind its login) still serves


def test_the_start_up_message_says_so(served_app):
    from ui.api.service import build_service

    service = build_service(served_app.components, host="0.0.0.0", loopback=False)
    assert "the API and MCP server are off" in service.message and "PAPERCHAT_API_KEY" in service.message
