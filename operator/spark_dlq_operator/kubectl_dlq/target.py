"""Where a policy's dead letters are and how to reach their broker, from the policy and the
command line's overrides (``--bootstrap-servers``, ``--kafka-config``, ``--service-url``,
``--pulsar-client``).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from dlq_engine.model import pulsar_client as client_keys
from dlq_engine.model.policy import PULSAR_SERVICE_URL_PATTERN, BrokerType, DeadLetterPolicy
from spark_dlq_operator.kubectl_dlq.errors import BadInput
from spark_dlq_operator.kubectl_dlq.policies import policy_from_cluster, policy_from_file

#: On Pulsar, the prefix of a client setting's key in ``Target.client`` whose value is the file
#: holding one key of the client Secret (``--pulsar-client``).
CLIENT_FILE: Final = "file:"


@dataclass(frozen=True, slots=True)
class Target:
    """The topic to read and how to reach its broker: on Kafka the client properties
    (``bootstrap.servers`` and the ``--kafka-config`` ones), on Pulsar ``serviceUrl`` and the
    client Secret's files (``CLIENT_FILE`` + its key).
    ``broker_origin`` says where the address came from, for the message when it cannot be
    reached."""

    topic: str
    client: Mapping[str, str]
    broker_origin: str
    broker: BrokerType = "kafka"

    @property
    def address(self) -> str:
        return self.client.get("serviceUrl" if self.broker == "pulsar" else "bootstrap.servers", "")


def read_kafka_config(path: str) -> dict[str, str]:
    """librdkafka properties from a file of ``key=value`` lines (``#`` starts a comment)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise BadInput(f"--kafka-config {path}: {reason or error}") from None
    properties: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"--kafka-config {path}:{number}: expected key=value, got {line!r}")
        properties[key.strip()] = value.strip()
    return properties


def target_for(
    policy: DeadLetterPolicy,
    *,
    bootstrap_servers: str | None,
    kafka_config: str | None,
    service_url: str | None = None,
    pulsar_client: str | None = None,
    broker_origin: str | None = None,
) -> Target:
    """The dead-letter topic of ``policy`` and how to reach its broker: on Kafka
    ``--bootstrap-servers`` over ``bootstrap.servers`` in ``--kafka-config`` over the policy's
    address (its own, or its class's: ``broker_origin``); on Pulsar ``--service-url`` over the
    policy's. The other broker type's options are refused, naming the policy's type."""
    if policy.is_pulsar:
        return _pulsar_target(
            policy,
            kafka_options=[
                flag
                for flag, value in (
                    ("--bootstrap-servers", bootstrap_servers),
                    ("--kafka-config", kafka_config),
                )
                if value is not None
            ],
            service_url=service_url,
            pulsar_client=pulsar_client,
            broker_origin=broker_origin,
        )
    for flag, value in (("--service-url", service_url), ("--pulsar-client", pulsar_client)):
        if value is not None:
            raise BadInput(
                f"{flag}: is for a Pulsar policy; {policy.qualified_name} is on Kafka "
                "(spec.broker.type kafka): give its broker with --bootstrap-servers, its client "
                "settings with --kafka-config"
            )
    client = {"bootstrap.servers": policy.broker.bootstrap_servers}
    origin = (
        broker_origin
        or f"spec.broker.bootstrapServers of {policy.qualified_name}; --bootstrap-servers overrides it"
    )
    if kafka_config:
        properties = read_kafka_config(kafka_config)
        client.update(properties)
        if "bootstrap.servers" in properties:
            origin = f"bootstrap.servers in {kafka_config}"
    if bootstrap_servers is not None:
        if not bootstrap_servers.strip():
            raise BadInput("--bootstrap-servers: must not be empty")
        client["bootstrap.servers"] = bootstrap_servers.strip()
        origin = "--bootstrap-servers"
    return Target(topic=policy.dead_letter_topic, client=client, broker_origin=origin)


def read_pulsar_client(path: str) -> dict[str, str]:
    """The files of a Pulsar client Secret written out one per key (``dlq_engine.model.
    pulsar_client``): key -> file path. Names starting with a dot are skipped (a mounted
    Secret's own bookkeeping); a key outside the list, or settings that do not go together,
    are refused naming the folder."""
    folder = Path(path)
    if not folder.is_dir():
        raise BadInput(f"--pulsar-client {path}: is not a folder (one file per key of the Secret)")
    files = {entry.name: str(entry) for entry in sorted(folder.iterdir()) if not entry.name.startswith(".")}
    found = client_keys.problems(files)
    if found:
        raise BadInput(f"--pulsar-client {path}: {'; '.join(found)}")
    return files


def _pulsar_target(
    policy: DeadLetterPolicy,
    *,
    kafka_options: list[str],
    service_url: str | None,
    pulsar_client: str | None,
    broker_origin: str | None,
) -> Target:
    if kafka_options:
        raise BadInput(
            f"{kafka_options[0]}: is for a Kafka policy; {policy.qualified_name} is on Pulsar "
            "(spec.broker.type pulsar): give its broker with --service-url"
        )
    url = policy.broker.service_url
    origin = broker_origin or f"spec.broker.serviceUrl of {policy.qualified_name}; --service-url overrides it"
    if service_url is not None:
        url = service_url.strip()
        if not re.match(PULSAR_SERVICE_URL_PATTERN, url):
            raise BadInput(
                f"--service-url: must be pulsar://host:port or pulsar+ssl://host:port, got {service_url!r}"
            )
        origin = "--service-url"
    client = {"serviceUrl": url}
    if pulsar_client is not None:
        client.update(
            {f"{CLIENT_FILE}{key}": file for key, file in read_pulsar_client(pulsar_client).items()}
        )
    return Target(topic=policy.dead_letter_topic, client=client, broker_origin=origin, broker="pulsar")


def located(args: argparse.Namespace, timeout_ms: int) -> tuple[DeadLetterPolicy, Target]:
    """The policy (-f or --policy, read once) and where its dead letters are."""
    if (args.file is None) == (args.policy is None):
        raise BadInput("give the policy as -f FILE or as --policy NAME (one of them)")
    origin = None
    if args.file is not None:
        policy = policy_from_file(args.file)
    else:
        found = policy_from_cluster(
            args.policy,
            namespace=args.namespace,
            kubeconfig=args.kubeconfig,
            context=args.context,
            timeout_ms=timeout_ms,
            bootstrap_servers=own_bootstrap_servers(args),
        )
        policy, origin = found.policy, found.broker_origin
    target = target_for(
        policy,
        bootstrap_servers=args.bootstrap_servers,
        kafka_config=args.kafka_config,
        service_url=args.service_url,
        pulsar_client=args.pulsar_client,
        broker_origin=origin,
    )
    return policy, target


def own_bootstrap_servers(args: argparse.Namespace) -> str | None:
    """The broker the user gives (``--bootstrap-servers``, else ``bootstrap.servers`` in
    ``--kafka-config``), which wins over the policy's."""
    if args.bootstrap_servers is not None and args.bootstrap_servers.strip():
        return str(args.bootstrap_servers.strip())
    if args.kafka_config:
        return read_kafka_config(args.kafka_config).get("bootstrap.servers") or None
    return None
