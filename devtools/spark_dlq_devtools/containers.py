"""The project's container images, as ``scripts/setup/images.sh`` built them with podman.

The set-up script is the one place the images are named: it writes their names to
``images/manifest.json`` in the cache, and podman's settings (its storage in the cache, runc,
explicit ulimits, no registry search) to ``podman/``; this module reads both, runs containers
the way the tests need them, and exports an image as an archive for the test bed's node
(``Node.load_image``), cached by the image's id.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from spark_dlq_devtools.paths import NotInstalled, cache_dir

#: The images by role: the bases made here, the project's images (``images.sh``) and the
#: Kubeflow spark-operator's (``scripts/setup/spark_operator.sh``).
Role = Literal["debian", "python", "maven", "spark", "engine", "operator", "demo", "spark-operator"]


def podman_env() -> dict[str, str]:
    """The environment podman runs in: the project's own settings files (written by
    ``scripts/images/podman.sh`` at set-up)."""
    folder = cache_dir() / "podman"
    conf = folder / "containers.conf"
    if not conf.exists():
        raise NotInstalled(f"podman's settings not found at {folder}; run scripts/setup/images.sh")
    return {
        **os.environ,
        "CONTAINERS_CONF": str(conf),
        "CONTAINERS_STORAGE_CONF": str(folder / "storage.conf"),
        "CONTAINERS_REGISTRIES_CONF": str(folder / "registries.conf"),
    }


#: A manifest of one's own (the same shape), for a branch's images built beside the shared ones
#: under other names: the tests then run those, and nobody else's images change.
MANIFEST_ENV = "SPARK_DLQ_IMAGE_MANIFEST"


def image(role: Role) -> str:
    """The name of one of the images ``images.sh`` built (or those of ``MANIFEST_ENV``)."""
    manifest = Path(os.environ.get(MANIFEST_ENV) or cache_dir() / "images" / "manifest.json")
    if not manifest.exists():
        raise NotInstalled(f"no image manifest at {manifest}; run scripts/setup/images.sh")
    names: dict[str, str] = json.loads(manifest.read_text())
    return names[role]


def podman(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", *args], env=podman_env(), capture_output=True, text=True, timeout=timeout, check=check
    )


def configured_user(image_name: str) -> str:
    """The image's ``USER`` (``uid`` or ``uid:gid``): what ``runAsNonRoot`` checks when a pod
    names no user, which it can only do when the user is a number."""
    return podman("image", "inspect", "--format", "{{.Config.User}}", image_name, timeout=60).stdout.strip()


def run_argv(
    name: str,
    *,
    image_name: str,
    command: Sequence[str],
    volumes: Mapping[Path, str] = {},
    environment: Mapping[str, str] = {},
    user: str | None = None,
    read_only: bool = False,
    tmpfs: Sequence[str] = (),
    entrypoint: str | None = None,
) -> list[str]:
    """``podman run`` for a test: host network (the test bed's services listen on 127.0.0.1),
    every capability dropped and no privilege escalation, as the restricted Pod Security
    Standard asks of the chart's pods; ``read_only`` for a read-only root file system, with
    ``tmpfs`` folders writable (a pod's ``emptyDir`` volumes)."""
    argv = ["podman", "run", "--rm", "--name", name, "--network", "host", "--cap-drop", "ALL"]
    argv += ["--security-opt", "no-new-privileges"]
    if user is not None:
        argv += ["--user", user]
    if read_only:
        argv += ["--read-only", "--read-only-tmpfs=false"]
    for folder in tmpfs:
        argv += ["--tmpfs", f"{folder}:rw,mode=1777"]
    if entrypoint is not None:
        argv += ["--entrypoint", entrypoint]
    for source, target in volumes.items():
        argv += ["--volume", f"{source}:{target}:ro,Z"]
    for key, value in environment.items():
        argv += ["--env", f"{key}={value}"]
    return [*argv, image_name, *command]


def remove(name: str) -> None:
    """Remove a test's container, whatever state it is in."""
    podman("rm", "--force", "--ignore", name, timeout=120, check=False)


def run_once(name: str, argv: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (from ``run_argv`` with this ``name``) to its end, then remove the container,
    whatever happened."""
    try:
        return subprocess.run(argv, env=podman_env(), capture_output=True, text=True, timeout=timeout)
    finally:
        remove(name)


def archive(image_name: str) -> Path:
    """``image_name`` saved as a ``docker-archive`` for containerd, cached by the image's id."""
    image_id = podman("image", "inspect", "--format", "{{.Id}}", image_name).stdout.strip()
    folder = cache_dir() / "images" / "archives"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{image_id[:16]}.tar"
    if not path.exists():
        partial = path.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        podman("save", "--format", "docker-archive", "--output", str(partial), image_name, timeout=1200)
        partial.rename(path)
    return path
