"""`@client.tool`: record the calls of a Python tool function in the current session."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar, cast

from .session import current_session

P = ParamSpec("P")
R = TypeVar("R")

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class _Binder:
    """Maps a call's positional arguments to parameter names, from a signature read once."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        try:
            parameters = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):  # builtins without a signature
            parameters = []
        self.names = [p.name for p in parameters if p.kind in _POSITIONAL]
        self.var_positional = next((p.name for p in parameters if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
        # A method decorated in its class body receives self/cls first; the model never sent it.
        self.skip = self.names[0] if self.names and self.names[0] in ("self", "cls") else None

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if not args:
            return dict(kwargs)
        names = self.names
        arguments = dict(zip(names, args, strict=False))
        if len(args) > len(names):
            arguments[self.var_positional or "args"] = list(args[len(names) :])
        if self.skip is not None:
            arguments.pop(self.skip, None)
        arguments.update(kwargs)
        return arguments


def _output(result: Any) -> Any:
    # Text and JSON containers are converted on the exporter thread; other objects are made text
    # here, while they are known to be in the state the model saw.
    if result is None or isinstance(result, str | dict | list | tuple):
        return result
    return str(result)


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def tool(fn: Callable[P, R], name: str | None = None) -> Callable[P, R]:
    """Wrap `fn` so that each call made while a session is current is recorded as a tool call:
    name, arguments, duration, output (or status "error" and the exception's text, re-raised)."""
    tool_name = name or getattr(fn, "__name__", None) or "tool"
    bind = _Binder(fn)

    if inspect.iscoroutinefunction(fn):
        async_fn = cast(Callable[..., Coroutine[Any, Any, Any]], fn)

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            session = current_session()
            if session is None:
                return await async_fn(*args, **kwargs)
            arguments = bind(args, kwargs)
            started = time.perf_counter()
            try:
                result = await async_fn(*args, **kwargs)
            except BaseException as exc:
                session.tool_call(
                    tool_name,
                    arguments,
                    status="error",
                    error=_error_text(exc),
                    duration_ms=(time.perf_counter() - started) * 1000.0,
                )
                raise
            session.tool_call(
                tool_name, arguments, _output(result), duration_ms=(time.perf_counter() - started) * 1000.0
            )
            return result

        return cast(Callable[P, R], async_wrapper)

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        session = current_session()
        if session is None:
            return fn(*args, **kwargs)
        arguments = bind(args, kwargs)
        started = time.perf_counter()
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            session.tool_call(
                tool_name,
                arguments,
                status="error",
                error=_error_text(exc),
                duration_ms=(time.perf_counter() - started) * 1000.0,
            )
            raise
        session.tool_call(tool_name, arguments, _output(result), duration_ms=(time.perf_counter() - started) * 1000.0)
        return result

    return wrapper
