"""Helpers for tests that start real processes: a free port (defined in tests/fake_llm.py), a clean child
environment, a clean stop."""

from __future__ import annotations

import os
import subprocess

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


def stop_process(proc: subprocess.Popen, timeout: float = 20.0) -> int | None:
    """SIGTERM (a clean shutdown), then SIGKILL if it does not go; returns the exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode
