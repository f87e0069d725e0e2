"""The configuration hash: one short digest of everything that changes what the engine does.

The operator puts it on the SparkApplication (metadata and spec), so a policy change that
alters the engine restarts the job and one that does not (a label, ``suspend``, how topics are
provisioned) leaves it running. It is computed over the normalised spec (``to_spec``: every
default filled in), so two policies that mean the same thing hash the same however they are
written. In a cluster the operator hashes the policy as its class governs it (class defaults
merged, broker, image, sparkConf and paths settled, ``spark.pod`` merged): a class change that
changes any of these restarts the job, and one that does not, does not.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from dlq_engine.model.policy import DeadLetterPolicy, to_spec

#: Spec fields that do not reach the engine: provisioning, the on/off switch, and the class that
#: governs the policy (what the class changes is in the governed policy itself).
_NOT_ENGINE: tuple[str, ...] = ("topics", "suspend", "className")
#: Fields of ``spec.broker`` only the operator reads: Pulsar's admin REST API creates the topics.
_NOT_ENGINE_BROKER: tuple[str, ...] = ("adminUrl",)


def engine_config(policy: DeadLetterPolicy) -> dict[str, Any]:
    """The part of the policy the engine's behaviour depends on, normalised."""
    spec = {k: v for k, v in to_spec(policy).items() if k not in _NOT_ENGINE}
    spec["broker"] = {k: v for k, v in spec["broker"].items() if k not in _NOT_ENGINE_BROKER}
    return {"name": policy.name, "namespace": policy.namespace, "spec": spec}


def config_hash(policy: DeadLetterPolicy) -> str:
    """16 hex digits of SHA-256 over the canonical JSON of ``engine_config``."""
    canonical = json.dumps(engine_config(policy), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
