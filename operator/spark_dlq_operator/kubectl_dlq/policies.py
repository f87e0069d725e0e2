"""Where the policy comes from: a file (``-f``), or the cluster through kubectl (``--policy``,
``stats -A``), with the broker the operator gives a policy that names none (its class's).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from dlq_engine.model.documents import PolicyFileError, load_policy_file, load_policy_text
from dlq_engine.model.policy import DeadLetterPolicy
from spark_dlq_operator.governance import govern_broker
from spark_dlq_operator.kubectl_dlq.errors import BadInput, Unreachable
from spark_dlq_operator.policy_class import ClassRefusal, read_class, select_class

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def policy_from_file(path: str) -> DeadLetterPolicy:
    try:
        if path == "-":
            return load_policy_text(sys.stdin.read(), source="<stdin>")
        return load_policy_file(path)
    except PolicyFileError as error:
        raise BadInput(str(error).replace("\n", "; ")) from None


def kubectl_command(
    name: str | None,
    *,
    namespace: str | None,
    kubeconfig: str | None,
    context: str | None,
    timeout_ms: int,
    resource: str = "deadletterpolicies.sparkdlq.io",
) -> list[str]:
    """The ``kubectl get`` that reads one DeadLetterPolicy (or every object of ``resource`` when
    ``name`` is None) as YAML, with the connection flags a plugin was given passed on (kubectl
    gives a plugin its flags, it does not apply them)."""
    command = [os.environ.get("KUBECTL") or "kubectl"]
    if kubeconfig:
        command.append(f"--kubeconfig={kubeconfig}")
    if context:
        command.append(f"--context={context}")
    if namespace:
        command.append(f"--namespace={namespace}")
    command.append(f"--request-timeout={max(timeout_ms // 1000, 1)}s")
    command += ["get", resource, *([name] if name else []), "-o", "yaml"]
    return command


def run_kubectl(command: list[str], *, what: str, why: str, timeout_ms: int, input: str | None = None) -> str:
    """Run kubectl as a plugin does; its standard output. A missing kubectl, no answer or a
    refusal is one line naming ``what`` (a NotFound is bad input, anything else unreachable)."""
    try:
        done = subprocess.run(
            command, input=input, capture_output=True, text=True, timeout=timeout_ms / 1000 + 30, check=False
        )
    except FileNotFoundError:
        raise Unreachable(f"{command[0]} is not on the PATH ({why})") from None
    except subprocess.TimeoutExpired:
        raise Unreachable(f"{what} did not answer") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        said = lines[-1] if lines else f"exit status {done.returncode}"
        error = BadInput if "(NotFound)" in said else Unreachable
        raise error(f"{what}: {said}")
    return done.stdout


@dataclass(frozen=True, slots=True)
class ClusterPolicy:
    """A policy read from the cluster, with its broker as the operator settles it."""

    policy: DeadLetterPolicy
    #: Where ``spec.broker`` came from when the policy names none (its class); None: its own.
    broker_origin: str | None = None


def policy_from_cluster(
    name: str,
    *,
    namespace: str | None,
    kubeconfig: str | None,
    context: str | None,
    timeout_ms: int,
    bootstrap_servers: str | None = None,
) -> ClusterPolicy:
    """The DeadLetterPolicy ``name``. One that names no broker gets its class's, as the operator
    gave it (``status.broker``: a namespace's users may not list the cluster's classes); before
    the operator has written it, as the operator gives it (``spec.className``, else the default
    class: ``class_broker``). Neither is read when ``bootstrap_servers`` (the user's own) is given."""
    if not _NAME_RE.match(name):
        raise BadInput(f"--policy: {name!r} is not a valid resource name")
    if namespace is not None and not _NAME_RE.match(namespace):
        raise BadInput(f"--namespace: {namespace!r} is not a valid namespace name")
    command = kubectl_command(
        name, namespace=namespace, kubeconfig=kubeconfig, context=context, timeout_ms=timeout_ms
    )
    stdout = run_kubectl(
        command,
        what=f"kubectl get deadletterpolicy {name}",
        why="--policy reads the policy with it; -f reads a file",
        timeout_ms=timeout_ms,
    )
    where = f"deadletterpolicy {namespace + '/' if namespace else ''}{name}"
    try:
        document = yaml.safe_load(stdout)
    except yaml.YAMLError:
        document = None  # load_policy_text names the problem
    spec = document.get("spec") if isinstance(document, dict) else None
    origin: str | None = None
    if isinstance(spec, dict) and spec.get("broker") is None:
        given = (document.get("status") or {}).get("broker")
        if bootstrap_servers:
            spec["broker"] = {"bootstrapServers": bootstrap_servers}
        elif isinstance(given, dict) and given.get("type"):
            spec["broker"] = given
            origin = f"status.broker of {where}, its class's as the operator gave it; --bootstrap-servers overrides it"
        else:
            listed = run_kubectl(
                kubectl_command(
                    None,
                    namespace=None,
                    kubeconfig=kubeconfig,
                    context=context,
                    timeout_ms=timeout_ms,
                    resource="deadletterpolicyclasses.sparkdlq.io",
                ),
                what="kubectl get deadletterpolicyclasses",
                why="the policy names no broker (spec.broker): its class's is read",
                timeout_ms=timeout_ms,
            )
            classes = (yaml.safe_load(listed) or {}).get("items") or []
            spec["broker"], origin = class_broker(document, classes, where=where)
        stdout = yaml.safe_dump(document)
    try:
        return ClusterPolicy(load_policy_text(stdout, source=where), origin)
    except PolicyFileError as error:
        raise BadInput(str(error).replace("\n", "; ")) from None


def class_broker(
    document: Mapping[str, Any], classes: Sequence[Mapping[str, Any]], *, where: str
) -> tuple[dict[str, Any], str]:
    """The ``spec.broker`` the operator gives the policy ``document``, which names none, from its
    class among ``classes`` (the cluster's DeadLetterPolicyClass objects), and a note on where it
    came from. Raises BadInput naming the field and the class's rule when there is none."""
    try:
        cls = select_class(document, [read_class(c) for c in classes])
        broker, entry = govern_broker(document, cls)
    except ClassRefusal as refusal:
        problems = "; ".join(str(issue) for issue in refusal.issues)
        hint = (
            " (no DeadLetterPolicyClass in the cluster: the operator's built-in class, whose "
            "--kafka-config-brokers kubectl dlq cannot see)"
            if not classes and not document.get("spec", {}).get("className")
            else ""
        )
        raise BadInput(f"{where}: {problems}{hint}; give the broker with --bootstrap-servers") from None
    assert entry is not None  # a policy with no broker gets its class's first one, or is refused
    index = cls.brokers.index(entry)
    return (
        broker,
        f"spec.brokers[{index}] of class {cls.name!r}, the broker of {where}; --bootstrap-servers overrides it",
    )


def policies_in_cluster(
    *, namespace: str | None, kubeconfig: str | None, context: str | None, timeout_ms: int
) -> list[tuple[str, str, DeadLetterPolicy | str]]:
    """``(namespace, name, policy or why it cannot be read)`` of every DeadLetterPolicy kubectl
    lists: in every namespace, or in ``namespace``."""
    if namespace is not None and not _NAME_RE.match(namespace):
        raise BadInput(f"--namespace: {namespace!r} is not a valid namespace name")
    command = [os.environ.get("KUBECTL") or "kubectl"]
    if kubeconfig:
        command.append(f"--kubeconfig={kubeconfig}")
    if context:
        command.append(f"--context={context}")
    command += [f"--request-timeout={max(timeout_ms // 1000, 1)}s", "get", "deadletterpolicies.sparkdlq.io"]
    command += [f"--namespace={namespace}"] if namespace else ["--all-namespaces"]
    stdout = run_kubectl(
        [*command, "-o", "json"],
        what="kubectl get deadletterpolicies",
        why="-A lists the policies with it",
        timeout_ms=timeout_ms,
    )
    found: list[tuple[str, str, DeadLetterPolicy | str]] = []
    for item in json.loads(stdout).get("items") or []:
        meta = item.get("metadata") or {}
        where = f"deadletterpolicy {meta.get('namespace')}/{meta.get('name')}"
        try:
            policy: DeadLetterPolicy | str = load_policy_text(json.dumps(item), source=where)
        except PolicyFileError as error:
            policy = str(error).replace("\n", "; ")
        found.append((str(meta.get("namespace", "")), str(meta.get("name", "")), policy))
    return sorted(found, key=lambda row: (row[0], row[1]))
