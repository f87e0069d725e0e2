"""A minimal valid DeadLetterPolicy document, and a way to change one field of it.

Validation tests read best as "the minimal policy, except this one field": ``policy_document
({"spec.retry.backoff.jitter": 1.5})``. Paths are dotted; ``DELETE`` removes a field. A key that
itself holds dots (``dlq.reason``, ``retention.ms``) is set through its parent mapping:
``{"spec.deadLetter.headers": {"dlq.reason": "x"}}``.
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


def policy_document(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A fresh copy of the minimal document with ``overrides`` (dotted path -> value) applied;
    missing parents are created as mappings."""
    document = copy.deepcopy(MINIMAL)
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
