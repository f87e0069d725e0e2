"""The one builder of DeadLetterPolicy documents for tests: a base document, whole spec
sections merged in, and single fields changed.

Validation tests read best as "the minimal policy, except this one field": ``policy_document
({"spec.retry.backoff.jitter": 1.5})``. Paths are dotted; ``DELETE`` removes a field. A key that
itself holds dots (``dlq.reason``, ``retention.ms``) is set through its parent mapping:
``{"spec.deadLetter.headers": {"dlq.reason": "x"}}``. Tests against real services start from
another base (``tests.helpers.BASE_POLICY``) and give sections: ``policy_document(base=...,
retry={"maxRedeliverCount": 1})`` merges one level deep into ``spec.retry``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from dlq_engine.model import DeadLetterPolicy, PolicyError, parse_policy

#: Marks a field to remove from the document.
DELETE: Any = object()

MINIMAL: dict[str, Any] = {
    "apiVersion": "sparkdlq.io/v1alpha1",
    "kind": "DeadLetterPolicy",
    "metadata": {"name": "orders-billing", "namespace": "payments"},
    "spec": {
        "source": {"topic": "orders", "subscription": "billing"},
        "broker": {"bootstrapServers": "kafka.kafka:9092"},
        "processor": {"entrypoint": "billing.handlers:process"},
    },
}


def policy_document(
    overrides: Mapping[str, Any] | None = None, *, base: Mapping[str, Any] = MINIMAL, **sections: Any
) -> dict[str, Any]:
    """A fresh copy of ``base`` with the spec ``sections`` merged in (one level deep: a mapping
    updates the section, anything else replaces it), then ``overrides`` (dotted path -> value)
    applied; missing parents are created as mappings."""
    document = copy.deepcopy(dict(base))
    spec = document["spec"]
    for section, value in sections.items():
        if isinstance(value, Mapping) and isinstance(spec.get(section), dict):
            spec[section].update(copy.deepcopy(value))
        else:
            spec[section] = copy.deepcopy(value)
    for path, value in (overrides or {}).items():
        *parents, last = path.split(".")
        node = document
        for key in parents:
            node = node.setdefault(key, {})
        if value is DELETE:
            del node[last]
        else:
            node[last] = copy.deepcopy(value)
    return document


def policy(overrides: Mapping[str, Any] | None = None) -> DeadLetterPolicy:
    """The parsed minimal policy with ``overrides`` applied (it must be valid)."""
    return parse_policy(policy_document(overrides))


def issues(document: object) -> list[str]:
    """Every problem ``parse_policy`` reports for ``document``, as ``path: message`` lines."""
    try:
        parse_policy(document)
    except PolicyError as error:
        return [str(issue) for issue in error.issues]
    raise AssertionError("the document parsed without problems")
