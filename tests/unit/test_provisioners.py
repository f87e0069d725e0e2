"""The provisioner registry: every provisioner a policy can resolve to is found by its broker and
name, and none is found for a pair the model does not allow."""

from __future__ import annotations

import pytest

from dlq_engine.model.policy import PROVISIONERS
from spark_dlq_operator.provisioners import Provisioners
from spark_dlq_operator.topics import AdminProvisioner, PulsarProvisioner, StrimziProvisioner
from tests.unit.fake_kube import FakeKube

pytestmark = pytest.mark.unit


def _registry() -> Provisioners:
    return Provisioners(
        admin=AdminProvisioner(timeout=1.0),
        strimzi=StrimziProvisioner(FakeKube()),
        pulsar=PulsarProvisioner(timeout=1.0),
        credentials=lambda _: None,
    )


@pytest.mark.parametrize(
    ("broker", "name"),
    [
        *(pytest.param("kafka", name, id=f"kafka-{name}") for name in PROVISIONERS if name != "auto"),
        pytest.param("pulsar", "pulsar", id="pulsar"),
    ],
)
def test_lookup_finds_every_resolved_provisioner(broker: str, name: str) -> None:
    assert _registry().lookup(broker, name).name == name  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("broker", "name"),
    [pytest.param("pulsar", "admin", id="pulsar-admin"), pytest.param("kafka", "pulsar", id="kafka-pulsar")],
)
def test_lookup_refuses_a_pair_the_model_does_not_allow(broker: str, name: str) -> None:
    with pytest.raises(KeyError):
        _registry().lookup(broker, name)  # type: ignore[arg-type]
