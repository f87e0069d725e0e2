"""The images' lock files (requirements/*-image.txt, written by scripts/lock.sh): every
distribution pinned with hashes, the pins satisfy pyproject.toml's extras, and the Dockerfiles
install from them with --require-hashes. That the images hold exactly these pins is
tests/integration/test_dist.py's; the public bases pinned by digest, test_images.py's."""

from __future__ import annotations

import re
import tomllib

import pytest
from packaging.requirements import Requirement

from spark_dlq_devtools.dist import IMAGES, Image, lock_pins
from spark_dlq_devtools.paths import REPO_ROOT

PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
#: Each image's extra, and what it leaves out (the Spark image has Spark).
EXTRAS = {"engine": ("engine", {"pyspark"}), "operator": ("operator", set())}


def entries(image: Image) -> list[str]:
    """The lock's requirement entries, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", (REPO_ROOT / image.lock).read_text())
    return [line for line in text.splitlines() if line and not line.startswith(("#", " "))]


@pytest.mark.parametrize("name", list(IMAGES))
def test_every_pin_has_hashes(name: str) -> None:
    for entry in entries(IMAGES[name]):  # type: ignore[index]
        assert re.match(r"^[A-Za-z0-9_.-]+==\S+(\s+--hash=sha256:[0-9a-f]{64})+\s*$", entry), entry


@pytest.mark.parametrize("name", list(IMAGES))
def test_the_pins_satisfy_the_extra(name: str) -> None:
    image = IMAGES[name]  # type: ignore[index]
    extra, left_out = EXTRAS[name]
    pins = lock_pins(image)
    for text in [*PROJECT["dependencies"], *PROJECT["optional-dependencies"][extra]]:
        requirement = Requirement(text)
        key = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if key in left_out:
            assert key not in pins, f"{image.lock} installs {key}, which the image's base has"
            continue
        assert key in pins, f"{image.lock} lacks {requirement.name} ({extra} extra): run scripts/lock.sh"
        assert requirement.specifier.contains(pins[key], prereleases=True), (
            f"{image.lock} pins {key}=={pins[key]}, the {extra} extra asks {requirement}: run scripts/lock.sh"
        )


@pytest.mark.parametrize("name", list(IMAGES))
def test_the_dockerfile_installs_the_lock_with_hashes(name: str) -> None:
    image = IMAGES[name]  # type: ignore[index]
    text = re.sub(r"\\\n\s*", " ", (REPO_ROOT / image.dockerfile).read_text())
    assert f"COPY {image.lock} /tmp/requirements.txt" in text
    assert re.search(r"pip install --no-cache-dir --require-hashes --no-deps -r /tmp/requirements.txt", text)
    assert "requirements.py" not in text, "the images install the lock, not the extra re-resolved"
