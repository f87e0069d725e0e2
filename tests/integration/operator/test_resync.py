"""The resync against a listing older than the policy: it must not roll a change back.

A resync round lists the policies, then the ConfigMaps, then the SparkApplications, and
reconciles each policy later, under its lock. A policy changed in between (and the change
applied by kopf's handler) is listed in its old version next to the new objects: written from
that listing, the SparkApplication would go back to the old configuration until the next round.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dlq_engine.model import config_hash, parse_policy
from spark_dlq_operator import kubeapi
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.events import EventRecorder
from spark_dlq_operator.policies.services import Seen, Services
from spark_dlq_operator.resync import Resync
from spark_dlq_operator.topics import AdminProvisioner, StrimziProvisioner
from tests.integration.operator.conftest import Cluster, RunningOperator, policy_document, wait_for


async def _resync_one(config: OperatorConfig, body: dict[str, Any], seen: Seen) -> bool:
    api = kubeapi.KubeApi(await kubeapi.load_configuration(config.kubeconfig))
    services = Services(
        config=config,
        api=api,
        events=EventRecorder(api, instance="test"),
        admin=AdminProvisioner(timeout=config.kafka_timeout),
        strimzi=StrimziProvisioner(api),
    )
    try:
        return await Resync(services)._reconcile(body, seen)
    finally:
        await services.close()


def test_a_stale_listing_does_not_roll_a_change_back(
    operator: RunningOperator, cluster: Cluster, namespace: str, bootstrap_servers: str
) -> None:
    cluster.create_policy(
        policy_document(
            namespace, "billing", source="orders", bootstrap=bootstrap_servers, topics={"create": False}
        )
    )
    wait_for(lambda: cluster.status("billing").get("configHash"), what="the first reconcile")
    stale = cluster.policy("billing")
    assert stale is not None

    cluster.patch_policy("billing", {"spec": {"spark": {"trigger": "5s"}}})
    digest = config_hash(parse_policy(cluster.policy("billing")))
    assert digest != config_hash(parse_policy(stale))
    wait_for(lambda: cluster.status("billing").get("configHash") == digest, what="the change applied")

    config_map = cluster.core.api_client.sanitize_for_serialization(cluster.config_map("billing-policy"))
    app = cluster.application("billing")
    seen = Seen(policy=stale, listed=True, config_map=config_map, application=app)
    assert asyncio.run(_resync_one(operator.config, stale, seen)) is True

    app = cluster.application("billing")
    assert app is not None
    assert app["metadata"]["annotations"]["sparkdlq.io/config-hash"] == digest
    assert "trigger: 5s" in cluster.config_map("billing-policy").data["policy.yaml"]
    status = cluster.status("billing")
    assert (status["configHash"], status["restartCount"]) == (digest, 1)
