"""The red team on the real cluster (issue 26, item 5): the sparkConf and Spark-pod-token attacks
with the chart installed by helm, the cluster's own ClusterRole aggregation, and the real
spark-operator, its webhook on and then off.

``tests/integration/operator/test_red_team.py`` runs every attack on the test bed's apiserver;
this repeats the ones whose outcome a cluster could change: a policy author (a user holding only
``edit`` in a namespace without an enforced Pod Security level) applies policies whose sparkConf
names a service account, another namespace, a hostPath volume of ``/``, packages to fetch; and
the running driver pod's own mounted token tries to rewrite its policy's ConfigMap, another
Lease, and to read Secrets. The sparkConf keys are refused by the CRD before a SparkApplication
exists, so neither the spark-operator nor its webhook is reached; the token's rights are the
operator's RBAC, not the webhook's.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from spark_dlq_devtools.node import Node
from spark_dlq_devtools.paths import REPO_ROOT, kubernetes_bin
from spark_dlq_operator.policy_class import forbidden, never_allowed_message

AUTHOR = "red-team-author"
#: The author's namespace: no Pod Security level enforced (the issue's hostPath case).
ATTACK_NAMESPACE = "team-red"

#: sparkConf an author tries; each policy is refused naming one of its keys.
ATTACKS: dict[str, dict[str, str]] = {
    "the operator's service account": {
        "spark.kubernetes.authenticate.driver.serviceAccountName": "spark-operator"
    },
    "another namespace": {"spark.kubernetes.namespace": "spark-dlq"},
    "the node's root filesystem": {
        "spark.kubernetes.driver.volumes.hostPath.root.mount.path": "/host",
        "spark.kubernetes.driver.volumes.hostPath.root.options.path": "/",
    },
    "code fetched at submission": {"spark.jars.packages": "org.example:payload:1.0"},
}


def author_kubeconfig(node: Node) -> Path:
    """The namespace ``team-red`` (no Pod Security labels) and a user bound to ``edit`` there
    (the chart's user roles aggregated into it by the cluster's controller manager)."""
    documents: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ATTACK_NAMESPACE}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": AUTHOR, "namespace": ATTACK_NAMESPACE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": AUTHOR}],
        },
    ]
    node.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    kubeconfig = node.plane.kubeconfig(AUTHOR)
    deadline = time.monotonic() + 60
    while (
        kubectl_as(
            kubeconfig, "auth", "can-i", "create", "deadletterpolicies.sparkdlq.io", "-n", ATTACK_NAMESPACE
        ).stdout.strip()
        != "yes"
    ):
        assert time.monotonic() < deadline, "the chart's rights never reached edit"
        time.sleep(1)
    return kubeconfig


def kubectl_as(kubeconfig: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(kubernetes_bin("kubectl")), f"--kubeconfig={kubeconfig}", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def spark_conf_is_refused(node: Node, kubeconfig: Path, *, bootstrap: str) -> None:
    """``kubectl apply`` of the example policy with each attack's sparkConf, as the author: each
    is refused by the CRD naming a key and what to use instead; no policy is stored."""
    base = yaml.safe_load((REPO_ROOT / "examples" / "orders-billing.yaml").read_text())
    base["metadata"]["namespace"] = ATTACK_NAMESPACE
    base["spec"]["broker"]["bootstrapServers"] = bootstrap
    for what, conf in ATTACKS.items():
        policy = json.loads(json.dumps(base))
        policy["metadata"]["name"] = "evil"
        policy["spec"]["spark"]["sparkConf"] = conf
        result = kubectl_as(kubeconfig, "apply", "-f", "-", input=yaml.safe_dump(policy))
        expected = [f"{key} {never_allowed_message(group)}" for key in conf if (group := forbidden(key))]
        assert result.returncode != 0, f"{what}: accepted"
        assert any(message in result.stderr for message in expected), f"{what}: {result.stderr}"
        print(f"[cluster-e2e]   {what}: refused: {result.stderr.strip()[:160]}")
    stored = json.loads(node.kubectl("get", "dlp", "-n", ATTACK_NAMESPACE, "-o", "json"))["items"]
    assert stored == [], stored


#: Run in the driver pod: its mounted service-account token against the API server; prints the
#: HTTP status of each attempt as JSON. Arguments: namespace, policy.
TOKEN_PROBE = """
import json, os, ssl, sys, urllib.error, urllib.request
account = "/var/run/secrets/kubernetes.io/serviceaccount"
token = open(account + "/token").read().strip()
context = ssl.create_default_context(cafile=account + "/ca.crt")
server = "https://%s:%s" % (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])
namespace, policy = sys.argv[1:3]

def call(method, path, body=None):
    request = urllib.request.Request(
        server + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/merge-patch+json"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code

mark = {"metadata": {"annotations": {"sparkdlq.io/red-team": "tried"}}}
core, leases = "/api/v1/namespaces/" + namespace, "/apis/coordination.k8s.io/v1/namespaces/" + namespace
print(json.dumps({
    "own Lease": call("PATCH", leases + "/leases/" + policy + "-heartbeat", mark),
    "another Lease": call("PATCH", leases + "/leases/red-team-other-heartbeat", mark),
    "own ConfigMap": call("PATCH", core + "/configmaps/" + policy + "-policy", {"data": {"policy.yaml": "x"}}),
    "Secrets": call("GET", core + "/secrets"),
    "own policy": call("PATCH", "/apis/sparkdlq.io/v1alpha1/namespaces/" + namespace + "/deadletterpolicies/" + policy, mark),
    "pods elsewhere": call("GET", "/api/v1/namespaces/team-red/pods"),
}))
"""

#: What the driver's token may do: renew its own heartbeat, nothing else tried here.
TOKEN_OUTCOMES = {
    "own Lease": 200,
    "another Lease": 403,
    "own ConfigMap": 403,
    "Secrets": 403,
    "own policy": 403,
    "pods elsewhere": 403,
}


def driver_token_is_contained(node: Node, driver: str, *, namespace: str, policy: str) -> None:
    """From inside the running driver pod, with the token it mounts: its own Lease only."""
    other = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "red-team-other-heartbeat", "namespace": namespace},
        "spec": {},
    }
    node.kubectl("apply", "-f", "-", input=yaml.safe_dump(other))
    try:
        output = node.kubectl(
            "exec", driver, "-n", namespace, "--", "python3", "-c", TOKEN_PROBE, namespace, policy
        )
    finally:
        node.kubectl("delete", "lease", "red-team-other-heartbeat", "-n", namespace, "--ignore-not-found")
    outcomes = json.loads(output.strip().splitlines()[-1])
    print(f"[cluster-e2e]   the driver's token: {outcomes}")
    assert outcomes == TOKEN_OUTCOMES, outcomes
