"""``kubectl dlq`` on a Pulsar policy, against the session's real standalone Pulsar: the same
output and options as on Kafka (tests/integration/test_kubectl_dlq.py), read by Readers that
create no subscription and move none. Dead letters as the engine writes them on Pulsar (every
header a property) are produced once for the module; the engine's own are read at the end of
tests/integration/engine/test_pulsar_engine.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlq_engine.model import headers as h
from dlq_engine.model.policy import PULSAR_KEEP_SUBSCRIPTION
from dlq_engine.routing.headers import failure_headers
from spark_dlq_devtools.pulsar import Message, PulsarBroker, full_topic
from tests.conftest import unique
from tests.integration.test_kubectl_dlq import dlq
from tests.policy_builder import policy_document

MINUTE = 60_000
#: (key, reason, error class): order-i, failed ``(6 - i) * 20`` minutes ago.
LETTERS = [
    ("order-0", "exhausted", "ValueError"),
    ("order-1", "terminated", "billing.errors.FraudError"),
    ("order-2", "exhausted", "ValueError"),
    ("order-3", "non-retryable", "KeyError"),
    ("order-4", "exhausted", "TimeoutError"),
    ("order-5", "exhausted", "ValueError"),
]


@dataclass(frozen=True)
class PulsarLetters:
    pulsar: PulsarBroker
    #: The partitioned dead-letter topic (2 partitions) and its policy file.
    topic: str
    policy: Path
    #: A non-partitioned one, holding one dead letter, and its policy file.
    single: str
    single_policy: Path
    now: int


def write_policy(path: Path, pulsar: PulsarBroker, topic: str) -> Path:
    broker = {"type": "pulsar", "serviceUrl": pulsar.service_url, "adminUrl": pulsar.admin_url}
    path.write_text(yaml.safe_dump(policy_document({"spec.broker": broker, "spec.deadLetter.topic": topic})))
    return path


def letter(key: str, reason: str, error_class: str, failed_at: int) -> Message:
    """A dead letter as the engine writes it on Pulsar: its headers as properties (UTF-8)."""
    headers = failure_headers(
        origin={h.ORIGINAL_TOPIC: "orders", h.ORIGINAL_PARTITION: "1", h.ORIGINAL_OFFSET: "4096"},
        attempt=3,
        error_class=error_class,
        error_message=f"{key} failed",
        stacktrace="Traceback ...\nValueError: no",
        policy="payments/orders-billing",
        subscription="billing",
        failed_at=failed_at,
        reason=reason,
        profiles=("spark-dlq", "pulsar"),
        pulsar_ids=True,
    )
    value = json.dumps({"order": key}).encode()
    return Message(key, value, {name: raw.decode("utf-8") for name, raw in headers})


@pytest.fixture(scope="module")
def letters(pulsar: PulsarBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarLetters]:
    now = int(time.time() * 1000)
    topic = pulsar.create_topic(unique("orders-billing-DLQ"), partitions=2)
    single = pulsar.create_topic(unique("single-DLQ"))
    # As the operator provisions a dead-letter topic: a durable subscription that holds it.
    for name in (topic, single):
        pulsar.admin(
            "PUT", f"/admin/v2/persistent/public/default/{name}/subscription/{PULSAR_KEEP_SUBSCRIPTION}"
        )
    pulsar.produce(
        topic, [letter(k, r, c, now - (6 - i) * 20 * MINUTE) for i, (k, r, c) in enumerate(LETTERS)]
    )
    pulsar.produce(single, [letter("only", "too-large", "ValueError", now - MINUTE)], batching=True)
    folder = tmp_path_factory.mktemp("pulsar-policies")
    yield PulsarLetters(
        pulsar,
        topic,
        write_policy(folder / "policy.yaml", pulsar, topic),
        single,
        write_policy(folder / "single.yaml", pulsar, single),
        now,
    )
    pulsar.delete_topic(topic, partitioned=True)
    pulsar.delete_topic(single)


def run(*args: str) -> tuple[int, str, str]:
    """``kubectl dlq ARGS`` in this process (``dlq``): status, out, err."""
    done = dlq(*args)
    return done.returncode, done.stdout, done.stderr


def test_stats_ls_and_show_read_a_pulsar_dead_letter_topic(letters: PulsarLetters) -> None:
    backlog = letters.pulsar.backlog(letters.topic, PULSAR_KEEP_SUBSCRIPTION)
    table = dlq("stats", "-f", str(letters.policy), process=True)
    assert table.returncode == 0, table.stderr
    assert table.stderr == ""
    lines = table.stdout.splitlines()
    assert lines[:3] == [f"TOPIC    {letters.topic}", "RANGE    all", "TOTAL    6"]
    assert "exhausted       ValueError                  3" in lines

    status, out, err = run("stats", "-f", str(letters.policy), "-o", "json")
    stats = json.loads(out)
    assert (status, err, stats["total"], stats["expired"]) == (0, "", 6, 0)
    assert stats["byReason"] == {"exhausted": 4, "non-retryable": 1, "terminated": 1}

    # --since: by dlq.failed.at, as on Kafka (the read seeks by publish time, 5 minutes early).
    status, out, _ = run("ls", "-f", str(letters.policy), "--since", "50m", "-o", "json")
    assert [item["key"]["data"] for item in json.loads(out)["items"]] == ["order-4", "order-5"]
    status, out, err = run("ls", "-f", str(letters.policy), "--after", "2099-01-01")
    assert (status, out, err) == (0, "", f"No dead letters found in {letters.topic}.\n")

    status, out, _ = run("ls", "-f", str(letters.policy), "--reason", "exhausted", "-o", "wide")
    rows = out.splitlines()
    assert rows[0].split() == [
        "TIME", "PARTITION/OFFSET", "KEY", "REASON", "CLASS", "ATTEMPT", "ORIGINAL", "REDRIVES", "MESSAGE",
    ]  # fmt: skip
    assert [row.split()[2] for row in rows[1:]] == ["order-0", "order-2", "order-4", "order-5"]
    assert all(row.split()[5:7] == ["3", "orders/1/4096"] for row in rows[1:])

    # show: the position ls prints, the partition index and the packed message id.
    status, out, _ = run("ls", "-f", str(letters.policy), "--key", "order-3", "-o", "json")
    [item] = json.loads(out)["items"]
    assert item["partition"] in (0, 1)
    status, out, _ = run("show", "-f", str(letters.policy), f"{item['partition']}/{item['offset']}", "-o", "json")  # fmt: skip
    shown = json.loads(out)
    assert shown["key"] == {"encoding": "text", "data": "order-3"}
    assert shown["value"] == {"encoding": "json", "data": {"order": "order-3"}}
    assert (shown["reason"], shown["errorClass"], shown["attempt"]) == ("non-retryable", "KeyError", 3)
    names = {header["name"] for header in shown["headers"]}
    assert {h.FAILED_AT, h.PULSAR_REAL_TOPIC, h.PULSAR_ORIGIN_MESSAGE_ID} <= names

    # Read without a trace: no subscription made, the one that holds the dead letters not moved.
    assert letters.pulsar.subscriptions(letters.topic) == [PULSAR_KEEP_SUBSCRIPTION]
    assert letters.pulsar.backlog(letters.topic, PULSAR_KEEP_SUBSCRIPTION) == backlog == 6


def test_a_non_partitioned_topic_is_partition_minus_one(letters: PulsarLetters) -> None:
    status, out, _ = run("ls", "-f", str(letters.single_policy), "-o", "json")
    [item] = json.loads(out)["items"]
    assert (status, item["partition"], item["reason"]) == (0, -1, "too-large")
    position = f"-1/{item['offset']}"
    status, out, _ = run("show", position, "-f", str(letters.single_policy))
    assert status == 0
    assert f"Position:     {position}" in out.splitlines()
    assert "Key:          only" in out.splitlines()

    missing = f"-1/{item['offset'] + 4096}"
    status, out, err = run("show", "-f", str(letters.single_policy), missing)
    assert (status, out) == (2, "")
    assert err.startswith(f"error: no message at {missing} of {letters.single!r}"), err


def test_pulsar_refusals_are_one_line_and_redrive_counts(letters: PulsarLetters, tmp_path: Path) -> None:
    status, _, err = run("stats", "-f", str(letters.policy), "--bootstrap-servers", "k:9092")
    assert status == 2
    assert err.startswith(
        "error: --bootstrap-servers: is for a Kafka policy; payments/orders-billing is on Pulsar"
    )

    gone = write_policy(tmp_path / "gone.yaml", letters.pulsar, unique("never-made"))
    status, _, err = run("stats", "-f", str(gone))
    assert status == 1
    assert err == (
        f"error: the dead-letter topic {gone_topic(gone)!r} does not exist on the Pulsar broker at "
        f"{letters.pulsar.service_url}\n"
    )

    unreachable = ("--service-url", "pulsar://127.0.0.1:1", "--request-timeout", "2s")
    status, _, err = run("ls", "-f", str(letters.policy), *unreachable)
    assert (status, err) == (
        1,
        "error: cannot reach the Pulsar broker at pulsar://127.0.0.1:1 (--service-url): no answer within 2s\n",
    )

    # redrive counts from a Pulsar topic too, and writes the DeadLetterRedrive --execute creates.
    status, out, _ = run("redrive", "-f", str(letters.policy), "--reason", "exhausted")
    assert status == 0
    assert out.startswith("Would redrive 4 of 6 dead letters of payments/orders-billing to "), out
    status, out, _ = run("redrive", "-f", str(letters.policy), "--reason", "exhausted", "-o", "yaml")
    assert status == 0
    created = yaml.safe_load(out)
    assert (created["kind"], created["spec"]["selection"]) == (
        "DeadLetterRedrive",
        {"reasons": ["exhausted"]},
    )


def gone_topic(policy: Path) -> str:
    document: dict[str, Any] = yaml.safe_load(policy.read_text())
    return str(document["spec"]["deadLetter"]["topic"])


def test_full_topic_names_read_the_same_topic(letters: PulsarLetters, tmp_path: Path) -> None:
    full = write_policy(tmp_path / "full.yaml", letters.pulsar, full_topic(letters.topic))
    status, out, _ = run("stats", "-f", str(full), "-o", "json")
    assert (status, json.loads(out)["total"]) == (0, 6)


def test_the_client_secrets_files_reach_a_secured_broker(letters: PulsarLetters) -> None:
    """``--pulsar-client``: the policy's client Secret as files, as the engine mounts it. A token
    of a role that may consume, over TLS with the broker's CA: every dead letter; a wrong token:
    one line, status 1; a file no Pulsar client takes: bad input naming it."""
    pulsar = letters.pulsar
    role = unique("triage")
    pulsar.grant(letters.topic, role, ["consume"])
    over_tls = ("--service-url", pulsar.service_url_tls, "--request-timeout", "5s", "-o", "json")
    good = pulsar.client_dir(role, {"token": pulsar.token(role) + "\n", "ca.crt": pulsar.ca})
    status, out, err = run("stats", "-f", str(letters.policy), *over_tls, "--pulsar-client", str(good))
    assert (status, err, json.loads(out or "{}").get("total")) == (0, "", 6)

    forged = pulsar.client_dir(
        f"{role}-forged", {"token": pulsar.token(role, key=b"k" * 32), "ca.crt": pulsar.ca}
    )
    status, out, err = run("stats", "-f", str(letters.policy), *over_tls, "--pulsar-client", str(forged))
    assert (status, out) == (1, "")
    assert err == (
        f"error: cannot reach the Pulsar broker at {pulsar.service_url_tls} (--service-url): no answer "
        "within 5s (a broker that refuses the --pulsar-client token or certificate does not answer either)\n"
    )

    odd = pulsar.client_dir(f"{role}-odd", {"token": "t", "password": "p"})
    status, _, err = run("stats", "-f", str(letters.policy), "--pulsar-client", str(odd))
    assert (status, err) == (
        2,
        f"error: --pulsar-client {odd}: unknown key(s) password (a Pulsar client takes "
        "token, ca.crt, tls.crt, tls.key, oauth2.issuerUrl, oauth2.audience, oauth2.scope, "
        "oauth2.credentials.json)\n",
    )
