"""The test bed's standalone Pulsar broker: it stores and serves messages, and binds only the
loopback interface (its embedded bookie included), so it runs beside other sessions' services."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from spark_dlq_devtools.pulsar import Message, PulsarBroker


def test_broker_round_trips_messages_and_listens_on_loopback_only(
    pulsar: PulsarBroker, make_pulsar_topic: Callable[..., str]
) -> None:
    plain = make_pulsar_topic("plain")
    split = make_pulsar_topic("split", partitions=2)
    pulsar.produce(plain, [Message("k", b"v", {"p": "1"}), (None, b"no key")])
    pulsar.produce(split, [(f"k{i}", f"v{i}".encode()) for i in range(20)], batching=True)

    read = pulsar.read_all(plain)
    assert [(m.key, m.value, dict(m.properties)) for m in read] == [
        ("k", b"v", {"p": "1"}),
        (None, b"no key", {}),
    ]
    assert sorted(m.value for m in pulsar.read_all(split)) == sorted(f"v{i}".encode() for i in range(20))
    assert {m.topic.rsplit("-", 1)[-1] for m in pulsar.read_all(split)} == {"0", "1"}

    assert pulsar.service is not None
    listening = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    mine = [line.split()[3] for line in listening.splitlines() if f"pid={pulsar.service.pid}," in line]
    assert {address.rsplit(":", 1)[1] for address in mine} >= {
        str(pulsar.port),
        str(pulsar.web_port),
        str(pulsar.bookie_port),
    }
    assert all(address.rsplit(":", 1)[0] in ("127.0.0.1", "[::ffff:127.0.0.1]") for address in mine), mine
