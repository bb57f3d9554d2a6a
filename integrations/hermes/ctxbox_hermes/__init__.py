"""ctxbox for Hermes Agent: a context-engine plugin that runs ctxbox's
sandboxed engines (`keep-recent`, `lossless`, `delegating` or any `.wasm`
engine) through one `ctxbox serve` sidecar per Hermes process.

Hermes loads it as a directory plugin (this folder as
`$HERMES_HOME/plugins/ctxbox/`, with `plugin.yaml`) or through the
`hermes_agent.plugins` entry point `ctxbox`; either way it calls `register`.
Configuration: the `ctxbox:` section of config.yaml (README.md).
"""

from __future__ import annotations

import atexit
import threading

from .config import ConfigError, Settings, read_settings
from .console import say_once
from .install import binary_problem, check_in_background, doctor_argv

__all__ = ["register", "read_settings", "Settings", "ConfigError"]

_bridges: dict = {}
_bridges_lock = threading.Lock()


def register(ctx) -> None:
    """Hermes's plugin entry: registers the `ctxbox` context engine, set up
    from config.yaml (raises `ConfigError` naming a bad key). A bad setting,
    a missing or mismatched binary, and what `ctxbox doctor` finds wrong are
    also said on the console, once (`console.say_once`)."""
    from hermes_cli.config import load_config

    config = load_config()
    try:
        settings = read_settings(config.get("ctxbox"))
    except ConfigError as error:
        say_once(f"{error}; the plugin is not loaded and Hermes compresses with its own compressor")
        raise
    check_installation(settings)
    from .engine import CtxboxEngine

    bridge = shared_bridge(settings)
    ctx.register_context_engine(CtxboxEngine(bridge, config.get("compression")))
    # Hermes's end of a turn (after its tool loop): the turn reaches the engine.
    ctx.register_hook("post_llm_call", bridge.turn_ended)


def check_installation(settings: Settings, say=None) -> None:
    """Says (once) what is wrong with the binary now, and what `ctxbox
    doctor` finds wrong with the engine and data directory, in the
    background."""
    say = say or say_once
    problem = binary_problem(settings.ctxbox_bin)
    if problem:
        say(problem)
        return
    check_in_background(
        doctor_argv(settings.ctxbox_bin, settings.engine, settings.data_dir, settings.config_file), say)


def shared_bridge(settings: Settings):
    """The process's bridge (and sidecar) for `settings`, made on first use."""
    from .bridge import Bridge

    with _bridges_lock:
        bridge = _bridges.get(settings)
        if bridge is None:
            bridge = _bridges[settings] = Bridge(settings)
        return bridge


@atexit.register
def _close_sidecars() -> None:
    # The sidecars exit when their stdin closes anyway; this makes it prompt.
    with _bridges_lock:
        for bridge in _bridges.values():
            bridge.sidecar.close()
