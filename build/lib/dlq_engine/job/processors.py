"""Loading the team's processor from ``processor.entrypoint`` (``module:function``).

The driver loads it once before the query starts, so a typo stops the job before anything is
consumed, with a message naming the entrypoint. Workers load it again, once per process.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

_cache: dict[str, Callable[..., Any]] = {}


class ProcessorLoadError(RuntimeError):
    pass


def load_processor(entrypoint: str) -> Callable[..., Any]:
    if entrypoint in _cache:
        return _cache[entrypoint]
    module_name, _, function_name = entrypoint.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise ProcessorLoadError(
            f"spec.processor.entrypoint {entrypoint!r}: cannot import module {module_name!r}: "
            f"{type(error).__name__}: {error}"
        ) from error
    function: Callable[..., Any] | None = getattr(module, function_name, None)
    if function is None or not callable(function):
        raise ProcessorLoadError(
            f"spec.processor.entrypoint {entrypoint!r}: module {module_name!r} has no callable "
            f"{function_name!r}"
        )
    _cache[entrypoint] = function
    return function
