"""The policy model shared by the operator and the engine: types, parsing, defaults, hash.

Pure Python (PyYAML only): no Spark, Kubernetes or Kafka client is imported here.
"""

from dlq_engine.model.config_hash import config_hash, engine_config
from dlq_engine.model.documents import (
    LocatedIssue,
    PolicyFileError,
    load_policy_file,
    load_policy_text,
)
from dlq_engine.model.durations import DurationError, format_ms, parse_duration_ms
from dlq_engine.model.policy import (
    API_VERSION,
    KIND,
    DeadLetterPolicy,
    Issue,
    PolicyError,
    parse_policy,
    to_document,
    to_spec,
    topic_name_problem,
)

__all__ = [
    "API_VERSION",
    "KIND",
    "DeadLetterPolicy",
    "DurationError",
    "Issue",
    "LocatedIssue",
    "PolicyError",
    "PolicyFileError",
    "config_hash",
    "engine_config",
    "format_ms",
    "load_policy_file",
    "load_policy_text",
    "parse_duration_ms",
    "parse_policy",
    "to_document",
    "to_spec",
    "topic_name_problem",
]
