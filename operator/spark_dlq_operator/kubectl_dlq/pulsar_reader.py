"""Reading a Pulsar dead-letter topic without a trace: a Reader on each partition (a non-durable
cursor: no subscription is created, and the operator's ``spark-dlq-keep`` subscription, which holds
the dead letters, never moves), from the earliest message or the publish time where the time range
starts, up to the last message each partition had when the read started.

A dead letter's position is as the engine's columns give it (docs/reference.md, "The engine on
Pulsar"): the partition index (-1 for a non-partitioned topic) and the message id packed into an
offset (``dlq_engine.model.pulsar_ids``); its headers are the message's properties, its timestamp
the publish time. Pulsar's message ids are not contiguous, so nothing is counted as expired: a dead
letter the broker deleted is not there to count. The client is the ``pulsar`` extra's
(``pulsar-client``); ``client_settings`` is the one place its connection settings are made.
"""

from __future__ import annotations

import importlib
import json
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from dlq_engine.model import pulsar_client as client_keys
from dlq_engine.model.dead_letter import DeadLetter
from dlq_engine.model.policy import pulsar_topic
from dlq_engine.model.pulsar_ids import pulsar_id_parts, pulsar_offset
from dlq_engine.release import missing_extra
from spark_dlq_operator.kubectl_dlq.errors import PROG, BadInput, TriageError, Unreachable
from spark_dlq_operator.kubectl_dlq.expired import Span
from spark_dlq_operator.kubectl_dlq.target import CLIENT_FILE, Target
from spark_dlq_operator.kubectl_dlq.times import SEEK_MARGIN_MS, Window

#: A message id as a sortable key: (ledger, entry, batch index; -1 for a message of no batch).
IdKey = tuple[int, int, int]


def client_module() -> ModuleType:
    """The Python Pulsar client; a missing ``pulsar`` extra is one line naming it (status 1)."""
    try:
        return importlib.import_module("pulsar")
    except ModuleNotFoundError as error:
        line = missing_extra(error, "pulsar", prog=PROG)
        if line is None:
            raise
        raise TriageError(line.removeprefix(f"{PROG}: ")) from None


def client_settings(target: Target, *, timeout_ms: int) -> dict[str, Any]:
    """The ``pulsar.Client`` keyword arguments that reach ``target``'s broker: its service URL,
    the request timeout, and what the client Secret's files say (``--pulsar-client``): the
    certificates to trust (host names verified), a client certificate, and one way to
    authenticate, chosen as the engine chooses it (``pulsar_client.authentication``). Every
    Pulsar connection setting is made here."""
    settings: dict[str, Any] = {
        "service_url": target.client["serviceUrl"],
        "operation_timeout_seconds": max(1, math.ceil(timeout_ms / 1000)),
        "connection_timeout_ms": timeout_ms,
    }
    files = {
        key.removeprefix(CLIENT_FILE): path
        for key, path in target.client.items()
        if key.startswith(CLIENT_FILE)
    }
    if not files:
        return settings
    pulsar = client_module()
    if client_keys.CA in files:
        settings["tls_trust_certs_file_path"] = files[client_keys.CA]
        settings["tls_validate_hostname"] = True
    how = client_keys.authentication(files)
    if how == "tls":
        settings["authentication"] = pulsar.AuthenticationTLS(files[client_keys.CERT], files[client_keys.KEY])
    elif client_keys.CERT in files:  # a client certificate beside another authentication
        settings["tls_certificate_file_path"] = files[client_keys.CERT]
        settings["tls_private_key_file_path"] = files[client_keys.KEY]
    if how == "token":
        settings["authentication"] = pulsar.AuthenticationToken(_text(files[client_keys.TOKEN]))
    elif how == "oauth2":
        params = {
            "type": "client_credentials",
            "issuer_url": _text(files[client_keys.OAUTH2_ISSUER]),
            "audience": _text(files[client_keys.OAUTH2_AUDIENCE]),
            "private_key": f"file://{files[client_keys.OAUTH2_CREDENTIALS]}",
        }
        if client_keys.OAUTH2_SCOPE in files:
            params["scope"] = _text(files[client_keys.OAUTH2_SCOPE])
        settings["authentication"] = pulsar.AuthenticationOauth2(json.dumps(params))
    return settings


def _text(path: str) -> str:
    """One setting's file, as its text without surrounding white space (a Secret written with
    ``echo`` ends in a newline)."""
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise BadInput(f"--pulsar-client: cannot read {path}: {error}") from None


def _quiet_logger(pulsar: ModuleType) -> Any:
    """The C++ client logs every connection on stderr: nothing, as the Kafka reader logs
    nothing. A logger of the C++ client's own, not a Python one: a client given a Python logger
    can abort the process at exit ("terminate called without an active exception", now and
    then), which made a finished command fail."""
    return pulsar.FileLogger(pulsar.LoggerLevel.Error, os.devnull)


def id_key(message_id: Any) -> IdKey:
    return (int(message_id.ledger_id()), int(message_id.entry_id()), int(message_id.batch_index()))


class PulsarReader:
    """Readers on one Pulsar dead-letter topic. ``timeout_ms`` bounds each request and each wait
    for the next message."""

    def __init__(self, target: Target, *, timeout_ms: int) -> None:
        self.pulsar = client_module()
        self.target = target
        self.topic = target.topic
        self.timeout_ms = timeout_ms
        self.expired: dict[int, list[Span]] = {}
        self._partitions: list[tuple[int, str]] | None = None
        try:
            self.client = self.pulsar.Client(
                **client_settings(target, timeout_ms=timeout_ms), logger=_quiet_logger(self.pulsar)
            )
        except (self.pulsar.PulsarException, ValueError) as error:
            raise BadInput(f"Pulsar client settings: {error}") from None

    @property
    def broker(self) -> str:
        return f"the Pulsar broker at {self.target.address}"

    def _failed(self, what: str, error: Exception) -> TriageError:
        """``what`` names the broker (``self.broker``); the client's error says why."""
        said = (str(error) or type(error).__name__).removeprefix("Pulsar error: ")
        if isinstance(error, self.pulsar.TopicNotFound) or "TopicNotFound" in said:
            return Unreachable(f"the dead-letter topic {self.topic!r} does not exist on {self.broker}")
        if isinstance(error, self.pulsar.Timeout):
            said = f"no answer within {self.timeout_ms / 1000:g}s"
            if any(key.startswith(CLIENT_FILE) for key in self.target.client):
                # The C++ client retries a refused handshake until its timeout, saying nothing else.
                said += (
                    " (a broker that refuses the --pulsar-client token or certificate does not answer either)"
                )
        return Unreachable(f"{what} ({self.target.broker_origin}): {said}")

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> PulsarReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def partitions(self) -> list[tuple[int, str]]:
        """``(index, topic name)`` of each partition: ``[(-1, topic)]`` for a non-partitioned topic."""
        if self._partitions is None:
            full = pulsar_topic(self.topic).full_name
            try:
                names = list(self.client.get_topic_partitions(full))
            except self.pulsar.PulsarException as error:
                raise self._failed(f"cannot reach {self.broker}", error) from None
            if names == [full]:
                self._partitions = [(-1, full)]
            else:
                self._partitions = sorted((int(name.rsplit("-partition-", 1)[1]), name) for name in names)
        return self._partitions

    def _reader(self, name: str, start: Any, *, inclusive: bool = False) -> Any:
        try:
            return self.client.create_reader(
                name, start, start_message_id_inclusive=inclusive, receiver_queue_size=500
            )
        except self.pulsar.PulsarException as error:
            raise self._failed(f"cannot read {name!r} from {self.broker}", error) from None

    def _last(self, name: str) -> IdKey | None:
        """The id of the partition's last message now; None when it holds none."""
        reader = self._reader(name, self.pulsar.MessageId.latest, inclusive=True)
        try:
            if not reader.has_message_available():
                return None
            return id_key(reader.read_next(self.timeout_ms).message_id())
        except self.pulsar.PulsarException as error:
            raise self._failed(f"cannot read the end of {name!r} from {self.broker}", error) from None
        finally:
            reader.close()

    def read(
        self, window: Window, *, progress: Callable[[int, int], None] | None = None
    ) -> Iterator[DeadLetter]:
        """Every message of each partition from the window's start (sought by publish time,
        SEEK_MARGIN_MS early) up to its last message when the read started. ``progress`` is
        not called: Pulsar gives no count of what is left to read."""
        del progress
        for index, name in self.partitions():
            last = self._last(name)
            if last is None:
                continue
            reader = self._reader(name, self.pulsar.MessageId.earliest)
            try:
                if window.after is not None:
                    reader.seek(max(window.after - SEEK_MARGIN_MS, 0))
                # Up to the last entry (a producer's batch is one entry: all of its messages).
                while reader.has_message_available():
                    message = reader.read_next(self.timeout_ms)
                    if id_key(message.message_id())[:2] > last[:2]:
                        break
                    yield self._letter(message, index)
            except self.pulsar.PulsarException as error:
                raise self._failed(f"reading {name!r} from {self.broker}", error) from None
            finally:
                reader.close()

    def fetch(self, partition: int, offset: int) -> DeadLetter:
        """The message at ``partition/offset`` (the packed message id)."""
        found = dict(self.partitions())
        if partition not in found:
            indexes = sorted(found)
            kept = "-1 (not partitioned)" if indexes == [-1] else f"0-{indexes[-1]}"
            raise BadInput(f"partition {partition} does not exist in {self.topic!r} (partitions {kept})")
        ledger, entry, batch = pulsar_id_parts(offset)
        # Batch index -1 (no batch) starts at the entry's first message, of a batch or not.
        start = self.pulsar.MessageId(
            partition=partition, ledger_id=ledger, entry_id=entry, batch_index=batch or -1
        )
        reader = self._reader(found[partition], start, inclusive=True)
        try:
            while reader.has_message_available():
                message = reader.read_next(self.timeout_ms)
                found_at = pulsar_offset(*id_key(message.message_id()))
                if found_at == offset:
                    return self._letter(message, partition)
                if found_at > offset:
                    break
        except self.pulsar.PulsarException as error:
            raise self._failed(
                f"reading {partition}/{offset} of {self.topic!r} from {self.broker}", error
            ) from None
        finally:
            reader.close()
        raise BadInput(
            f"no message at {partition}/{offset} of {self.topic!r} (message id {ledger}:{entry}"
            f"{f':{batch}' if batch > 0 else ''}: deleted by the broker, or never written)"
        )

    def _letter(self, message: Any, partition: int) -> DeadLetter:
        ident = message.message_id()
        key = message.partition_key()
        return DeadLetter(
            partition=partition,
            offset=pulsar_offset(int(ident.ledger_id()), int(ident.entry_id()), int(ident.batch_index())),
            timestamp=int(message.publish_timestamp()) or None,
            key=key.encode("utf-8") if key else None,
            value=message.data(),
            headers=tuple((name, value.encode("utf-8")) for name, value in message.properties().items()),
        )
