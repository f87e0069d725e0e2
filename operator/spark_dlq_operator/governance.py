"""Governing a policy: the policy as written in, the policy as its class lets it run out.

``govern`` merges the class's defaults under the policy's spec, settles the broker (and so
where the operator's credentials for it come from), the image, the sparkConf, the pods' fit,
and the checkpoint and dead-letter table paths, then parses the result with the shared model and
checks the class's limits. What exceeds the class is refused with one ``Issue`` per problem,
naming the policy's field and the class's rule (``spec.spark.image: 'evil:1' is not allowed by
class 'standard' (spec.images.allowed: spark-dlq:*)``). Pure, like ``policy_class``; the operator's
own defaults (``OperatorConfig``) fill what the class leaves to them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from dlq_engine.model import DeadLetterPolicy, Issue, PolicyError, parse_policy
from dlq_engine.model.policy import pod_spec
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.policy_class import (
    NEVER_CHECKPOINT,
    NEVER_TABLE_PATH,
    POD_FIELDS,
    BrokerEntry,
    ClassRefusal,
    PolicyClass,
    class_label,
    conf_key_matches,
    deep_merge,
    forbidden,
    limit_issues,
    never_allowed_message,
)
from spark_dlq_operator.reasons import Reason


@dataclass(frozen=True, slots=True)
class PodFit:
    """What the class gives the Spark pods beyond the policy itself (``spec.spark.pod`` of the
    governed policy holds the merged nodeSelector, tolerations, affinity, priority class,
    labels and annotations). These are not in the configuration hash: like the operator's own
    defaults, a change reaches a running job at its next configuration change, except a change
    of the pods' service account or of the executors' token, which restarts it at once
    (``identity.moved``: who the pods are is not left to a later change)."""

    #: A shared service account (the class's ``pods.serviceAccountName``); empty: the operator's
    #: ``--spark-service-account``, else one per policy (``render.shared_service_account``).
    service_account: str = ""
    service_account_annotations: Mapping[str, str] = field(default_factory=dict)
    executor_service_account_token: bool = False
    image_pull_secrets: tuple[str, ...] = ()
    #: The class's checkpoint claim and base (empty: the operator's, see ``Storage``).
    checkpoint_claim: str = ""
    checkpoint_base: str = ""


#: The fit of a policy whose class sets nothing for its pods.
NO_FIT: Final = PodFit()


@dataclass(frozen=True, slots=True)
class Governed:
    """A policy as its class lets it run."""

    #: The effective policy: class defaults merged under the policy's spec, then the broker,
    #: image, sparkConf, checkpoint and dead-letter table path the class gives; what the
    #: engine runs and what the configuration hash is computed over.
    policy: DeadLetterPolicy
    class_name: str
    fit: PodFit = NO_FIT
    #: The class's entry for the policy's broker (where the operator's credentials for it come
    #: from); None when the class lists no brokers: then the operator uses none of its own.
    broker: BrokerEntry | None = None


def govern(document: Mapping[str, Any], cls: PolicyClass, *, config: OperatorConfig) -> Governed:
    """The policy ``document`` (as the API server returns it) as ``cls`` lets it run. Raises
    ClassRefusal (reason ClassViolation) naming each field that exceeds the class and the rule
    it breaks, or PolicyError when the effective policy fails the model's validation."""
    metadata = document.get("metadata") or {}
    name, namespace = str(metadata.get("name") or ""), str(metadata.get("namespace") or "default")
    raw = document.get("spec")
    raw_spec: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    issues: list[Issue] = []
    _refuse_never_allowed(raw_spec, issues)
    spec = deep_merge(cls.defaults, raw_spec)
    for section in ("spark", "deadLetter"):
        if spec.get(section) is None:  # an explicit null is the section's defaults
            spec.pop(section, None)
    entry = _govern_broker(spec, cls, issues)
    if entry is not None:
        _govern_strimzi(spec, raw_spec, cls, entry, issues)
    spark = spec.setdefault("spark", {}) if isinstance(spec.get("spark", {}), dict) else {}
    _govern_image(spark, cls, config, issues)
    _govern_spark_conf(spark, cls, issues)
    _govern_pod(spark, cls, issues)
    _govern_storage(spec, spark, cls, name=name, namespace=namespace, issues=issues)
    try:
        policy = parse_policy({**document, "spec": spec})
    except PolicyError as error:
        if issues:
            # The model's problems too, but not again below a field the class refused.
            named = tuple(issue.path for issue in issues)
            more = [i for i in error.issues if not i.path.startswith(named)]
            raise ClassRefusal(Reason.CLASS_VIOLATION, [*issues, *more]) from None
        raise
    issues.extend(limit_issues(policy, cls))
    if issues:
        raise ClassRefusal(Reason.CLASS_VIOLATION, issues)
    fit = PodFit(
        service_account=cls.pods.service_account_name,
        service_account_annotations=cls.pods.service_account_annotations,
        executor_service_account_token=cls.pods.executor_service_account_token,
        image_pull_secrets=cls.pods.image_pull_secrets,
        checkpoint_claim=cls.storage.checkpoint_claim,
        checkpoint_base=cls.storage.checkpoint_base,
    )
    return Governed(policy=policy, class_name=cls.name, fit=fit, broker=entry)


def govern_broker(document: Mapping[str, Any], cls: PolicyClass) -> tuple[dict[str, Any], BrokerEntry | None]:
    """The ``spec.broker`` ``govern`` gives the policy ``document`` under ``cls`` (its own where the
    class allows it, else the class's first broker) and the class's entry for it, without
    ``govern``'s other rules: for ``kubectl dlq``, which needs only where a policy's topics are.
    Raises ClassRefusal naming ``spec.broker`` and the class's rule."""
    raw = document.get("spec")
    spec = deep_merge(cls.defaults, raw if isinstance(raw, Mapping) else {})
    issues: list[Issue] = []
    entry = _govern_broker(spec, cls, issues)
    if issues:
        raise ClassRefusal(Reason.CLASS_VIOLATION, issues)
    broker = spec.get("broker")
    return (dict(broker) if isinstance(broker, Mapping) else {}), entry


def _section(spec: Mapping[str, Any], *keys: str) -> Mapping[str, Any]:
    node: object = spec
    for key in keys:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def _refuse_never_allowed(raw_spec: Mapping[str, Any], issues: list[Issue]) -> None:
    """What no class can allow (the CRD refuses them at admission; an object written under an
    older CRD still meets this)."""
    spark = _section(raw_spec, "spark")
    if spark.get("checkpointLocation"):
        issues.append(Issue("spec.spark.checkpointLocation", NEVER_CHECKPOINT))
    if "path" in _section(raw_spec, "deadLetter", "table"):
        issues.append(Issue("spec.deadLetter.table.path", NEVER_TABLE_PATH))
    for key in sorted(_section(spark, "sparkConf")):
        group = forbidden(str(key))
        if group is not None:
            issues.append(Issue(f"spec.spark.sparkConf.{key}", never_allowed_message(group)))


def _normalised(address: str) -> tuple[str, ...]:
    return tuple(sorted(part.strip().lower().rstrip("/") for part in address.split(",") if part.strip()))


def _govern_broker(spec: dict[str, Any], cls: PolicyClass, issues: list[Issue]) -> BrokerEntry | None:
    raw = spec.get("broker")
    listed = ", ".join(entry.address for entry in cls.brokers)
    if not cls.brokers:
        if raw is None:
            issues.append(
                Issue(
                    "spec.broker",
                    f"is required: {class_label(cls)} lists no brokers (spec.brokers) to take it from",
                )
            )
        return None
    if raw is None:
        entry = cls.brokers[0]
        spec["broker"] = entry.as_policy_broker()
        return entry
    if not isinstance(raw, Mapping):
        return None  # the model names it
    kind = raw.get("type") or "kafka"
    field_name = "serviceUrl" if kind == "pulsar" else "bootstrapServers"
    address = str(raw.get(field_name) or "")
    matching = [
        (i, e)
        for i, e in enumerate(cls.brokers)
        if e.type == kind and _normalised(e.address) == _normalised(address)
    ]
    if not matching:
        issues.append(
            Issue(
                f"spec.broker.{field_name}",
                f"{address!r} is not allowed by {class_label(cls)} (spec.brokers: {listed})",
            )
        )
        return None
    [(index, entry), *_] = matching
    broker = dict(raw)
    if kind == "pulsar":
        # The operator's admin calls (and the class's credentials for this broker) go to the
        # admin URL: only the entry's is allowed, and none when the entry names none.
        admin = str(raw.get("adminUrl") or "")
        if admin and not entry.admin_url:
            issues.append(
                Issue(
                    "spec.broker.adminUrl",
                    f"{admin!r} is not allowed by {class_label(cls)} (spec.brokers[{index}] names no adminUrl)",
                )
            )
        elif admin and _normalised(admin) != _normalised(entry.admin_url):
            issues.append(
                Issue(
                    "spec.broker.adminUrl",
                    f"{admin!r} is not allowed by {class_label(cls)} (spec.brokers[{index}].adminUrl: {entry.admin_url})",
                )
            )
        if not admin and entry.admin_url:
            broker["adminUrl"] = entry.admin_url
    if entry.engine_secret_name:
        secret = _section(raw, "secretRef").get("name")
        if secret and secret != entry.engine_secret_name:
            issues.append(
                Issue(
                    "spec.broker.secretRef.name",
                    f"{secret!r} is not allowed by {class_label(cls)} "
                    f"(spec.brokers[{index}].engineSecretName: {entry.engine_secret_name})",
                )
            )
        broker["secretRef"] = {"name": entry.engine_secret_name}
    spec["broker"] = broker
    return entry


def _govern_strimzi(
    spec: dict[str, Any],
    raw_spec: Mapping[str, Any],
    cls: PolicyClass,
    entry: BrokerEntry,
    issues: list[Issue],
) -> None:
    """The Strimzi cluster the KafkaTopics go to is the one of the broker's entry: a KafkaTopic
    takes over the topic it names on its cluster, whatever the policy's bootstrap servers are
    (whose topics the operator checks before it creates one). The author's
    ``spec.topics.strimzi`` must be the entry's or absent (then it is filled in); where the entry
    names none, the author may name none. The operator's own command-line brokers (the built-in
    class) leave it to the policy, as before classes."""
    if entry.type != "kafka" or entry.command_line_credentials:
        return
    index = cls.brokers.index(entry)
    own = _section(raw_spec, "topics", "strimzi")
    for key, allowed in (("namespace", entry.strimzi_namespace), ("cluster", entry.strimzi_cluster)):
        value = own.get(key)
        if not value or value == allowed:
            continue
        rule = (
            f"spec.brokers[{index}].strimzi.{key}: {allowed}"
            if allowed
            else f"spec.brokers[{index}] names no strimzi cluster"
        )
        issues.append(
            Issue(f"spec.topics.strimzi.{key}", f"{value!r} is not allowed by {class_label(cls)} ({rule})")
        )
    if entry.strimzi_cluster:
        topics = spec.get("topics")
        spec["topics"] = {
            **(topics if isinstance(topics, dict) else {}),
            "strimzi": {"namespace": entry.strimzi_namespace, "cluster": entry.strimzi_cluster},
        }


def image_allowed(image: str, allowed: Sequence[str]) -> bool:
    return any(image.startswith(p[:-1]) if p.endswith("*") else image == p for p in allowed)


def _govern_image(
    spark: dict[str, Any], cls: PolicyClass, config: OperatorConfig, issues: list[Issue]
) -> None:
    image = spark.get("image")
    if not image:
        spark["image"] = cls.images.default
        return
    default = cls.images.default or config.spark_image
    if image == default or image_allowed(str(image), cls.images.allowed):
        return
    rule = (
        f"spec.images.allowed: {', '.join(cls.images.allowed)}"
        if cls.images.allowed
        else f"spec.images.allowed is empty: only the default image {default}"
    )
    issues.append(Issue("spec.spark.image", f"{image!r} is not allowed by {class_label(cls)} ({rule})"))


def _govern_spark_conf(spark: dict[str, Any], cls: PolicyClass, issues: list[Issue]) -> None:
    raw = spark.get("sparkConf")
    conf: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    rules = cls.spark_conf
    allowed = ", ".join(rules.allowed) if rules.allowed else "none"
    effective: dict[str, Any] = {}
    for key, value in conf.items():
        if forbidden(str(key)) is not None:
            continue  # named by _refuse_never_allowed
        fixed = rules.fixed.get(str(key))
        if fixed is not None and str(value) != fixed:
            issues.append(
                Issue(
                    f"spec.spark.sparkConf.{key}",
                    f"is set by {class_label(cls)} (spec.sparkConf.fixed: {key}={fixed})",
                )
            )
        elif fixed is None and not any(conf_key_matches(p, str(key)) for p in rules.allowed):
            issues.append(
                Issue(
                    f"spec.spark.sparkConf.{key}",
                    f"is not allowed by {class_label(cls)} (spec.sparkConf.allowed: {allowed})",
                )
            )
        else:
            effective[str(key)] = value
    effective.update(rules.fixed)
    if effective or raw is not None:
        spark["sparkConf"] = effective


def _govern_pod(spark: dict[str, Any], cls: PolicyClass, issues: list[Issue]) -> None:
    raw = spark.get("pod")
    asked: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    may = cls.pods.policy_may_override
    rule = f"spec.pods.policyMayOverride: {', '.join(may)}" if may else "spec.pods.policyMayOverride is empty"
    for key in POD_FIELDS:
        if asked.get(key) and key not in may:
            issues.append(Issue(f"spec.spark.pod.{key}", f"is not allowed by {class_label(cls)} ({rule})"))
    base = pod_spec(cls.pods.settings)
    merged: dict[str, Any] = {
        # The policy's node selector and affinity narrow or replace the class's; its tolerations
        # add to them; its labels and annotations add keys the class does not set.
        "nodeSelector": {**base.get("nodeSelector", {}), **(asked.get("nodeSelector") or {})},
        "tolerations": [*base.get("tolerations", []), *(asked.get("tolerations") or [])],
        "affinity": asked.get("affinity") or base.get("affinity") or {},
        "priorityClassName": asked.get("priorityClassName") or base.get("priorityClassName") or "",
        "labels": {**(asked.get("labels") or {}), **base.get("labels", {})},
        "annotations": {**(asked.get("annotations") or {}), **base.get("annotations", {})},
    }
    merged = {key: value for key, value in merged.items() if value}
    if merged:
        spark["pod"] = merged
    else:
        spark.pop("pod", None)


def _govern_storage(
    spec: dict[str, Any],
    spark: dict[str, Any],
    cls: PolicyClass,
    *,
    name: str,
    namespace: str,
    issues: list[Issue],
) -> None:
    base = cls.storage.checkpoint_base
    # Empty: the operator's --checkpoint-base, which render joins the same way.
    spark["checkpointLocation"] = f"{base}/{namespace}/{name}" if base else ""
    dead_letter = spec.get("deadLetter")
    table = dead_letter.get("table") if isinstance(dead_letter, dict) else None
    if not isinstance(table, dict):
        return
    if not cls.storage.dead_letter_table_base:
        issues.append(
            Issue(
                "spec.deadLetter.table",
                f"is not allowed by {class_label(cls)} (spec.storage.deadLetterTableBase is empty: the class "
                "keeps no dead-letter tables)",
            )
        )
        return
    table["path"] = f"{cls.storage.dead_letter_table_base}/{namespace}/{name}"
