"""The `ctxbox serve` process: started on first use, spoken to in
newline-delimited JSON (integrations/openclaw/PROTOCOL.md), restarted with
back-off when it dies. Every call has its own deadline; a call the sidecar
cannot answer in time raises, and the caller answers Hermes without it.

Thread-safe: Hermes may call engines from several threads (the gateway runs
many agents in one process), and they all share one sidecar.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import subprocess
import threading
import time
from typing import Any, Callable, Optional

from .console import say_once
from .install import hello_problems

PROTOCOL_VERSION = 2
"""The newest protocol version this client speaks: 2 adds the engine's
tools (`tools`, `callTool`). A server that speaks only 1 refuses it with
`unsupported-protocol`; the client then says hello with 1 and offers no
engine tools."""

PROTOCOL_VERSIONS = (2, 1)
"""Every version this client speaks, newest first."""

CLIENT_NAME = "ctxbox-hermes"

# The sidecar is told to give up this much before the client does, so its
# answer (often the guard's fallback) arrives rather than our timeout.
_SERVER_MARGIN_S = 0.25
# A reverse request without a usable `deadlineMs` gets this long.
_REVERSE_DEFAULT_DEADLINE_MS = 10_000
# How long `hello` may take on a fresh process.
_HELLO_TIMEOUT_S = 10.0
# A process that stayed up this long earns a fresh back-off.
_HEALTHY_UPTIME_S = 30.0
# Error codes that mean "try again shortly": the session is in another
# host's call (`session-busy`), or the sidecar is at its in-flight limit
# (`overloaded`). Retried with doubling pauses while the call's time allows.
_RETRIED_CODES = frozenset({"session-busy", "overloaded"})
_RETRY_FIRST_PAUSE_S = 0.05
_RETRY_MAX_PAUSE_S = 1.0
# A retry is made only if this much of the call's time is left after the pause.
_RETRY_MIN_ATTEMPT_S = 0.3

logger = logging.getLogger(__name__)


class SidecarError(Exception):
    """An error the sidecar answered with (`code` as in PROTOCOL.md)."""

    def __init__(self, code: str, message: str, data: Any = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class SidecarUnavailable(Exception):
    """The sidecar is down, restarting, or did not answer in time."""


class ReverseError(Exception):
    """What a reverse-call handler raises: the error answer's `code`
    (`unavailable`, `failed`, `cancelled`) and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


ReverseHandler = Callable[[dict, float], dict]
"""Answers one reverse request: its `params` and deadline (`time.monotonic()`)
in, its `result` out; raises `ReverseError`."""


class _Pending:
    """One request waiting for its answer."""

    __slots__ = ("done", "result", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: Optional[BaseException] = None


class Sidecar:
    """One supervised `ctxbox serve` process, shared by every engine object."""

    def __init__(
        self,
        argv: list[str],
        cwd: Optional[str] = None,
        log: Optional[Callable[[str], None]] = None,
        initial_backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
        reverse: Optional[dict[str, ReverseHandler]] = None,
    ) -> None:
        self._argv = list(argv)
        self._reverse = dict(reverse or {})
        self._answering: dict[str, bool] = {}  # reverse requests in work: id -> cancelled
        self._cwd = cwd
        self._log = log or _log_line
        self._initial_backoff_s = initial_backoff_s
        self._max_backoff_s = max_backoff_s
        self._backoff_s = initial_backoff_s
        self._lock = threading.Lock()  # process, pending map, ids
        self._outbox: Optional[queue.SimpleQueue] = None  # lines for the current process
        self._start_lock = threading.Lock()  # one launch at a time
        self._process: Optional[subprocess.Popen] = None
        self._ready = False
        self._pending: dict[int, _Pending] = {}
        self._next_id = 1
        self._restart_at = 0.0
        self._restart_timer: Optional[threading.Timer] = None
        self._closed = False
        self.generation = 0
        """Bumped at every start: session state held by an older process is gone."""
        self.deaths = 0
        """How many times the process has exited unasked."""
        self.protocol: Optional[int] = None
        """The protocol version the running process agreed to in `hello`."""
        self.hello_answer: dict = {}
        """What the running process answered to `hello` (its version, engines, …)."""

    @property
    def pid(self) -> Optional[int]:
        """The running process's id, if one runs."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def call(self, method: str, params: dict, timeout_s: float) -> Any:
        """Calls `method` and returns its result. Raises `SidecarError` for an
        error answer, `SidecarUnavailable` when the sidecar is down,
        restarting, or does not answer within `timeout_s` (the request is
        then cancelled on the sidecar). A `session-busy` or `overloaded`
        answer is retried with doubling pauses while the time allows."""
        deadline = time.monotonic() + timeout_s
        pause = _RETRY_FIRST_PAUSE_S
        tries = 0
        while True:
            tries += 1
            try:
                return self._attempt(method, params, deadline, timeout_s)
            except SidecarError as error:
                if error.code not in _RETRIED_CODES:
                    raise
                if deadline - time.monotonic() < pause + _RETRY_MIN_ATTEMPT_S:
                    raise SidecarError(error.code, f"{error.message} (tried {tries} times)",
                                       error.data) from None
                time.sleep(pause)
                pause = min(pause * 2, _RETRY_MAX_PAUSE_S)

    def _attempt(self, method: str, params: dict, deadline: float, timeout_s: float) -> Any:
        """One try of `call`, within the call's `deadline`."""
        self._start(deadline)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SidecarUnavailable(f"{method}: the sidecar did not start in time")
        deadline_ms = max(1, int((remaining - _SERVER_MARGIN_S) * 1000))
        request_id, pending = self._send(method, params, deadline_ms)
        if not pending.done.wait(remaining):
            with self._lock:
                still_waiting = self._pending.pop(request_id, None) is not None
            if still_waiting:
                self._send_quietly("cancel", {"target": request_id})
            raise SidecarUnavailable(f"{method} timed out after {timeout_s * 1000:.0f} ms")
        if pending.error is not None:
            raise pending.error
        return pending.result

    def close(self) -> None:
        """Stops the process and refuses further calls."""
        with self._lock:
            self._closed = True
            process, self._process = self._process, None
            outbox, self._outbox = self._outbox, None
            if self._restart_timer is not None:
                self._restart_timer.cancel()
        if process is None:
            return
        if outbox is not None:
            outbox.put(None)  # the writer closes the sidecar's stdin: it exits
        try:
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=2)

    # -- starting and stopping ---------------------------------------------

    def _start(self, deadline: float) -> None:
        """Makes sure a process runs and has answered `hello`."""
        if self._ready and self._process is not None:
            return
        if not self._start_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise SidecarUnavailable("the sidecar is starting")
        try:
            if self._closed:
                raise SidecarUnavailable("the sidecar is closed")
            if self._ready and self._process is not None:
                return
            wait = self._restart_at - time.monotonic()
            if wait > 0:
                raise SidecarUnavailable(f"the sidecar is restarting (in {wait * 1000:.0f} ms)")
            self._launch(deadline)
        finally:
            self._start_lock.release()

    def _launch(self, deadline: float) -> None:
        started_at = time.monotonic()
        try:
            process = subprocess.Popen(
                self._argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self._cwd,
                # Its own session: a Ctrl-C meant for Hermes does not kill it;
                # it exits when our end of its stdin closes.
                start_new_session=True,
            )
        except OSError as error:
            self._died(None, f"cannot run {self._argv[0]}: {error}", started_at)
            raise SidecarUnavailable(f"cannot run {self._argv[0]}: {error}") from error
        outbox: queue.SimpleQueue = queue.SimpleQueue()
        with self._lock:
            self._process = process
            self._outbox = outbox
            self.generation += 1
        threading.Thread(target=_write_lines, args=(process, outbox), daemon=True,
                         name="ctxbox-sidecar-stdin").start()
        threading.Thread(target=self._read_answers, args=(process, started_at), daemon=True,
                         name="ctxbox-sidecar-stdout").start()
        threading.Thread(target=self._read_log, args=(process,), daemon=True,
                         name="ctxbox-sidecar-stderr").start()
        hello_deadline = time.monotonic() + min(_HELLO_TIMEOUT_S, max(0.001, deadline - time.monotonic()))
        try:
            protocol = self._negotiate(hello_deadline)
        except SidecarUnavailable:
            process.kill()
            raise
        self.protocol = protocol
        for problem in hello_problems(self._argv[0], self.hello_answer):
            say_once(problem)
        self._ready = True

    def _negotiate(self, deadline: float) -> int:
        """`hello` in the newest version this client speaks, then, refused
        with `unsupported-protocol`, in the newest one the server lists
        (`data.supported`) that this client speaks too."""
        try:
            protocol = self._hello(PROTOCOL_VERSION, deadline)
        except SidecarError as error:
            supported = error.data.get("supported") if isinstance(error.data, dict) else None
            older = [v for v in PROTOCOL_VERSIONS
                     if v < PROTOCOL_VERSION and isinstance(supported, list) and v in supported]
            if error.code != "unsupported-protocol" or not older:
                raise SidecarUnavailable(f"the sidecar did not answer hello: {error}") from None
            try:
                protocol = self._hello(older[0], deadline)
            except SidecarError as again:
                raise SidecarUnavailable(f"the sidecar did not answer hello: {again}") from None
        if protocol not in PROTOCOL_VERSIONS:
            raise SidecarUnavailable(f"the sidecar speaks protocol {protocol}, not one of {list(PROTOCOL_VERSIONS)}")
        return protocol

    def _hello(self, version: int, deadline: float) -> Any:
        """Says hello asking for `version`; returns the version the server
        agreed to. Raises `SidecarError` for a refusal, `SidecarUnavailable`
        when no answer comes by `deadline`."""
        timeout = max(0.001, deadline - time.monotonic())
        params = {"protocol": version, "client": CLIENT_NAME}
        if version >= 2:
            # The reverse calls this client answers, by method (`complete`).
            params["capabilities"] = sorted(self._reverse)
        request_id, pending = self._send("hello", params, int(timeout * 1000))
        if not pending.done.wait(timeout):
            with self._lock:
                self._pending.pop(request_id, None)
            raise SidecarUnavailable("the sidecar did not answer hello: no answer in time")
        if isinstance(pending.error, SidecarError):
            raise pending.error
        if pending.error is not None:
            raise SidecarUnavailable(f"the sidecar did not answer hello: {pending.error}")
        answer = pending.result if isinstance(pending.result, dict) else {}
        self.hello_answer = answer
        return answer.get("protocol")

    def _died(self, process: Optional[subprocess.Popen], why: str, started_at: float) -> None:
        """Fails what waited on `process` and sets the back-off. A process
        that had served is restarted when the back-off ends; one that never
        did (a missing binary, a failed handshake) only at the next call
        after it, so a broken setup does not spin."""
        with self._lock:
            if process is not None and self._process is not process:
                return
            had_served = self._ready
            self._process = None
            self._ready = False
            self.protocol = None
            if self._outbox is not None:
                self._outbox.put(None)
                self._outbox = None
            pending, self._pending = self._pending, {}
            if self._closed:
                return
            self.deaths += 1
            if time.monotonic() - started_at > _HEALTHY_UPTIME_S:
                self._backoff_s = self._initial_backoff_s
            delay = self._backoff_s
            self._backoff_s = min(self._backoff_s * 2, self._max_backoff_s)
            self._restart_at = time.monotonic() + delay
            timer = None
            if had_served:
                timer = threading.Timer(delay, self._restart)
                timer.daemon = True
                self._restart_timer = timer
        for waiting in pending.values():
            waiting.error = SidecarUnavailable(f"the sidecar {why}")
            waiting.done.set()
        self._log(f"ctxbox sidecar {why}; next start in {delay * 1000:.0f} ms")
        if timer is not None:
            timer.start()

    def _restart(self) -> None:
        try:
            self._start(time.monotonic() + _HELLO_TIMEOUT_S)
        except SidecarUnavailable as error:
            self._log(f"ctxbox sidecar restart failed: {error}")

    # -- the wire -------------------------------------------------------------

    def _send(self, method: str, params: dict, deadline_ms: int) -> tuple[int, _Pending]:
        pending = _Pending()
        with self._lock:
            request_id = self._next_id
            self._next_id += 1
            self._pending[request_id] = pending
        request = {"id": request_id, "method": method, "params": params, "deadlineMs": deadline_ms}
        if not self._write(request):
            with self._lock:
                self._pending.pop(request_id, None)
            raise SidecarUnavailable("the sidecar is not running")
        return request_id, pending

    def _send_quietly(self, method: str, params: dict) -> None:
        with self._lock:
            request_id = self._next_id
            self._next_id += 1
        self._write({"id": request_id, "method": method, "params": params})

    def _write(self, request: dict) -> bool:
        """Queues `request` for the sidecar; a caller never waits on the
        pipe (a stalled sidecar must cost it its timeout, no more)."""
        outbox = self._outbox
        if outbox is None:
            return False
        outbox.put(_line(request))
        return True

    def _read_answers(self, process: subprocess.Popen, started_at: float) -> None:
        for line in process.stdout:
            self._receive(line)
        code = process.wait()
        self._died(process, f"exited ({_describe_exit(code)})", started_at)

    def _receive(self, line: bytes) -> None:
        try:
            answer = json.loads(line)
        except ValueError:
            self._log(f"ctxbox sidecar wrote a line that is not JSON: {line[:200]!r}")
            return
        request_id = answer.get("id") if isinstance(answer, dict) else None
        if isinstance(answer, dict) and "method" in answer:
            self._reverse_request(answer)
            return
        if not isinstance(request_id, int):
            error = answer.get("error") if isinstance(answer, dict) else None
            if error:
                self._log(f"ctxbox sidecar: {error.get('code')}: {error.get('message')}")
            return
        with self._lock:
            pending = self._pending.pop(request_id, None)
        if pending is None:
            return
        error = answer.get("error")
        if error:
            pending.error = SidecarError(str(error.get("code")), str(error.get("message")), error.get("data"))
        else:
            pending.result = answer.get("result")
        pending.done.set()

    def _reverse_request(self, request: dict) -> None:
        """A reverse request (PROTOCOL.md, version 2): answered in a thread of
        its own by its handler, so answers to this client's requests keep
        flowing meanwhile; a method without one gets `unavailable` at once
        (the server asks only for what `hello` listed, but need not wait out
        its deadline if it does). A `cancel` (id null) needs no answer: the
        request it names is answered no more."""
        request_id = request.get("id")
        method = request.get("method")
        params = request.get("params") if isinstance(request.get("params"), dict) else {}
        if request_id is None:
            target = params.get("target")
            with self._lock:
                if method == "cancel" and isinstance(target, str) and target in self._answering:
                    self._answering[target] = True
            return
        if not isinstance(request_id, str):
            self._log(f"ctxbox sidecar sent a request with an id that is not a string: {str(request_id)[:80]}")
            return
        handler = self._reverse.get(method) if isinstance(method, str) else None
        outbox = self._outbox
        if handler is None or outbox is None:
            self._log(f"ctxbox sidecar asked for {method!r}, which this plugin does not answer")
            self._write({"id": request_id, "error": {
                "code": "unavailable", "message": f"{CLIENT_NAME} does not answer {method}"}})
            return
        deadline_ms = request.get("deadlineMs")
        if not isinstance(deadline_ms, (int, float)) or isinstance(deadline_ms, bool) or deadline_ms < 0:
            deadline_ms = _REVERSE_DEFAULT_DEADLINE_MS
        deadline = time.monotonic() + deadline_ms / 1000
        with self._lock:
            self._answering[request_id] = False
        threading.Thread(target=self._answer_reverse, args=(handler, request_id, params, deadline, outbox),
                         daemon=True, name=f"ctxbox-reverse-{method}").start()

    def _answer_reverse(self, handler: ReverseHandler, request_id: Any, params: dict, deadline: float,
                        outbox: queue.SimpleQueue) -> None:
        """Runs `handler` and writes its answer to the process that asked
        (`outbox`), unless the server cancelled the request meanwhile."""
        try:
            answer: dict = {"id": request_id, "result": handler(params, deadline)}
        except ReverseError as error:
            answer = {"id": request_id, "error": {"code": error.code, "message": error.message}}
        except Exception as error:  # a bug in a handler must still answer
            logger.warning("ctxbox reverse call failed unexpectedly", exc_info=True)
            answer = {"id": request_id, "error": {"code": "failed", "message": f"{type(error).__name__}: {error}"}}
        with self._lock:
            cancelled = self._answering.pop(request_id, False)
        if not cancelled:
            outbox.put(_line(answer))

    def _read_log(self, process: subprocess.Popen) -> None:
        for line in process.stderr:
            self._log(_ANSI.sub("", line.decode("utf-8", "replace").rstrip())[:2000])


def _write_lines(process: subprocess.Popen, outbox: queue.SimpleQueue) -> None:
    """Writes queued lines to `process` until told to stop (`None`) or the
    pipe breaks; then closes its stdin, which makes the sidecar exit."""
    try:
        while (line := outbox.get()) is not None:
            process.stdin.write(line)
            process.stdin.flush()
    except (OSError, ValueError):
        pass
    finally:
        try:
            process.stdin.close()
        except (OSError, ValueError):
            pass


def _line(message: dict) -> bytes:
    """`message` as one protocol line."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _describe_exit(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"status {code}"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SEVERE = re.compile(r"\bWARN\b|\bERROR\b|^ctxbox sidecar")


def _log_line(line: str) -> None:
    """The sidecar's warnings (a quarantine, a fallback) are the operator's
    business; the rest is debug output."""
    if _SEVERE.search(line):
        logger.warning("%s", line)
    else:
        logger.debug("%s", line)


def serve_argv(binary: str, engine: str, data_dir: str, config_file: Optional[str]) -> list[str]:
    """The sidecar's command line."""
    argv = [binary, "serve", "--engine", engine, "--data-dir", data_dir]
    if config_file:
        argv += ["--config", config_file]
    return argv


def ensure_dir(path: str) -> str:
    """`path`, created if missing (the sidecar's working directory)."""
    os.makedirs(path, exist_ok=True)
    return path
