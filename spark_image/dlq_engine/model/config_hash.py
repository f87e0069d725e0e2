"""The configuration hash: one short digest of everything that changes what the engine does.

The operator puts it on the SparkApplication (metadata and spec), so a policy change that
alters the engine restarts the job and one that does not (a label, ``suspend``, how topics are
provisioned) leaves it running. In a cluster the operator hashes the policy as its class governs
it (class defaults merged, broker, image, sparkConf and paths settled, ``spark.pod`` merged): a
class change that changes any of these restarts the job, and one that does not, does not.

It is computed over the normalised spec: ``to_spec`` (every default filled in, so two policies
that mean the same thing hash the same however they are written), less what the engine does not
read, less every field at its default (``DEFAULT_SPEC``, the spec of the types' own defaults)
but those in ``HASHED_IN_FULL``. So a field added to the model never changes the hash of a
policy that leaves it at its default: no job restarts when the operator is upgraded.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from dlq_engine.model.policy import DEFAULT_SPEC, DeadLetterPolicy, to_spec

#: Spec fields that do not reach the engine: provisioning, the on/off switch, and the class that
#: governs the policy (what the class changes is in the governed policy itself).
_NOT_ENGINE: tuple[str, ...] = ("topics", "suspend", "className")
#: Fields of ``spec.broker`` only the operator reads: Pulsar's admin REST API creates the topics.
_NOT_ENGINE_BROKER: tuple[str, ...] = ("adminUrl",)

#: The spec fields hashed whatever their value, defaults included (dotted paths; a path names
#: its whole subtree): the fields of the first release, which every policy has been hashed with
#: since. Frozen: never add a field here, or every job of a policy that leaves it at its default
#: restarts on upgrade (``tests/unit/test_config_hash_pins.py`` pins the hashes).
HASHED_IN_FULL: Final = frozenset(
    {
        "source.topic",
        "source.subscription",
        "source.startingOffsets",
        "processor",
        "output",
        "retry.maxRedeliverCount",
        "retry.topic",
        "retry.backoff",
        "retry.nonRetryableErrors",
        "deadLetter.strategy",
        "deadLetter.topic",
        "deadLetter.includeStackTrace",
        "deadLetter.headers",
        "errorWindow",
        "spark.image",
        "spark.trigger",
        "spark.checkpointLocation",
        "spark.driver",
        "spark.executor",
        "spark.sparkConf",
        "ordering",
    }
)


def engine_config(policy: DeadLetterPolicy) -> dict[str, Any]:
    """The part of the policy the engine's behaviour depends on, normalised."""
    spec = {k: v for k, v in to_spec(policy).items() if k not in _NOT_ENGINE}
    spec["broker"] = {k: v for k, v in spec["broker"].items() if k not in _NOT_ENGINE_BROKER}
    return {"name": policy.name, "namespace": policy.namespace, "spec": _without_defaults(spec, DEFAULT_SPEC)}


def config_hash(policy: DeadLetterPolicy) -> str:
    """16 hex digits of SHA-256 over the canonical JSON of ``engine_config``."""
    canonical = json.dumps(engine_config(policy), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _without_defaults(spec: dict[str, Any], defaults: dict[str, Any], path: str = "") -> dict[str, Any]:
    """``spec`` less every field equal to its default in ``defaults``, but the fields of
    ``HASHED_IN_FULL``; a section is kept (its fields looked at one by one) when it holds one of
    those, else left out when nothing in it is left."""
    kept: dict[str, Any] = {}
    for key, value in spec.items():
        at = f"{path}{key}"
        default = defaults.get(key, _ABSENT)
        if at in HASHED_IN_FULL:
            kept[key] = value
        elif isinstance(value, dict) and isinstance(default, dict):
            inner = _without_defaults(value, default, f"{at}.")
            if inner or _holds_hashed_in_full(at):
                kept[key] = inner
        elif value != default:
            kept[key] = value
    return kept


def _holds_hashed_in_full(path: str) -> bool:
    return any(field.startswith(f"{path}.") for field in HASHED_IN_FULL)


_ABSENT: Final = object()
