"""The reconcile's I/O logic on an in-memory API server (``tests/unit/fake_kube.py``): conflicts,
409 loops, adoption, drift and what is read before writing. The same paths against the real API
server are in ``tests/integration/operator``; these run in milliseconds and reach the branches a
real server only takes under a race."""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any

import pytest

from dlq_engine.model import config_hash, parse_policy
from spark_dlq_operator import naming
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.events import EventRecorder
from spark_dlq_operator.kubeapi import ApiError
from spark_dlq_operator.policies.application_state import JOB_RESTARTING
from spark_dlq_operator.policies.provisioning import resolve_provisioner
from spark_dlq_operator.policies.reconcile import reconcile
from spark_dlq_operator.policies.services import Seen, Services, owner_of
from spark_dlq_operator.policies.supervisor import supervise
from spark_dlq_operator.policies.watcher import update_job_status
from spark_dlq_operator.policy_class import CLASS_PLURAL, DEFAULT_CLASS_ANNOTATION
from spark_dlq_operator.reasons import Reason
from spark_dlq_operator.topics import AdminProvisioner, StrimziProvisioner
from tests.policy_builder import policy_document
from tests.unit.fake_kube import FakeKube

NAMESPACE = "payments"
POLICIES, APPS, CONFIG_MAPS, EVENTS = "deadletterpolicies", "sparkapplications", "configmaps", "events"
ACCOUNTS, LEASES, ROLES, BINDINGS = "serviceaccounts", "leases", "roles", "rolebindings"


class Bed:
    """A fake API server with one policy in it, and the operator's services on top."""

    def __init__(self, config: OperatorConfig | None = None, **overrides: Any) -> None:
        self.api = FakeKube()
        self.config = config or OperatorConfig(namespaces=(NAMESPACE,))
        self.services = Services(
            config=self.config,
            api=self.api,
            events=EventRecorder(self.api, instance="test"),
            admin=AdminProvisioner(timeout=1.0),
            strimzi=StrimziProvisioner(self.api),
        )
        self.body = self.api.put(POLICIES, policy_document({"spec.topics.create": False, **overrides}))

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def app_name(self) -> str:
        return naming.application_name(self.name)

    def change(self, overrides: dict[str, Any]) -> None:
        """The user edits the policy's spec."""
        for path, value in overrides.items():
            *parents, last = path.removeprefix("spec.").split(".")

            def edit(
                obj: dict[str, Any], parents: list[str] = parents, last: str = last, value: Any = value
            ) -> None:
                node = obj["spec"]
                for key in parents:
                    node = node.setdefault(key, {})
                node[last] = value
                obj["metadata"]["generation"] += 1

            self.api.edit(POLICIES, NAMESPACE, self.name, edit)
        self.body = self.policy()

    def policy(self) -> dict[str, Any]:
        found = self.api.stored(POLICIES, NAMESPACE, self.name)
        assert found is not None
        return found

    def reconcile(self, seen: Seen | None = None) -> None:
        body = self.policy()
        asyncio.run(self._reconcile(body, seen))

    async def _reconcile(self, body: dict[str, Any], seen: Seen | None) -> None:
        governed = await self.services.classes.govern(body)
        await reconcile(
            self.services,
            governed.policy,
            fit=governed.fit,
            owner=owner_of(body),
            generation=body["metadata"]["generation"],
            trigger="test",
            seen=seen,
        )
        await self.services.events.close()

    def status(self) -> dict[str, Any]:
        return dict(self.policy().get("status") or {})

    def condition(self, kind: str) -> dict[str, Any]:
        return next(c for c in self.status()["conditions"] if c["type"] == kind)

    def app(self) -> dict[str, Any]:
        found = self.api.stored(APPS, NAMESPACE, self.app_name)
        assert found is not None
        return found

    def reasons(self) -> list[str]:
        return [e["reason"] for e in self.api.of(EVENTS)]


@pytest.fixture
def bed() -> Bed:
    return Bed()


def test_a_new_policy_is_created_without_reads_of_its_objects(bed: Bed) -> None:
    bed.reconcile(Seen(policy=bed.policy(), created=True))

    app = bed.app()
    assert app["metadata"]["ownerReferences"][0]["uid"] == bed.body["metadata"]["uid"]
    assert app["metadata"]["annotations"][naming.CONFIG_HASH_ANNOTATION] == config_hash(
        parse_policy(bed.body)
    )
    assert bed.api.stored(CONFIG_MAPS, NAMESPACE, naming.config_map_name(bed.name)) is not None
    for plural in (APPS, CONFIG_MAPS, ACCOUNTS, LEASES, ROLES, BINDINGS):
        assert bed.api.count("GET", plural) == 0, plural
    assert bed.condition("TopicsReady")["reason"] == "NotManaged"
    assert bed.status()["configHash"] == config_hash(parse_policy(bed.body))
    assert sorted(bed.reasons()) == ["ConfigMapCreated", "IdentityCreated", "SparkApplicationCreated"]


def test_a_policy_being_deleted_is_not_reconciled_from_an_older_read(bed: Bed) -> None:
    """A resync listed the policy before its deletion began; the delete handler has marked it
    (and deleted its topics): that reconcile writes nothing, so it creates nothing again."""
    listed = bed.policy()
    bed.services.end(listed["metadata"]["uid"])
    calls = len(bed.api.calls)
    bed.reconcile(Seen(policy=listed, created=True))
    # (the classes are read by the test's own governing of the policy, before the reconcile)
    assert [call for call in bed.api.calls[calls:] if not call[1].endswith("/deadletterpolicyclasses")] == []
    assert bed.api.stored(APPS, NAMESPACE, bed.app_name) is None


def test_created_but_already_there_reads_and_adopts_what_exists(bed: Bed) -> None:
    """After an operator restart kopf may report a policy as new whose objects exist: the
    create's 409 makes it read them, and nothing is restarted."""
    bed.reconcile()
    calls = len(bed.api.calls)
    bed.reconcile(Seen(policy=bed.policy(), created=True))

    assert (
        "POST",
        f"/apis/{naming.SPARK_GROUP}/{naming.SPARK_VERSION_API}/namespaces/{NAMESPACE}/{APPS}",
    ) in bed.api.calls[calls:]
    assert bed.api.count("PUT", APPS) == 0
    assert "SparkApplicationRestarted" not in bed.reasons()


def test_a_spec_change_restarts_the_application_once(bed: Bed) -> None:
    bed.reconcile()
    bed.change({"spec.spark.trigger": "5s"})
    bed.reconcile()

    assert bed.app()["metadata"]["annotations"][naming.CONFIG_HASH_ANNOTATION] == config_hash(
        parse_policy(bed.body)
    )
    assert bed.reasons().count("SparkApplicationRestarted") == 1
    assert bed.condition("JobRunning")["reason"] == JOB_RESTARTING.reason


def test_a_conflict_on_replace_reads_again_and_keeps_the_other_writers_change(bed: Bed) -> None:
    bed.reconcile()
    bed.change({"spec.spark.trigger": "5s"})

    def someone_labels_it() -> None:
        bed.api.edit(APPS, NAMESPACE, bed.app_name, lambda o: o["metadata"]["labels"].update(team="billing"))

    bed.api.before("PUT", APPS, someone_labels_it)
    bed.reconcile()

    app = bed.app()
    assert app["metadata"]["labels"]["team"] == "billing"
    assert app["metadata"]["annotations"][naming.CONFIG_HASH_ANNOTATION] == config_hash(
        parse_policy(bed.body)
    )
    assert bed.api.count("PUT", APPS) == 2
    assert bed.reasons().count("SparkApplicationRestarted") == 1


def test_an_application_deleted_during_the_conflict_is_created_again(bed: Bed) -> None:
    bed.reconcile()
    bed.change({"spec.spark.trigger": "5s"})
    bed.api.before("PUT", APPS, lambda: bed.api.objects.pop((APPS, NAMESPACE, bed.app_name)))
    bed.api.fail("PUT", APPS, 409)
    bed.reconcile()

    assert bed.app()["metadata"]["annotations"][naming.CONFIG_HASH_ANNOTATION] == config_hash(
        parse_policy(bed.body)
    )


def test_an_application_that_keeps_changing_gives_up_with_a_conflict(bed: Bed) -> None:
    bed.reconcile()
    bed.change({"spec.spark.trigger": "5s"})
    bed.api.fail("PUT", APPS, 409, times=100)

    with pytest.raises(ApiError, match="kept changing") as raised:
        bed.reconcile()
    assert raised.value.status == 409
    assert bed.api.count("PUT", APPS) == 5


def test_status_conflicts_are_retried_then_given_up(bed: Bed) -> None:
    bed.api.fail("PATCH", POLICIES, 409, times=3)
    bed.reconcile()
    assert bed.status()["configHash"] == config_hash(parse_policy(bed.body))

    bed.change({"spec.spark.trigger": "5s"})
    bed.api.fail("PATCH", POLICIES, 409, times=100)
    with pytest.raises(ApiError, match="status of payments/orders-billing kept changing"):
        bed.reconcile()


def test_an_orphaned_application_is_adopted_without_a_restart(bed: Bed) -> None:
    """Deleted with --cascade=orphan and applied again: the new policy (a new uid) takes the
    running application over, as it is, when its configuration is the same."""
    bed.reconcile()
    bed.api.edit(APPS, NAMESPACE, bed.app_name, lambda o: o["metadata"].pop("ownerReferences"))
    generation = bed.app()["metadata"]["generation"]
    bed.reconcile()

    app = bed.app()
    assert app["metadata"]["ownerReferences"][0]["uid"] == bed.body["metadata"]["uid"]
    assert app["metadata"]["generation"] == generation
    assert "SparkApplicationRestarted" not in bed.reasons()


def test_an_application_of_another_policy_is_a_conflict_and_left_alone(bed: Bed) -> None:
    bed.reconcile()
    bed.api.edit(
        APPS,
        NAMESPACE,
        bed.app_name,
        lambda o: o["metadata"]["ownerReferences"][0].update(uid="another-uid", name="other"),
    )
    before = bed.app()
    bed.reconcile()

    job = bed.condition("JobRunning")
    assert (job["status"], job["reason"]) == ("False", "Conflict")
    assert "belongs to DeadLetterPolicy other" in job["message"]
    assert bed.app() == before


def test_an_unmanaged_application_of_the_same_name_is_a_conflict(bed: Bed) -> None:
    bed.api.put(
        APPS, {"metadata": {"name": bed.app_name, "namespace": NAMESPACE}, "spec": {"type": "Python"}}
    )
    bed.reconcile()

    job = bed.condition("JobRunning")
    assert (job["status"], job["reason"]) == ("False", "Conflict")
    assert "is not managed by spark-dlq" in job["message"]
    assert bed.app()["spec"] == {"type": "Python"}


def test_drift_of_the_config_map_is_repaired(bed: Bed) -> None:
    bed.reconcile()
    name = naming.config_map_name(bed.name)
    wanted = bed.api.stored(CONFIG_MAPS, NAMESPACE, name)
    assert wanted is not None
    bed.api.edit(CONFIG_MAPS, NAMESPACE, name, lambda o: o["data"].update({naming.POLICY_FILE_KEY: "edited"}))
    bed.reconcile()

    repaired = bed.api.stored(CONFIG_MAPS, NAMESPACE, name)
    assert repaired is not None
    assert repaired["data"] == wanted["data"]
    assert "ConfigMapUpdated" in bed.reasons()


def test_a_listing_older_than_the_policy_writes_nothing(bed: Bed) -> None:
    """A resync lists the policy, then the ConfigMap and application after a change was
    applied: written from the listed policy they would roll the change back."""
    bed.reconcile()
    stale = bed.policy()
    bed.change({"spec.spark.trigger": "5s"})
    bed.reconcile()
    config_map = bed.api.stored(CONFIG_MAPS, NAMESPACE, naming.config_map_name(bed.name))
    app = bed.app()
    writes = [c for c in bed.api.calls if c[0] != "GET"]

    asyncio.run(
        bed._reconcile(stale, Seen(policy=stale, listed=True, config_map=config_map, application=app))
    )

    assert [c for c in bed.api.calls if c[0] != "GET"] == writes


def test_a_listing_that_knows_an_object_is_absent_creates_it_without_a_read(bed: Bed) -> None:
    bed.reconcile()
    config_map = bed.api.stored(CONFIG_MAPS, NAMESPACE, naming.config_map_name(bed.name))
    bed.api.objects.pop((APPS, NAMESPACE, bed.app_name))
    gets = bed.api.count("GET", APPS)

    bed.reconcile(Seen(policy=bed.policy(), listed=True, config_map=config_map, application=None))

    assert bed.api.count("GET", APPS) == gets
    assert bed.app()["metadata"]["annotations"][naming.CONFIG_HASH_ANNOTATION] == config_hash(
        parse_policy(bed.body)
    )


def test_suspend_deletes_the_application_and_resume_creates_it(bed: Bed) -> None:
    bed.reconcile()
    bed.change({"spec.suspend": True})
    bed.reconcile(Seen(policy=bed.policy(), created=True))  # suspended: read even when new

    assert bed.api.stored(APPS, NAMESPACE, bed.app_name) is None
    assert "SparkApplicationDeleted" in bed.reasons()
    assert bed.condition("JobRunning")["reason"] == "Suspended"

    bed.change({"spec.suspend": False})
    bed.reconcile()
    assert bed.app()["metadata"]["annotations"][naming.CONFIG_HASH_ANNOTATION] == config_hash(
        parse_policy(bed.body)
    )


def test_a_refused_application_is_reported_not_raised(bed: Bed) -> None:
    bed.api.fail("POST", APPS, 422)
    bed.reconcile()

    job = bed.condition("JobRunning")
    assert (job["status"], job["reason"]) == ("False", "SparkApplicationRefused")


def test_a_failed_application_is_resubmitted_once_while_its_patch_is_on_the_way(bed: Bed) -> None:
    """The resubmission's own watch event (or a timer, or a resync round) can look at the
    application while the patch's response is still on its way: it must not resubmit the same
    submission again."""
    bed.reconcile()
    ended = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=120)

    def failed(app: dict[str, Any]) -> None:
        app["status"] = {
            "applicationState": {"state": "FAILED"},
            "submissionID": "2",
            "terminationTime": ended.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    bed.api.edit(APPS, NAMESPACE, bed.app_name, failed)
    serve = bed.api._call

    async def slow_reply(method: str, path: str, **options: Any) -> Any:
        reply = await serve(method, path, **options)
        if method == "PATCH" and "/sparkapplications/" in path:
            await asyncio.sleep(0.05)  # applied by the server, the reply not back yet
        return reply

    bed.api._call = slow_reply  # type: ignore[method-assign]

    async def both() -> None:
        first = asyncio.create_task(update_job_status(bed.services, bed.app()))
        await asyncio.sleep(0.01)
        await update_job_status(bed.services, bed.app())  # the patched application, as its event
        await first
        await bed.services.events.close()

    asyncio.run(both())
    annotations = bed.app()["spec"]["driver"]["annotations"]
    assert annotations[naming.RESUBMIT_ANNOTATION] == "1"
    assert bed.reasons().count("SparkApplicationResubmitted") == 1


def _running_with_heartbeat(
    bed: Bed, ordering: dict[str, Any] | None, *, breaker: dict[str, Any] | None = None
) -> None:
    """The application RUNNING since a minute, and its driver's heartbeat on the Lease."""
    now = datetime.datetime.now(datetime.UTC)
    submitted = (now - datetime.timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def running(app: dict[str, Any]) -> None:
        app["status"] = {
            "applicationState": {"state": "RUNNING"},
            "submissionID": "1",
            "lastSubmissionAttemptTime": submitted,
        }

    beat: dict[str, Any] = {
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "queryActive": True,
        "lastProgressTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "batchId": 4,
    }
    if ordering is not None:
        beat["ordering"] = ordering
    if breaker is not None:
        beat["breaker"] = breaker

    def annotate(lease: dict[str, Any]) -> None:
        annotations = lease["metadata"].setdefault("annotations", {})
        annotations[naming.HEARTBEAT_ANNOTATION] = json.dumps(beat)

    bed.api.edit(APPS, NAMESPACE, bed.app_name, running)
    bed.api.edit(LEASES, NAMESPACE, naming.lease_name(bed.name), annotate)


def _supervise(bed: Bed) -> None:
    async def run() -> None:
        await supervise(
            bed.services,
            owner=owner_of(bed.body),
            app=bed.app(),
            lease=bed.api.stored(LEASES, NAMESPACE, naming.lease_name(bed.name)),
            policy=bed.policy(),
        )
        await bed.services.events.close()

    asyncio.run(run())


HELD = {"heldMessages": 3, "blockedKeys": 1, "blockedKeySample": ["order-7"]}


def test_the_heartbeats_ordering_report_is_written_to_the_status_once() -> None:
    bed = Bed(**{"spec.source.ordering": "key"})
    bed.reconcile()
    _running_with_heartbeat(bed, HELD)

    _supervise(bed)
    assert bed.status()["ordering"] == HELD
    writes = bed.api.count("PATCH", POLICIES)
    _supervise(bed)  # the same report: nothing to write
    assert bed.api.count("PATCH", POLICIES) == writes
    _running_with_heartbeat(bed, {**HELD, "heldMessages": 0, "blockedKeys": 0, "blockedKeySample": []})
    _supervise(bed)
    assert bed.status()["ordering"] == {"heldMessages": 0, "blockedKeys": 0, "blockedKeySample": []}


def test_the_ordering_status_goes_when_the_policy_stops_ordering_by_key() -> None:
    bed = Bed(**{"spec.source.ordering": "key"})
    bed.reconcile()
    _running_with_heartbeat(bed, HELD)
    _supervise(bed)
    assert "ordering" in bed.status()

    bed.change({"spec.source.ordering": "none"})
    bed.reconcile()
    assert "ordering" not in bed.status()
    _running_with_heartbeat(bed, None)  # the new driver reports no ordering
    _supervise(bed)
    assert "ordering" not in bed.status()


def _breaker_report(state: str, opens: int) -> dict[str, Any]:
    return {
        "state": state,
        "since": "2026-11-24T11:58:00Z",
        "reason": "20 of the last 20 processor calls failed transiently (ConnectionRefusedError)",
        "opens": opens,
        "probeAt": "2026-11-24T11:58:30Z" if state == "open" else "",
    }


def _breaker(bed: Bed) -> dict[str, Any]:
    return next(c for c in bed.status()["conditions"] if c["type"] == "BreakerClosed")


def test_the_breaker_s_report_becomes_a_condition_with_an_event_when_it_opens_and_closes() -> None:
    bed = Bed(**{"spec.retry.breaker": {}})
    bed.reconcile()
    _running_with_heartbeat(bed, None, breaker=_breaker_report("closed", 0))
    _supervise(bed)
    assert (_breaker(bed)["status"], _breaker(bed)["reason"]) == ("True", Reason.BREAKER_CLOSED)
    assert Reason.BREAKER_OPEN not in bed.reasons()
    assert "BreakerClosed" not in bed.reasons()

    ready = bed.status()["conditions"][0]
    _running_with_heartbeat(bed, None, breaker=_breaker_report("open", 1))
    _supervise(bed)
    condition = _breaker(bed)
    assert (condition["status"], condition["reason"]) == ("False", Reason.BREAKER_OPEN)
    assert "at 2026-11-24T11:58:00Z because 20 of the last 20 processor calls" in condition["message"]
    assert bed.reasons().count(Reason.BREAKER_OPEN) == 1
    assert bed.status()["conditions"][0] == ready  # paused, not failed: Ready is the job's

    writes = bed.api.count("PATCH", POLICIES)
    _supervise(bed)  # the same report: nothing to write
    assert bed.api.count("PATCH", POLICIES) == writes

    _running_with_heartbeat(bed, None, breaker=_breaker_report("half-open", 1))
    _supervise(bed)
    _running_with_heartbeat(bed, None, breaker=_breaker_report("open", 2))
    _supervise(bed)
    assert _breaker(bed)["reason"] == Reason.BREAKER_OPEN
    assert bed.reasons().count(Reason.BREAKER_OPEN) == 1  # open and half-open in turn: one event

    _running_with_heartbeat(bed, None, breaker=_breaker_report("closed", 2))
    _supervise(bed)
    assert (_breaker(bed)["status"], _breaker(bed)["reason"]) == ("True", Reason.BREAKER_CLOSED)
    assert bed.reasons().count("BreakerClosed") == 1


def test_the_breaker_condition_goes_when_the_policy_drops_its_breaker() -> None:
    bed = Bed(**{"spec.retry.breaker": {}})
    bed.reconcile()
    _running_with_heartbeat(bed, None, breaker=_breaker_report("open", 1))
    _supervise(bed)
    assert any(c["type"] == "BreakerClosed" for c in bed.status()["conditions"])

    bed.change({"spec.retry.breaker": None})
    bed.reconcile()
    assert all(c["type"] != "BreakerClosed" for c in bed.status()["conditions"])


def test_a_pulsar_policy_s_status_names_its_topics_fully_and_its_provisioner_is_pulsar() -> None:
    bed = Bed(
        **{
            "spec.broker": {"type": "pulsar", "serviceUrl": "pulsar://pulsar:6650"},
            "spec.source.topic": "shop/orders/orders",
        }
    )
    bed.reconcile()

    status = bed.status()
    assert status["retryTopic"] == "persistent://shop/orders/orders-billing-RETRY"
    assert status["deadLetterTopic"] == "persistent://shop/orders/orders-billing-DLQ"
    assert bed.condition("TopicsReady")["reason"] == "NotManaged"
    policy = parse_policy(bed.policy())
    assert asyncio.run(resolve_provisioner(bed.services, policy, None)) == "pulsar"


# --- the Spark pods' identity ----------------------------------------------------------------


def _identity(bed: Bed) -> dict[str, dict[str, Any] | None]:
    """The policy's identity objects as stored, by kind."""
    lease = naming.lease_name(bed.name)
    account = naming.service_account_name(bed.name)
    return {
        "ServiceAccount": bed.api.stored(ACCOUNTS, NAMESPACE, account),
        "Lease": bed.api.stored(LEASES, NAMESPACE, lease),
        "Role": bed.api.stored(ROLES, NAMESPACE, lease),
        "RoleBinding heartbeat": bed.api.stored(BINDINGS, NAMESPACE, lease),
        "RoleBinding spark": bed.api.stored(BINDINGS, NAMESPACE, account),
    }


def test_the_spark_pods_run_as_the_policys_own_service_account(bed: Bed) -> None:
    bed.reconcile()

    found = _identity(bed)
    assert all(found.values()), found
    account = naming.service_account_name(bed.name)
    assert bed.app()["spec"]["driver"]["serviceAccount"] == account
    uid = bed.body["metadata"]["uid"]
    for obj in found.values():
        assert obj is not None
        assert obj["metadata"]["ownerReferences"][0]["uid"] == uid
        assert obj["metadata"]["labels"] == naming.labels(bed.name)
    spark = found["RoleBinding spark"]
    assert spark is not None
    assert spark["roleRef"]["name"] == bed.config.spark_driver_cluster_role
    assert spark["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]


def test_a_shared_service_account_is_bound_and_none_is_made() -> None:
    bed = Bed(OperatorConfig(namespaces=(NAMESPACE,), spark_service_account="platform-spark"))
    bed.reconcile()

    found = _identity(bed)
    assert found.pop("ServiceAccount") is None
    assert all(found.values()), found
    shared = [{"kind": "ServiceAccount", "name": "platform-spark", "namespace": NAMESPACE}]
    for key in ("RoleBinding heartbeat", "RoleBinding spark"):
        binding = found[key]
        assert binding is not None
        assert binding["subjects"] == shared
    assert bed.app()["spec"]["driver"]["serviceAccount"] == "platform-spark"


def _default_class(pods: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterPolicyClass",
        "metadata": {"name": "standard", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
        "spec": {"pods": pods},
    }


def test_the_classs_shared_service_account_wins_over_the_operators() -> None:
    bed = Bed(OperatorConfig(namespaces=(NAMESPACE,), spark_service_account="platform-spark"))
    bed.api.put(CLASS_PLURAL, _default_class({"serviceAccountName": "team-spark"}))
    bed.reconcile()

    found = _identity(bed)
    assert found.pop("ServiceAccount") is None
    shared = [{"kind": "ServiceAccount", "name": "team-spark", "namespace": NAMESPACE}]
    for key in ("RoleBinding heartbeat", "RoleBinding spark"):
        binding = found[key]
        assert binding is not None
        assert binding["subjects"] == shared
    assert bed.app()["spec"]["driver"]["serviceAccount"] == "team-spark"


def test_the_class_annotates_the_policys_account_and_may_give_executors_a_token() -> None:
    bed = Bed()
    pods = {
        "serviceAccountAnnotations": {"iam.example.com/role": "orders"},
        "executorServiceAccountToken": True,
    }
    bed.api.put(CLASS_PLURAL, _default_class(pods))
    bed.reconcile()

    account = _identity(bed)["ServiceAccount"]
    assert account is not None
    assert account["metadata"]["annotations"] == {"iam.example.com/role": "orders"}
    executor = bed.app()["spec"]["executor"]["template"]["spec"]
    assert executor["automountServiceAccountToken"] is True


def test_an_identity_object_of_another_policy_stops_the_job_with_a_conflict(bed: Bed) -> None:
    bed.api.put(
        ACCOUNTS,
        {
            "metadata": {
                "name": naming.service_account_name(bed.name),
                "namespace": NAMESPACE,
                "ownerReferences": [
                    {"kind": "DeadLetterPolicy", "name": "other", "uid": "other-uid", "controller": True}
                ],
            }
        },
    )
    bed.reconcile()

    job = bed.condition("JobRunning")
    assert (job["status"], job["reason"]) == ("False", "Conflict")
    assert job["message"] == (
        f"ServiceAccount {naming.service_account_name(bed.name)} belongs to DeadLetterPolicy other: "
        "rename the policy"
    )
    assert bed.api.stored(APPS, NAMESPACE, bed.app_name) is None
    assert bed.api.stored(LEASES, NAMESPACE, naming.lease_name(bed.name)) is None


def test_a_refused_binding_is_reported_and_no_application_is_made(bed: Bed) -> None:
    """The operator may not bind the drivers' ClusterRole (a wrong --spark-driver-cluster-role,
    say): the apiserver's 403 is the condition, nothing runs."""
    bed.api.fail("POST", BINDINGS, 403)
    bed.reconcile()

    job = bed.condition("JobRunning")
    assert (job["status"], job["reason"]) == ("False", "IdentityRefused")
    assert job["message"].startswith(
        f"RoleBinding {naming.lease_name(bed.name)} for the Spark pods was refused: 403"
    )
    assert bed.api.stored(APPS, NAMESPACE, bed.app_name) is None
    assert "IdentityRefused" in bed.reasons()


def test_a_changed_role_is_repaired_by_the_next_reconcile(bed: Bed) -> None:
    bed.reconcile()
    lease = naming.lease_name(bed.name)
    wanted = bed.api.stored(ROLES, NAMESPACE, lease)
    assert wanted is not None
    bed.api.edit(ROLES, NAMESPACE, lease, lambda o: o["rules"][0].update(resourceNames=[]))
    bed.reconcile()

    repaired = bed.api.stored(ROLES, NAMESPACE, lease)
    assert repaired is not None
    assert repaired["rules"] == wanted["rules"]


def test_a_resync_reads_no_identity_object_while_the_lease_is_listed_and_recreates_a_lost_one(
    bed: Bed,
) -> None:
    bed.reconcile()
    listed = {
        "config_map": bed.api.stored(CONFIG_MAPS, NAMESPACE, naming.config_map_name(bed.name)),
        "application": bed.app(),
    }
    lease = bed.api.stored(LEASES, NAMESPACE, naming.lease_name(bed.name))
    before = list(bed.api.calls)
    bed.reconcile(Seen(policy=bed.policy(), listed=True, lease=lease, **listed))
    touched = [
        c
        for c in bed.api.calls[len(before) :]
        if any(f"/{p}" in c[1] for p in (ACCOUNTS, LEASES, ROLES, BINDINGS))
    ]
    assert touched == []

    bed.api.objects.pop((LEASES, NAMESPACE, naming.lease_name(bed.name)))
    bed.reconcile(Seen(policy=bed.policy(), listed=True, lease=None, **listed))
    assert bed.api.stored(LEASES, NAMESPACE, naming.lease_name(bed.name)) is not None


def test_an_application_running_as_another_account_is_moved_to_the_policys_own(bed: Bed) -> None:
    """An operator upgraded from the shared ``spark-dlq-driver``: the same configuration, but
    the job is resubmitted under the policy's own account, once."""
    bed.reconcile()
    bed.api.edit(
        APPS, NAMESPACE, bed.app_name, lambda o: o["spec"]["driver"].update(serviceAccount="spark-dlq-driver")
    )
    bed.reconcile()
    bed.reconcile()

    assert bed.app()["spec"]["driver"]["serviceAccount"] == naming.service_account_name(bed.name)
    restarted = [e["message"] for e in bed.api.of(EVENTS) if e["reason"] == "SparkApplicationRestarted"]
    assert restarted == [
        f"the Spark pods' service account changed from spark-dlq-driver to "
        f"{naming.service_account_name(bed.name)}: SparkApplication {bed.app_name} is resubmitted "
        "and resumes from its checkpoint"
    ]
    assert bed.status()["restartCount"] == 1
