"""Helpers for tests that start real processes: a free port (defined in tests/fake_llm.py), a clean child
environment, a clean stop (the product's own, rag.llm.processes.stop_process)."""

from __future__ import annotations

import os

from rag.llm.processes import stop_process  # noqa: F401  (one definition, shared with the embedded LLM)
from tests.fake_llm import free_port  # noqa: F401  (one definition; that file must run standalone)


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child process, without the developer's paperchat, Gradio, OpenAI or test
    settings, offline, and with ``extra`` on top."""
    dropped = ("OPENAI_BASE_URL", "OPENAI_API_KEY")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PAPERCHAT_", "GRADIO_", "HARDENING_")) and k not in dropped}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False",
                "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    env.update(extra)
    return env
