"""What one DeadLetterPolicy write costs the API server, in CPU time, by CRD variant.

    python bench/crd_cost.py [--n 300] [--crd crds/sparkdlq.io_deadletterpolicies.yaml ...]

Starts the test bed's etcd + kube-apiserver and installs each given CRD (and the same CRD with
every ``x-kubernetes-validations`` rule stripped, and with no schema at all, as floors) under a group of its own, then
for each: creates ``--n`` policies, merge-patches an annotation on each (as kopf's progress
storage does), and patches each one's status (as the operator does), all from two client
threads. Reports the kube-apiserver's and etcd's CPU seconds (utime + stime from
``/proc/<pid>/stat``) per request of each kind, with a ConfigMap create as the reference for a
request with no custom schema at all, and an Event and the operator's SparkApplication as the
other writes a policy's reconcile makes. CPU time, not wall clock, so the figures hold on a busy
machine. A benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spark_dlq_devtools.kube import ControlPlane  # noqa: E402
from spark_dlq_devtools.paths import spark_application_crd  # noqa: E402
from tests.integration.crds import install_crds  # noqa: E402

NAMESPACE = "cost"
TICKS = os.sysconf("SC_CLK_TCK")
STATUS = {
    "observedGeneration": 1,
    "phase": "Pending",
    "restartCount": 0,
    "retryTopic": "orders-x-RETRY",
    "deadLetterTopic": "orders-x-DLQ",
    "sparkApplication": "x",
    "configHash": "0123456789abcdef",
    "conditions": [
        {
            "type": t,
            "status": "False",
            "reason": "Submitted",
            "message": "the job was submitted",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "observedGeneration": 1,
        }
        for t in ("Ready", "TopicsReady", "JobRunning")
    ],
}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def strip_cel(node: Any) -> int:
    """Remove every x-kubernetes-validations in place; how many rules went."""
    removed = 0
    if isinstance(node, dict):
        rules = node.pop("x-kubernetes-validations", None)
        removed += len(rules or [])
        for value in node.values():
            removed += strip_cel(value)
    elif isinstance(node, list):
        for value in node:
            removed += strip_cel(value)
    return removed


def variant(path: Path, group: str, *, cel: bool, bare: bool = False) -> tuple[dict[str, Any], int]:
    crd = copy.deepcopy(
        next(
            d
            for d in yaml.safe_load_all(path.read_text())
            if d and d.get("kind") == "CustomResourceDefinition"
        )
    )
    removed = 0 if cel else strip_cel(crd)
    if bare:  # no schema to speak of: what any custom resource write costs
        for version in crd["spec"]["versions"]:
            version["schema"]["openAPIV3Schema"]["properties"] = {
                part: {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                for part in ("spec", "status")
            }
            version.pop("additionalPrinterColumns", None)
    crd["spec"]["group"] = group
    crd["metadata"]["name"] = f"{crd['spec']['names']['plural']}.{group}"
    return crd, removed


def document(group: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/v1alpha1",
        "kind": "DeadLetterPolicy",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "source": {"topic": "orders", "subscription": name},
            "broker": {"bootstrapServers": "kafka:9092"},
            "processor": {"entrypoint": "billing.handlers:process"},
            "topics": {"create": False},
        },
    }


def application(name: str) -> dict[str, Any]:
    """The SparkApplication the operator renders for ``document(name)``."""
    from dlq_engine.model import parse_policy
    from spark_dlq_operator import naming, render
    from spark_dlq_operator.config import OperatorConfig

    body = document("sparkdlq.io", name)
    body["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    owner = naming.Owner(name=name, namespace=NAMESPACE, uid=body["metadata"]["uid"])
    app = render.spark_application(parse_policy(body), config=OperatorConfig(), owner=owner)
    app["metadata"].pop("ownerReferences", None)  # no such owner here (the collector would act)
    return app


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--crd", type=Path, action="append", default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    paths = args.crd or [REPO / "crds" / "sparkdlq.io_deadletterpolicies.yaml"]

    plane = ControlPlane(name="kube-crd-cost")
    plane.start()
    assert plane.apiserver is not None
    assert plane.etcd is not None
    pids = {"apiserver": plane.apiserver.pid, "etcd": plane.etcd.pid}
    results: dict[str, Any] = {"n": args.n, "variants": {}}
    try:
        api = config.new_client_from_config(config_file=str(plane.admin_kubeconfig))  # type: ignore[no-untyped-call]
        core = client.CoreV1Api(api)
        objects = client.CustomObjectsApi(api)
        # The client takes manifests (dicts) for bodies; its stubs name only the model classes.
        core.create_namespace({"metadata": {"name": NAMESPACE}})  # type: ignore[arg-type]
        pool = concurrent.futures.ThreadPoolExecutor(args.threads)

        def measure(label: str, call: Any) -> dict[str, float]:
            before = {k: cpu_seconds(p) for k, p in pids.items()}
            list(pool.map(call, range(args.n)))
            spent = {k: (cpu_seconds(p) - before[k]) / args.n * 1000 for k, p in pids.items()}
            print(
                f"  {label:<28} apiserver {spent['apiserver']:6.2f} ms  etcd {spent['etcd']:5.2f} ms"
                " (CPU per request)",
                flush=True,
            )
            return spent

        print("reference: ConfigMap", flush=True)
        results["configmap_create"] = measure(
            "create",
            lambda i: core.create_namespaced_config_map(
                NAMESPACE,
                {"metadata": {"name": f"cm-{i}"}, "data": {"policy.json": "{}" * 200}},  # type: ignore[arg-type]
            ),
        )
        results["event_create"] = measure(
            "Event create",
            lambda i: core.create_namespaced_event(
                NAMESPACE,
                {  # type: ignore[arg-type]
                    "metadata": {"generateName": "p."},
                    "involvedObject": {"name": f"p-{i}", "namespace": NAMESPACE},
                    "reason": "Created",
                    "message": "created SparkApplication p",
                    "type": "Normal",
                },
            ),
        )
        install_crds(api, [spark_application_crd()])
        print("reference: SparkApplication (the operator's, as rendered)", flush=True)
        results["sparkapplication_create"] = measure(
            "create",
            lambda i: objects.create_namespaced_custom_object(
                "sparkoperator.k8s.io", "v1beta2", NAMESPACE, "sparkapplications", application(f"p-{i}")
            ),
        )

        variants: list[tuple[str, Path, bool, bool]] = []
        for index, path in enumerate(paths):
            variants.append((f"{path.name}", path, True, False))
            if index == 0:
                variants.append((f"{path.name} without CEL", path, False, False))
                variants.append(("schemaless (preserve-unknown-fields)", path, False, True))
        policies = ("v1alpha1", NAMESPACE, "deadletterpolicies")  # each variant's group, then these
        for index, (label, path, cel, bare) in enumerate(variants):
            group = f"v{index}.cost.sparkdlq.io"
            crd, removed = variant(path, group, cel=cel, bare=bare)
            tmp = plane.root / f"crd-{index}.yaml"
            tmp.write_text(yaml.safe_dump(crd))
            install_crds(api, [tmp])
            print(f"{label}" + (f" ({removed} rules removed)" if removed else ""), flush=True)
            figures = {
                "create": measure(
                    "create",
                    lambda i, g=group: objects.create_namespaced_custom_object(
                        g, *policies, document(g, f"p-{i}")
                    ),
                ),
                "patch_annotation": measure(
                    "merge-patch annotation",
                    lambda i, g=group: objects.patch_namespaced_custom_object(
                        g,
                        *policies,
                        f"p-{i}",
                        {
                            "metadata": {
                                "annotations": {
                                    "sparkdlq.io/last-handled-configuration": json.dumps({"spec": {"x": i}})
                                }
                            }
                        },
                    ),
                ),
                "patch_status": measure(
                    "merge-patch status",
                    lambda i, g=group: objects.patch_namespaced_custom_object_status(
                        g, *policies, f"p-{i}", {"status": STATUS}
                    ),
                ),
                "patch_status_again": measure(
                    "status, condition changed",
                    lambda i, g=group: objects.patch_namespaced_custom_object_status(
                        g, *policies, f"p-{i}", {"status": {**STATUS, "phase": "Running"}}
                    ),
                ),
            }
            results["variants"][label] = figures
        pool.shutdown()
    finally:
        plane.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
