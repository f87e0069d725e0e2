"""The DeadLetterPolicyClass objects as the operator sees them, and what they name.

Every reconcile starts from the policy as its class lets it run (``governance.govern``), so the
classes are kept in memory: listed at start-up and on every resync round, and changed by their
watch events between rounds. A policy's class may select namespaces by label, so namespaces'
labels are read (and kept for a resync interval); a class may name the operator's own Kafka or
Pulsar credentials for a broker, a Secret in the operator's namespace, read here too (and kept
as long). The operator's credentials are looked up per policy, from the broker entry its class
matched: a broker no class lists gets none.

Safety first: a catalog that could not be listed governs nothing (the caller retries), and only
a missing CRD (404) means "no classes", when the built-in class applies and the log says so.
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from dlq_engine.model import DeadLetterPolicy, pulsar_client
from spark_dlq_operator.config import OperatorConfig, client_properties
from spark_dlq_operator.governance import Governed, govern
from spark_dlq_operator.kubeapi import NAMESPACES, POLICY_CLASSES, SECRETS, ApiError, KubeApi
from spark_dlq_operator.policy_class import (
    BrokerEntry,
    InvalidClass,
    PolicyClass,
    SecretKeyRef,
    admit_namespace,
    built_in_class,
    read_class,
    select_class,
)

logger = logging.getLogger(__name__)

#: Where a pod finds its own namespace (the operator's, when ``--operator-namespace`` is not given).
SERVICE_ACCOUNT_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class CredentialsUnavailable(Exception):
    """The operator's credentials for a policy's broker, named by its class, cannot be read."""


def own_namespace(path: Path = SERVICE_ACCOUNT_NAMESPACE) -> str | None:
    """The namespace the operator's pod runs in, None outside a pod."""
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


class ClassCatalog:
    """The classes in the cluster, the namespaces' labels and the operator's credentials they name."""

    def __init__(
        self, api: KubeApi, config: OperatorConfig, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._api = api
        self._config = config
        self._clock = clock
        self._namespace = config.operator_namespace
        self.built_in = built_in_class(config)
        self._classes: dict[str, PolicyClass | InvalidClass] = {}
        self._loaded = False
        self._namespaces: dict[str, tuple[float, Mapping[str, str]]] = {}
        self._secrets: dict[SecretKeyRef, tuple[float, Mapping[str, str] | str]] = {}
        #: The broker entry each policy's class matched (for the operator's credentials).
        self._brokers: dict[tuple[str, str], BrokerEntry | None] = {}

    @property
    def classes(self) -> tuple[PolicyClass | InvalidClass, ...]:
        return tuple(self._classes[name] for name in sorted(self._classes))

    def set_operator_namespace(self, namespace: str | None) -> None:
        self._namespace = namespace

    async def refresh(self) -> None:
        """List the classes again. A missing CRD means none; any other failure is raised."""
        try:
            items = await self._api.list(POLICY_CLASSES, None)
        except ApiError as error:
            if error.status != 404:
                raise
            items = []
        self._replace({str(item["metadata"]["name"]): read_class(item) for item in items})

    def _replace(self, classes: dict[str, PolicyClass | InvalidClass]) -> None:
        had = bool(self._classes) or not self._loaded
        before, self._classes, self._loaded = self._classes, classes, True
        if had and not classes:
            logger.info(
                "no DeadLetterPolicyClass in the cluster: policies are governed by the built-in "
                "defaults (any broker%s, the operator's image, resource and tuning sparkConf keys, the "
                "operator's checkpoint base, no dead-letter tables; docs/security.md)",
                f" of {', '.join(self._config.kafka_config_brokers)}"
                if self._config.kafka_config_brokers
                else "",
            )
        for name, found in classes.items():
            if isinstance(found, InvalidClass) and before.get(name) != found:
                logger.warning(
                    "DeadLetterPolicyClass %s is invalid, its policies too: %s",
                    name,
                    "; ".join(str(i) for i in found.issues),
                )

    def update(self, obj: Mapping[str, Any]) -> bool:
        """A class was added or changed; whether what it says changed. The catalog must have
        been listed before (changes seen earlier are in that list)."""
        found = read_class(obj)
        if not self._loaded:
            return True  # governing lists them all first
        if self._classes.get(found.name) == found:
            return False
        self._replace({**self._classes, found.name: found})
        return True

    def remove(self, name: str) -> bool:
        """A class was deleted; whether the catalog held it."""
        if not self._loaded:
            return True
        if name not in self._classes:
            return False
        self._replace({k: v for k, v in self._classes.items() if k != name})
        return True

    def default_names(self) -> set[str]:
        return {c.name for c in self._classes.values() if c.is_default}

    async def govern(self, body: Mapping[str, Any]) -> Governed:
        """The policy ``body`` as its class lets it run (reading the classes first if they were
        never listed, its namespace's labels when the class selects namespaces, and the
        operator's credentials the class names for its broker). Raises ClassRefusal or
        PolicyError; ApiError when the classes cannot be listed."""
        if not self._loaded:
            await self.refresh()
        cls = select_class(body, self.classes, built_in=self.built_in)
        metadata = body.get("metadata") or {}
        namespace, name = str(metadata.get("namespace") or "default"), str(metadata.get("name") or "")
        if cls.namespace_selector:
            admit_namespace(cls, namespace, await self._namespace_labels(namespace))
        governed = govern(body, cls, config=self._config)
        self._brokers[(namespace, name)] = governed.broker
        if governed.broker is not None and governed.broker.operator_secret is not None:
            await self._load_secret(governed.broker.operator_secret)
        return governed

    def effective_policy(self, body: Mapping[str, Any]) -> DeadLetterPolicy:
        """The policy as its class governs it, from what the catalog holds (no read: the
        namespace selector and the credentials are not looked at): which broker and topics it
        uses, for the topic index. Raises PolicyError."""
        return govern(
            body, select_class(body, self.classes, built_in=self.built_in), config=self._config
        ).policy

    def forget(self, namespace: str, name: str) -> None:
        """The policy is gone."""
        self._brokers.pop((namespace, name), None)

    def admin_config(self, policy: DeadLetterPolicy) -> dict[str, str]:
        """The operator's own librdkafka settings for the policy's broker: the Secret its class
        names for it, ``--kafka-config`` for the built-in class's listed brokers, else none.
        Raises CredentialsUnavailable when the Secret could not be read."""
        entry = self._brokers.get((policy.namespace, policy.name))
        if entry is None:
            return {}
        if entry.command_line_credentials:
            return dict(self._config.kafka_config)
        if entry.operator_secret is None:
            return {}
        cached = self._secrets.get(entry.operator_secret)
        found = cached[1] if cached is not None else "it was not read yet"
        if isinstance(found, str):
            ref = entry.operator_secret
            raise CredentialsUnavailable(
                f"the operator's credentials for {entry.address} (Secret {self._namespace}/{ref.name}, key "
                f"{ref.key}, named by the policy's class) cannot be read: {found}"
            )
        return dict(found)

    def _fresh(self, at: float) -> bool:
        return self._clock() - at < self._config.resync_interval

    async def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        cached = self._namespaces.get(namespace)
        if cached is not None and self._fresh(cached[0]):
            return cached[1]
        found = await self._api.get(NAMESPACES, None, namespace)
        labels: Mapping[str, str] = dict(((found or {}).get("metadata") or {}).get("labels") or {})
        self._namespaces[namespace] = (self._clock(), labels)
        return labels

    async def _load_secret(self, ref: SecretKeyRef) -> None:
        cached = self._secrets.get(ref)
        if cached is not None and self._fresh(cached[0]):
            return
        self._secrets[ref] = (self._clock(), await self._read_secret(ref))

    async def _read_secret(self, ref: SecretKeyRef) -> Mapping[str, str] | str:
        """The Secret's lines as settings, or why there are none."""
        if not self._namespace:
            return "the operator's namespace is not known (--operator-namespace)"
        try:
            secret = await self._api.get(SECRETS, self._namespace, ref.name)
        except ApiError as error:
            return str(error)
        if secret is None:
            return "the Secret does not exist"
        if ref.files:
            return _client_files(secret)
        encoded = (secret.get("data") or {}).get(ref.key)
        if encoded is None:
            return f"the Secret has no key {ref.key}"
        try:
            return client_properties(base64.b64decode(encoded).decode("utf-8"))
        except (binascii.Error, UnicodeDecodeError):
            return f"key {ref.key} is not base64-encoded UTF-8 text"


def _client_files(secret: Mapping[str, Any]) -> Mapping[str, str] | str:
    """A Pulsar client's settings: every key of the Secret (``dlq_engine.model.pulsar_client``),
    or why they cannot be used."""
    data: Mapping[str, str] = secret.get("data") or {}
    wrong = pulsar_client.problems(list(data))
    if wrong:
        return "; ".join(wrong)
    try:
        return {key: base64.b64decode(value).decode("utf-8") for key, value in data.items()}
    except (binascii.Error, UnicodeDecodeError):
        return "a key is not base64-encoded UTF-8 text"
