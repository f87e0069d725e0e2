"""Which provisioner makes a policy's topics: one ``Provisioner`` protocol, looked up by the
policy's broker and the provisioner it resolved to.

The three provisioners of ``topics`` ask for different things (the Admin API the operator's
credentials for the broker, Strimzi the topics the cluster already has, Pulsar the operator's
credentials for its admin API);
this module binds those once, so the reconcile and the clean-up ask one ``Provisioner`` to
``ensure`` or ``delete`` a policy's topics and never branch on which one it is. A broker and
provisioner pair with no provisioner is a ``KeyError``: the policy model allows only the pairs
registered here (``admin`` and ``strimzi`` for Kafka, ``pulsar`` for Pulsar).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from dlq_engine.model import DeadLetterPolicy
from dlq_engine.model.policy import BrokerType
from spark_dlq_operator.naming import Owner
from spark_dlq_operator.topics import (
    AdminProvisioner,
    Credentials,
    PulsarProvisioner,
    StrimziProvisioner,
    TopicsReport,
)


class Provisioner(Protocol):
    """Makes a policy's retry and dead-letter topics exist, and deletes the ones it created."""

    @property
    def name(self) -> str:
        """The provisioner's name, as ``spec.topics.provisioner`` and events say it."""
        ...

    async def ensure(self, policy: DeadLetterPolicy, *, owner: Owner, owned: Collection[str]) -> TopicsReport:
        """Create what is missing; ``owned``: the topics recorded as created for the policy."""
        ...

    async def delete(self, policy: DeadLetterPolicy, names: Sequence[str], *, owner: Owner) -> list[str]:
        """Delete the topics ``names`` (created for the policy); the names that were deleted."""
        ...


#: The operator's settings for a policy's broker, librdkafka's or the Pulsar client's
#: (``ClassCatalog.admin_config``).
CredentialsOf = Callable[[DeadLetterPolicy], Credentials]


@dataclass(frozen=True, slots=True)
class _Admin:
    admin: AdminProvisioner
    credentials: CredentialsOf
    name: str = AdminProvisioner.name

    async def ensure(self, policy: DeadLetterPolicy, *, owner: Owner, owned: Collection[str]) -> TopicsReport:
        return await self.admin.ensure(policy, credentials=self.credentials(policy))

    async def delete(self, policy: DeadLetterPolicy, names: Sequence[str], *, owner: Owner) -> list[str]:
        return await self.admin.delete(policy, names, credentials=self.credentials(policy))


@dataclass(frozen=True, slots=True)
class _Strimzi:
    strimzi: StrimziProvisioner
    #: Asked for the topics the Kafka cluster has before a KafkaTopic takes one over.
    admin: AdminProvisioner
    credentials: CredentialsOf
    name: str = StrimziProvisioner.name

    async def ensure(self, policy: DeadLetterPolicy, *, owner: Owner, owned: Collection[str]) -> TopicsReport:
        return await self.strimzi.ensure(
            policy,
            owner=owner,
            owned=owned,
            on_cluster=lambda: self.admin.existing(policy, credentials=self.credentials(policy)),
        )

    async def delete(self, policy: DeadLetterPolicy, names: Sequence[str], *, owner: Owner) -> list[str]:
        return await self.strimzi.delete(policy, names, owner=owner)


@dataclass(frozen=True, slots=True)
class _Pulsar:
    pulsar: PulsarProvisioner
    credentials: CredentialsOf
    name: str = PulsarProvisioner.name

    async def ensure(self, policy: DeadLetterPolicy, *, owner: Owner, owned: Collection[str]) -> TopicsReport:
        return await self.pulsar.ensure(
            policy, owner=owner, owned=owned, credentials=self.credentials(policy)
        )

    async def delete(self, policy: DeadLetterPolicy, names: Sequence[str], *, owner: Owner) -> list[str]:
        return await self.pulsar.delete(policy, names, credentials=self.credentials(policy))


class Provisioners:
    """The operator's provisioners, by (broker type, provisioner name)."""

    def __init__(
        self,
        *,
        admin: AdminProvisioner,
        strimzi: StrimziProvisioner,
        pulsar: PulsarProvisioner,
        credentials: CredentialsOf,
    ) -> None:
        self._by_key: dict[tuple[BrokerType, str], Provisioner] = {
            ("kafka", AdminProvisioner.name): _Admin(admin, credentials),
            ("kafka", StrimziProvisioner.name): _Strimzi(strimzi, admin, credentials),
            ("pulsar", PulsarProvisioner.name): _Pulsar(pulsar, credentials),
        }

    def lookup(self, broker: BrokerType, provisioner: str) -> Provisioner:
        """The provisioner ``provisioner`` for a policy on a ``broker`` (KeyError when none)."""
        return self._by_key[(broker, provisioner)]

    def of(self, policy: DeadLetterPolicy, provisioner: str) -> Provisioner:
        """``lookup`` for ``policy``'s broker."""
        return self.lookup(policy.broker.type, provisioner)
