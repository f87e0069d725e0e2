"""The release artefacts, built and checked by one command: ``make dist`` (``spark-dlq-dev dist``).

Into ``dist/``:

- the wheel and the sdist (``python -m build``): installed in a clean virtualenv, where
  ``dlq-engine --version`` answers and ``kubectl-dlq`` and ``dlq-operator`` without their extra
  exit with one line naming it; only ``dlq_engine`` and ``spark_dlq_operator`` inside (no test bed);
- the chart's package (``helm package``), which ``helm lint --strict`` passes (the tests install
  the chart from such a package into the test apiserver);
- the two images as OCI archives, labelled ``org.opencontainers.image.*`` with the version, the
  commit and its time; their Python distributions are exactly their lock file's
  (``requirements/*-image.txt``);
- an SBOM (CycloneDX JSON) of the wheel (cyclonedx-py, over the clean virtualenv) and of each
  image (syft, over its archive), and ``SHA256SUMS``.

Each artefact is checked right after it is made, by the functions tests/integration/test_dist.py
runs on what the test suite builds. What the tools are and where they come from:
``scripts/setup/release_tools.sh``; docs/release.md says how to publish the result.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import yaml

from spark_dlq_devtools.containers import podman_env
from spark_dlq_devtools.paths import REPO_ROOT, cache_dir, helm_bin, release_tools, versions

ImageName = Literal["engine", "operator"]

#: What a release wheel holds at its top level, and nothing else but its ``.dist-info``.
WHEEL_PACKAGES: Final = frozenset({"dlq_engine", "spark_dlq_operator"})
#: The wheel's commands: name -> entry point (pyproject.toml's [project.scripts]).
COMMANDS: Final = ("dlq-engine", "dlq-operator", "kubectl-dlq", "kubectl_complete-dlq")
#: Every image carries these labels (the OCI image spec's annotation keys).
OCI_LABELS: Final = (
    "title",
    "description",
    "version",
    "revision",
    "created",
    "source",
    "licenses",
    "base.name",
)
#: Distributions a Python environment brings with it, not installed from a lock.
BOOTSTRAP: Final = frozenset({"pip", "setuptools", "wheel", "spark-dlq"})


class DistError(AssertionError):
    """An artefact failed its check: the message says which and why."""


@dataclass(frozen=True)
class Image:
    name: ImageName
    title: str
    dockerfile: str
    lock: str
    #: The image's own Python: where its locked distributions are installed.
    pip: str


IMAGES: Final[dict[ImageName, Image]] = {
    "engine": Image(
        "engine",
        "spark-dlq",
        "spark_image/Dockerfile",
        "requirements/engine-image.txt",
        "/opt/spark-dlq/venv/bin/pip",
    ),
    "operator": Image(
        "operator", "spark-dlq-operator", "operator/Dockerfile", "requirements/operator-image.txt", "pip"
    ),
}


def project_version() -> str:
    version: str = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    return version


def _run(
    argv: Sequence[str],
    *,
    timeout: float = 1800,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> str:
    done = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout, env=dict(env) if env else None, cwd=cwd
    )
    if done.returncode != 0:
        raise DistError(f"{' '.join(map(str, argv))} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout


def clean_env() -> dict[str, str]:
    """The environment of a clean install: nothing of this checkout on the Python path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


# --- the wheel -----------------------------------------------------------------------------------------


def build_python(out: Path, *, isolated: bool = True) -> Path:
    """The wheel (and with ``isolated``, the sdist it is built from: ``python -m build``, the build
    backend fresh from PyPI). Without ``isolated``, ``pip wheel`` with this environment's
    setuptools, offline, from a copy of what the wheel is made of (a build in the checkout would
    leave build/ behind, whose stale files setuptools puts in the next wheel): what the tests do."""
    out.mkdir(parents=True, exist_ok=True)
    if isolated:
        _run([str(release_tools() / "bin" / "python"), "-m", "build", "--outdir", str(out), str(REPO_ROOT)])
    else:
        with tempfile.TemporaryDirectory(prefix="wheel-") as folder:
            stage = Path(folder)
            for name in ("pyproject.toml", "README.md"):
                shutil.copy(REPO_ROOT / name, stage / name)
            for package in ("spark_image/dlq_engine", "operator/spark_dlq_operator"):
                shutil.copytree(
                    REPO_ROOT / package, stage / package, ignore=shutil.ignore_patterns("__pycache__")
                )
            _run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "wheel",
                    "-q",
                    "--no-deps",
                    "--no-build-isolation",
                    "-w",
                    str(out),
                    str(stage),
                ],
                env=clean_env(),
            )
    [wheel] = out.glob(f"spark_dlq-{project_version()}-py3-none-any.whl")
    return wheel


def check_wheel_contents(wheel: Path) -> None:
    """Only the engine and the operator, the four commands, the version and the license."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    top = {n.split("/")[0] for n in names} - {info}
    if top != WHEEL_PACKAGES:
        raise DistError(
            f"{wheel.name}: holds {sorted(top)}, expected only {sorted(WHEEL_PACKAGES)} (no test bed)"
        )
    commands = set(re.findall(r"^([\w.-]+) = ", entry_points.split("[console_scripts]", 1)[1], re.M))
    if commands != set(COMMANDS):
        raise DistError(f"{wheel.name}: commands {sorted(commands)}, expected {sorted(COMMANDS)}")
    for line in (
        f"Version: {project_version()}",
        "License-Expression: Apache-2.0",
        "Provides-Extra: engine",
        "Provides-Extra: operator",
        "Provides-Extra: pulsar",
    ):
        if line not in metadata.splitlines():
            raise DistError(f"{wheel.name}: METADATA lacks {line!r}")


def install_clean(wheel: Path, venv: Path) -> Path:
    """A new virtualenv with the wheel and its required dependencies only (what ``pip install
    spark-dlq`` gives); its ``bin``. This environment's pip installs into it (``--python``), which
    spares the new one pip's own bootstrap."""
    _run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(venv)], env=clean_env())
    _run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", str(wheel)],
        env=clean_env(),
        timeout=600,
    )
    return venv / "bin"


def check_commands(bin_dir: Path) -> None:
    """``--version`` on every command; a command whose extra is missing says which, in one line."""
    version = project_version()
    env = clean_env()

    def call(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(bin_dir / argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=REPO_ROOT,
        )

    for command, shown in (
        ("dlq-engine", "dlq-engine"),
        ("dlq-operator", "dlq-operator"),
        ("kubectl-dlq", "kubectl dlq"),
    ):
        done = call(command, "--version")
        if (done.returncode, done.stdout) != (0, f"{shown} {version}\n"):
            raise DistError(f"{command} --version: {done.returncode} {done.stdout!r} {done.stderr[-500:]!r}")
    for argv, shown, extra in (
        (("dlq-engine", "run", "-f", "examples/orders-billing.yaml"), "dlq-engine", "engine"),
        (("dlq-operator", "run", "--all-namespaces"), "dlq-operator", "operator"),
        (("kubectl-dlq", "stats", "-f", "examples/orders-billing.yaml"), "kubectl dlq", "operator"),
        (("kubectl_complete-dlq", "st"), "kubectl dlq", "operator"),
    ):
        done = call(*argv)
        lines = done.stderr.splitlines()
        wanted = f"pip install 'spark-dlq[{extra}]'"
        if (
            done.returncode != 1
            or len(lines) != 1
            or not lines[0].startswith(f"{shown}: needs the {extra} extra")
            or wanted not in lines[0]
        ):
            raise DistError(f"{' '.join(argv)} without the {extra} extra: {done.returncode} {done.stderr!r}")
    done = call("dlq-engine", "check", "-f", "examples/orders-billing.yaml")
    if done.returncode != 0 or "kind: DeadLetterPolicy" not in done.stdout:
        raise DistError(
            f"dlq-engine check (the model alone, no extra): {done.returncode} {done.stderr[-500:]!r}"
        )


def wheel_sbom(bin_dir: Path, out: Path) -> Path:
    """The SBOM of the clean install (the wheel and what it requires), by cyclonedx-py."""
    _run(
        [
            str(release_tools() / "bin" / "cyclonedx-py"),
            "environment",
            "--pyproject",
            str(REPO_ROOT / "pyproject.toml"),
            "--output-format",
            "JSON",
            "--output-file",
            str(out),
            str(bin_dir / "python"),
        ]
    )
    return out


# --- SBOMs -----------------------------------------------------------------------------------------------


def check_sbom(
    path: Path, *, subject: str, components: Sequence[str], version: str | None = None
) -> dict[str, Any]:
    """A CycloneDX document about ``subject`` (of ``version``, when given) that lists
    ``components`` (names, any version)."""
    document: dict[str, Any] = json.loads(path.read_text())
    if document.get("bomFormat") != "CycloneDX" or not str(document.get("specVersion", "")).startswith("1."):
        raise DistError(f"{path.name}: not a CycloneDX 1.x document")
    about = (document.get("metadata") or {}).get("component") or {}
    if subject not in str(about.get("name", "")):
        raise DistError(f"{path.name}: describes {about.get('name')!r}, not {subject!r}")
    if version is not None and about.get("version") != version:
        raise DistError(f"{path.name}: describes version {about.get('version')!r}, not {version!r}")
    found = {str(c.get("name", "")).lower() for c in document.get("components") or []}
    missing = [c for c in components if c.lower() not in found]
    if missing:
        raise DistError(f"{path.name}: lists {len(found)} components, not {missing}")
    return document


# --- the chart ---------------------------------------------------------------------------------------------


#: Where a release's chart says its runbooks are (Chart.yaml annotation; the PrometheusRule's
#: default runbook_url base).
RUNBOOKS_ANNOTATION: Final = "spark-dlq.io/runbooks"


def runbooks_url(project_url: str) -> str:
    """The runbooks of this version in the project's repository: its tag's docs/runbooks."""
    return f"{project_url.rstrip('/')}/blob/v{project_version()}/docs/runbooks"


def project_url() -> str | None:
    """The repository's public URL: its ``origin`` as https, when it has one."""
    origin = git("config", "--get", "remote.origin.url")
    ssh = re.match(r"^(?:ssh://)?git@([^:/]+)[:/](.+?)(?:\.git)?$", origin)
    if ssh:
        return f"https://{ssh.group(1)}/{ssh.group(2)}"
    if origin.startswith("https://"):
        return origin.removesuffix(".git")
    return None


def stamp_chart(chart: Path, url: str) -> None:
    """Name the project in a copy of the chart: ``home``, ``sources`` and where the runbooks of
    this version are (the alerts' default runbook_url)."""
    path = chart / "Chart.yaml"
    document = yaml.safe_load(path.read_text())
    document["home"] = url
    document["sources"] = [url]
    document.setdefault("annotations", {})[RUNBOOKS_ANNOTATION] = runbooks_url(url)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def package_chart(out: Path, *, url: str | None = None) -> Path:
    """``helm package`` of the chart; with ``url`` (the project's), of a copy stamped with it."""
    out.mkdir(parents=True, exist_ok=True)
    source = REPO_ROOT / "charts" / "spark-dlq-operator"
    with tempfile.TemporaryDirectory(prefix="chart-") as folder:
        if url is not None:
            copy = Path(folder) / source.name
            shutil.copytree(source, copy)
            stamp_chart(copy, url)
            source = copy
        _run([str(helm_bin()), "package", str(source), "--destination", str(out)])
    return out / f"spark-dlq-operator-{project_version()}.tgz"


def check_chart(package: Path) -> None:
    """``helm lint --strict`` of the package, which holds the CRDs and the values' schema."""
    said = _run([str(helm_bin()), "lint", "--strict", str(package)])
    if "0 chart(s) failed" not in said or "[WARNING]" in said:
        raise DistError(f"helm lint --strict {package.name}:\n{said}")
    with tarfile.open(package) as archive:
        names = set(archive.getnames())
    for name in (
        "crds/sparkdlq.io_deadletterpolicies.yaml",
        "crds/sparkdlq.io_deadletterredrives.yaml",
        "values.schema.json",
        "README.md",
    ):
        if f"spark-dlq-operator/{name}" not in names:
            raise DistError(f"{package.name} lacks {name}")


# --- the images --------------------------------------------------------------------------------------------------


def git(*args: str) -> str:
    try:
        return _run(["git", "-C", str(REPO_ROOT), *args], timeout=60).strip()
    except (DistError, OSError):
        return ""


def label_args() -> dict[str, str]:
    """VERSION, REVISION (the commit), CREATED (its time: the same commit builds the same labels)
    and SOURCE (the repository's ``origin``, when it has one)."""
    return {
        "VERSION": project_version(),
        "REVISION": git("rev-parse", "HEAD") or "unknown",
        "CREATED": git("log", "-1", "--format=%cI") or "unknown",
        "SOURCE": project_url() or "unknown",
    }


def build_args(image: Image, *, local_bases: bool) -> list[str]:
    """The Dockerfile's build arguments: the pinned versions (the engine's), the bases made here
    when no registry is reachable (``images.sh``'s manifest), and the labels."""
    pinned = versions()
    args: dict[str, str] = {}
    if image.name == "engine":
        for key in (
            "SPARK_VERSION",
            "SCALA_BINARY",
            "SPARK_KAFKA_CLIENTS_VERSION",
            "SPARK_COMMONS_POOL2_VERSION",
            "DELTA_VERSION",
        ):
            args[key] = pinned[key]
    if local_bases:
        bases = json.loads((cache_dir() / "images" / "manifest.json").read_text())
        args["PYTHON_IMAGE"] = bases["python"]
        if image.name == "engine":
            args |= {"MAVEN_IMAGE": bases["maven"], "SPARK_IMAGE": bases["spark"]}
    args |= label_args()
    return [f"--build-arg={key}={value}" for key, value in args.items()]


def release_tag(image: Image) -> str:
    """The release build's name: apart from the test bed's images of the same version."""
    return f"localhost/spark-dlq-release/{image.title}:{project_version()}"


def build_image(image: Image, *, local_bases: bool) -> str:
    """The image, through podman's layer cache, then its labels on a step of their own that is
    never cached: buildah reuses a cached ``LABEL ${ARG}`` step when only the argument changed,
    which would leave an earlier commit's revision on the image."""
    trust = []
    for bundle in ("/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs/java/cacerts"):
        if Path(bundle).exists():
            trust += ["--volume", f"{bundle}:{bundle}:ro"]
    tag = release_tag(image)
    built = f"{tag}-unlabelled"
    _run(
        [
            "podman",
            "build",
            *trust,
            *build_args(image, local_bases=local_bases),
            "-f",
            image.dockerfile,
            "-t",
            built,
            ".",
        ],
        env=podman_env(),
        cwd=REPO_ROOT,
        timeout=3600,
    )
    labels = [
        f"--label=org.opencontainers.image.{key.lower()}={value}" for key, value in label_args().items()
    ]
    with tempfile.TemporaryDirectory(prefix="labels-") as folder:
        (Path(folder) / "Containerfile").write_text(f"FROM {built}\n")
        _run(["podman", "build", "--no-cache", *labels, "-t", tag, folder], env=podman_env(), timeout=600)
    return tag


def save_image(tag: str, out: Path) -> Path:
    out.unlink(missing_ok=True)
    _run(
        ["podman", "save", "--format", "oci-archive", "--output", str(out), tag],
        env=podman_env(),
        timeout=1800,
    )
    return out


def archive_labels(archive: Path) -> dict[str, str]:
    """The labels in an OCI archive's image configuration (index -> manifest -> config)."""
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> dict[str, Any]:
            member = tar.extractfile(f"blobs/{digest.replace(':', '/')}")
            assert member is not None, digest
            found: dict[str, Any] = json.load(member)
            return found

        index_file = tar.extractfile("index.json")
        assert index_file is not None
        [manifest_ref] = json.load(index_file)["manifests"]
        manifest = blob(manifest_ref["digest"])
        config = blob(manifest["config"]["digest"])
    labels: dict[str, str] = (config.get("config") or {}).get("Labels") or {}
    return labels


def check_labels(labels: Mapping[str, str], image: Image) -> None:
    """Every OCI label, with this checkout's version, commit and commit time."""
    prefix = "org.opencontainers.image."
    missing = [key for key in OCI_LABELS if not labels.get(prefix + key)]
    if missing:
        raise DistError(f"{image.title}: no label {', '.join(prefix + k for k in missing)}")
    wanted = {"title": image.title, "licenses": "Apache-2.0"} | {
        k.lower(): v for k, v in label_args().items()
    }
    wrong = {key: labels[prefix + key] for key, value in wanted.items() if labels[prefix + key] != value}
    if wrong:
        raise DistError(f"{image.title}: labelled {wrong}, expected {wanted}")


def lock_pins(image: Image) -> dict[str, str]:
    """name -> version of every distribution in the image's lock file."""
    pins = {}
    for match in re.finditer(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)", (REPO_ROOT / image.lock).read_text(), re.M):
        pins[_normal(match.group(1))] = match.group(2)
    return pins


def installed(image: Image, tag: str) -> dict[str, str]:
    """name -> version of every Python distribution installed in the image (its ``pip list``)."""
    said = _run(
        ["podman", "run", "--rm", "--entrypoint", image.pip, tag, "list", "--format=json"],
        env=podman_env(),
        timeout=300,
    )
    return {_normal(d["name"]): d["version"] for d in json.loads(said)}


def check_lock_used(image: Image, tag: str) -> None:
    """The image's Python distributions are exactly its lock's (besides pip and the project)."""
    found = {k: v for k, v in installed(image, tag).items() if k not in BOOTSTRAP}
    wanted = lock_pins(image)
    if found != wanted:
        extra = sorted(set(found.items()) - set(wanted.items()))
        missing = sorted(set(wanted.items()) - set(found.items()))
        raise DistError(f"{image.title}: installed beyond {image.lock}: {extra}; missing: {missing}")


def image_sbom(archive: Path, out: Path) -> Path:
    """The SBOM of an image archive (its Debian packages, Python distributions and jars), by syft."""
    _run(
        [
            str(release_tools() / "bin" / "syft"),
            "scan",
            f"oci-archive:{archive}",
            "--quiet",
            "-o",
            f"cyclonedx-json={out}",
        ],
        timeout=1800,
    )
    return out


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# --- all of it -------------------------------------------------------------------------------------------------


def sha256sums(out: Path) -> Path:
    lines = []
    for path in sorted(p for p in out.iterdir() if p.is_file() and p.name != "SHA256SUMS"):
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        lines.append(f"{digest.hexdigest()}  {path.name}\n")
    (out / "SHA256SUMS").write_text("".join(lines))
    return out / "SHA256SUMS"


def say(line: str) -> None:
    print(f"[dist] {line}", file=sys.stderr, flush=True)


def main(
    out: Path,
    *,
    images: Sequence[ImageName] = ("engine", "operator"),
    local_bases: bool | None = None,
    url: str | None = None,
) -> int:
    version = project_version()
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.iterdir():
        if stale.is_file():
            stale.unlink()
    say(f"the wheel and the sdist of spark-dlq {version} (python -m build)")
    wheel = build_python(out)
    check_wheel_contents(wheel)
    bin_dir = install_clean(wheel, cache_dir() / "run" / "dist-venv")
    check_commands(bin_dir)
    check_sbom(
        wheel_sbom(bin_dir, out / f"{wheel.name}.cdx.json"),
        subject="spark-dlq",
        components=["pyyaml"],
        version=version,
    )
    url = url or project_url()
    if url:
        say(
            f"the chart (helm package, helm lint --strict), naming {url} and its runbooks {runbooks_url(url)}"
        )
    else:
        say(
            "the chart (helm package, helm lint --strict); no project URL (--project-url, or an "
            "origin remote): its alerts need monitoring.prometheusRule.runbookBaseUrl"
        )
    check_chart(package_chart(out, url=url))
    if local_bases is None:
        local_bases = (cache_dir() / "images" / "manifest.json").exists()
    for name in images:
        image = IMAGES[name]
        say(
            f"the image {image.title} ({image.dockerfile}; {'bases made here' if local_bases else 'public bases'})"
        )
        tag = build_image(image, local_bases=local_bases)
        check_lock_used(image, tag)
        archive = save_image(tag, out / f"{image.title}-{version}.oci.tar")
        check_labels(archive_labels(archive), image)
        say(f"  its SBOM (syft over {archive.name})")
        components = ["kopf" if name == "operator" else "pyarrow", "pyyaml"]
        check_sbom(
            image_sbom(archive, out / f"{archive.name}.cdx.json"),
            subject=archive.name.split(".oci")[0][: len(image.title)],
            components=components,
        )
    sha256sums(out)
    for path in sorted(out.iterdir()):
        if path.is_file():
            say(f"  {path.name}  {path.stat().st_size / 1e6:.1f} MB")
    say(f"every artefact built and checked, in {out}")
    return 0
