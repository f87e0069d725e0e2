"""The test bed's control plane is a real kube-apiserver on etcd: custom resources are stored,
validated and watched, and RBAC is enforced."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from spark_dlq_devtools.kube import ControlPlane

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.testbed.sparkdlq.io"},
    "spec": {
        "group": "testbed.sparkdlq.io",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"size": {"type": "integer", "minimum": 1}},
                                "x-kubernetes-validations": [
                                    {"rule": "self.size < 10", "message": "size must be below 10"}
                                ],
                            }
                        },
                    }
                },
            }
        ],
    },
}


def _install_crd(api: Any) -> None:
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(WIDGET_CRD)
    except ApiException as error:
        if error.status != 409:
            raise
    import time

    for _ in range(100):
        crd = ext.read_custom_resource_definition(WIDGET_CRD["metadata"]["name"])
        if any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or []):
            return
        time.sleep(0.1)
    raise AssertionError("CRD never became Established")


def test_apiserver_reports_its_pinned_version(kube_api: Any) -> None:
    from spark_dlq_devtools.paths import versions

    info = client.VersionApi(kube_api).get_code()
    assert info.git_version == f"v{versions()['KUBERNETES_VERSION']}"


def test_custom_objects_are_stored_validated_and_watched(kube_api: Any, namespace: str) -> None:
    _install_crd(kube_api)
    objects = client.CustomObjectsApi(kube_api)
    seen: list[tuple[str, str]] = []
    ready = threading.Event()

    def watch_widgets() -> None:
        stream = watch.Watch()
        ready.set()
        for event in stream.stream(
            objects.list_namespaced_custom_object,
            "testbed.sparkdlq.io",
            "v1",
            namespace,
            "widgets",
            timeout_seconds=20,
        ):
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            if len(seen) == 2:
                stream.stop()

    watcher = threading.Thread(target=watch_widgets)
    watcher.start()
    ready.wait()
    body = {
        "apiVersion": "testbed.sparkdlq.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"size": 3},
    }
    objects.create_namespaced_custom_object("testbed.sparkdlq.io", "v1", namespace, "widgets", body)
    objects.patch_namespaced_custom_object(
        "testbed.sparkdlq.io", "v1", namespace, "widgets", "w1", {"spec": {"size": 4}}
    )
    watcher.join(30)
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1")]

    with pytest.raises(ApiException) as refused:
        objects.create_namespaced_custom_object(
            "testbed.sparkdlq.io",
            "v1",
            namespace,
            "widgets",
            {**body, "metadata": {"name": "w2"}, "spec": {"size": 12}},
        )
    assert refused.value.status == 422
    assert "size must be below 10" in refused.value.body


def test_rbac_refuses_a_user_without_a_role(kube: ControlPlane, namespace: str) -> None:
    path = kube.kubeconfig("testbed-nobody")
    api = config.new_client_from_config(config_file=str(path))
    with pytest.raises(ApiException) as refused:
        client.CoreV1Api(api).list_namespaced_config_map(namespace)
    assert refused.value.status == 403
    import json

    message = json.loads(refused.value.body)["message"]
    assert 'User "testbed-nobody" cannot list resource "configmaps"' in message
