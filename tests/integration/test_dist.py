"""The release artefacts `make dist` makes, checked by the same functions (spark_dlq_devtools.dist)
on what the suite builds: the wheel in a clean virtualenv with its SBOM, the images with their
OCI labels, their lock files and an SBOM. The chart's package is installed from its .tgz by
tests/integration/test_chart.py."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from spark_dlq_devtools import containers
from spark_dlq_devtools.dist import (
    IMAGES,
    DistError,
    archive_labels,
    build_image,
    build_python,
    check_commands,
    check_labels,
    check_lock_used,
    check_sbom,
    check_wheel_contents,
    image_sbom,
    install_clean,
    lock_pins,
    project_version,
    save_image,
    wheel_sbom,
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_python(tmp_path_factory.mktemp("dist"), isolated=False)


def test_the_wheel_holds_the_engine_and_the_operator_only(wheel: Path) -> None:
    check_wheel_contents(wheel)
    with zipfile.ZipFile(wheel) as archive:
        assert not [n for n in archive.namelist() if "spark_dlq_devtools" in n]


def test_a_wheel_with_the_test_bed_is_refused(wheel: Path, tmp_path: Path) -> None:
    """The check is not vacuous: the same wheel with a test-bed module added fails it."""
    bad = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(bad, "w") as target:
        for item in source.infolist():
            target.writestr(item, source.read(item))
        target.writestr("spark_dlq_devtools/__init__.py", "")
    with pytest.raises(DistError, match="no test bed"):
        check_wheel_contents(bad)


def test_the_wheel_installs_in_a_clean_virtualenv_with_its_sbom(wheel: Path, tmp_path: Path) -> None:
    bin_dir = install_clean(wheel, tmp_path / "venv")
    check_commands(bin_dir)
    sbom = check_sbom(
        wheel_sbom(bin_dir, tmp_path / "wheel.cdx.json"),
        subject="spark-dlq",
        components=["pyyaml"],
        version=project_version(),
    )
    names = {c["name"].lower() for c in sbom["components"]}
    assert not names & {"pyspark", "kopf"}, "a plain install has no extra"


@pytest.fixture(scope="module")
def release_images() -> dict[str, str]:
    """Both images as `make dist` builds them (on the bases made here; every layer but the
    labels comes from the set-up's build): name -> tag."""
    return {name: build_image(image, local_bases=True) for name, image in IMAGES.items()}


@pytest.mark.parametrize("name", ["operator", "engine"])
def test_the_release_image_is_labelled_and_installs_its_lock(
    name: str, release_images: dict[str, str]
) -> None:
    """Its labels name this checkout's version, commit and commit time; its Python
    distributions are exactly its lock file's."""
    image = IMAGES[name]  # type: ignore[index]
    labels = containers.podman(
        "image", "inspect", "--format", "{{json .Labels}}", release_images[name]
    ).stdout
    check_labels(json.loads(labels), image)
    assert lock_pins(image), image.lock
    check_lock_used(image, release_images[name])


def test_the_operator_image_archive_has_an_sbom(tmp_path: Path, release_images: dict[str, str]) -> None:
    image = IMAGES["operator"]
    archive = save_image(release_images["operator"], tmp_path / f"{image.title}.oci.tar")
    check_labels(archive_labels(archive), image)
    sbom = check_sbom(
        image_sbom(archive, tmp_path / "image.cdx.json"), subject=archive.name, components=["kopf", "pyyaml"]
    )
    # syft sees the image's Debian packages too, not only its Python.
    assert any("pkg:deb/" in str(c.get("purl", "")) for c in sbom["components"])
