"""Reading one mapping of a document field by field, each problem named by its path.

``FieldReader`` remembers which keys were read and refuses the rest (with a "did you mean"),
checks types, ranges and choices, and collects every problem instead of stopping at the first:
a person fixing a policy wants the whole list. The policy parser, the redrive parser and the
operator's DeadLetterPolicyClass parser all read their documents with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeVar, cast

from dlq_engine.model.durations import DurationError, parse_duration_ms
from dlq_engine.model.policy_types import (
    Issue,
)

T = TypeVar("T")
_MISSING: Final = object()


class _Fields:
    """Reads one mapping of the document, remembering which keys were used and every issue."""

    def __init__(self, raw: object, path: str, issues: list[Issue]) -> None:
        self.path = path
        self.issues = issues
        self.used: set[str] = set()
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            self.fail(path, f"must be a mapping, got {_kind(raw)}")
            raw = {}
        self.raw: Mapping[str, Any] = raw

    def fail(self, path: str, message: str) -> None:
        self.issues.append(Issue(path, message))

    def at(self, key: str) -> str:
        return f"{self.path}.{key}"

    def get(self, key: str) -> object:
        self.used.add(key)
        value = self.raw.get(key, _MISSING)
        return _MISSING if value is None else value

    def child(self, key: str) -> _Fields:
        value = self.get(key)
        return _Fields(None if value is _MISSING else value, self.at(key), self.issues)

    def string(self, key: str, default: str | None = None) -> str:
        value = self.get(key)
        if value is _MISSING:
            if default is None:
                self.fail(self.at(key), "is required")
                return ""
            return default
        if not isinstance(value, str):
            self.fail(self.at(key), f"must be a string, got {_kind(value)}")
            return default or ""
        if default is None and not value.strip():
            self.fail(self.at(key), "is required and must not be empty")
        return value

    def choice(self, key: str, allowed: Sequence[T], default: T) -> T:
        value = self.get(key)
        if value is _MISSING:
            return default
        if value not in allowed:
            options = ", ".join(str(a) for a in allowed)
            self.fail(self.at(key), f"must be one of {options}, got {value!r}")
            return default
        return cast(T, value)

    def integer(self, key: str, default: int, *, minimum: int | None = None) -> int:
        value = self.get(key)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(self.at(key), f"must be a whole number, got {value!r}")
            return default
        if minimum is not None and value < minimum:
            self.fail(self.at(key), f"must be at least {minimum}, got {value}")
            return default
        return value

    def number(self, key: str, default: float) -> float:
        value = self.get(key)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(self.at(key), f"must be a number, got {value!r}")
            return default
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(self.at(key), f"must be a finite number, got {value!r}")
            return default
        return float(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.get(key)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            self.fail(self.at(key), f"must be true or false, got {value!r}")
            return default
        return value

    def duration(self, key: str, default_ms: int) -> int:
        value = self.get(key)
        if value is _MISSING:
            return default_ms
        try:
            return parse_duration_ms(value)
        except DurationError as error:
            self.fail(self.at(key), str(error))
            return default_ms

    def string_map(self, key: str) -> dict[str, str]:
        """A map of strings; numbers and booleans are accepted and written as strings
        (topic configs such as ``retention.ms: 604800000`` are natural to write unquoted)."""
        value = self.get(key)
        if value is _MISSING:
            return {}
        if not isinstance(value, Mapping):
            self.fail(self.at(key), f"must be a mapping of strings, got {_kind(value)}")
            return {}
        result: dict[str, str] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                self.fail(self.at(key), f"keys must be strings, got {k!r}")
            elif isinstance(v, bool):
                result[k] = "true" if v else "false"
            elif isinstance(v, str | int | float):
                result[k] = str(v)
            else:
                self.fail(f"{self.at(key)}.{k}", f"must be a string, got {_kind(v)}")
        return result

    def string_list(self, key: str) -> tuple[str, ...]:
        value = self.get(key)
        if value is _MISSING:
            return ()
        if not isinstance(value, list):
            self.fail(self.at(key), f"must be a list, got {_kind(value)}")
            return ()
        items: list[str] = []
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                self.fail(f"{self.at(key)}[{index}]", f"must be a non-empty string, got {item!r}")
            else:
                items.append(item.strip())
        return tuple(items)

    def done(self) -> None:
        """Refuse keys this mapping does not know: a typo must not silently fall back to a
        default (``maxRedeliveryCount`` would otherwise mean 16 retries)."""
        for key in self.raw:
            if key not in self.used:
                hint = _closest(str(key), self.used)
                suffix = f" (did you mean {hint!r}?)" if hint else ""
                self.fail(self.at(str(key)), f"unknown field{suffix}")


#: The field reader, for parsers of other documents that name their problems the same way (the
#: operator's DeadLetterPolicyClass).
FieldReader = _Fields
MISSING: Final = _MISSING


def _kind(value: object) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"{type(value).__name__} {value!r}"


def _closest(key: str, known: set[str]) -> str | None:
    import difflib

    matches = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
    return matches[0] if matches else None
