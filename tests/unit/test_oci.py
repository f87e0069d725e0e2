"""The node's image archives: an OCI image layout whose digests and layer hold what containerd
checks on import, with the image name containerd reads."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

from spark_dlq_devtools.oci import write_image


def _read(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {member.name: tar.extractfile(member).read() for member in tar if member.isfile()}  # type: ignore[union-attr]


def _blob(entries: dict[str, bytes], digest: str) -> bytes:
    data = entries[f"blobs/sha256/{digest.removeprefix('sha256:')}"]
    assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
    return data


def test_archive_names_the_image_and_every_digest_matches(tmp_path: Path) -> None:
    binary = tmp_path / "probe"
    binary.write_bytes(b"\x7fELF not really")
    binary.chmod(0o755)

    digest = write_image(
        tmp_path / "probe.tar",
        name="spark-dlq.local/probe:abc",
        files={"probe": binary},
        entrypoint=["/probe"],
    )

    entries = _read(tmp_path / "probe.tar")
    assert json.loads(entries["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    [descriptor] = json.loads(entries["index.json"])["manifests"]
    assert descriptor["digest"] == digest
    assert descriptor["annotations"]["io.containerd.image.name"] == "spark-dlq.local/probe:abc"
    assert descriptor["platform"] == {"architecture": "amd64", "os": "linux"}
    manifest = json.loads(_blob(entries, digest))
    config = json.loads(_blob(entries, manifest["config"]["digest"]))
    assert config["config"]["Entrypoint"] == ["/probe"]
    [layer_descriptor] = manifest["layers"]
    layer = _blob(entries, layer_descriptor["digest"])
    assert config["rootfs"]["diff_ids"] == [layer_descriptor["digest"]]  # uncompressed: the same digest
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        member = tar.getmember("probe")
        assert member.mode == 0o755
        assert (member.uid, member.gid) == (0, 0)
        assert tar.extractfile(member).read() == b"\x7fELF not really"  # type: ignore[union-attr]


def test_nested_paths_get_their_folders_and_same_inputs_give_the_same_image(tmp_path: Path) -> None:
    source = tmp_path / "conf"
    source.write_text("x")
    first = write_image(tmp_path / "a.tar", name="x:1", files={"etc/app/conf": source}, entrypoint=["/bin"])
    second = write_image(tmp_path / "b.tar", name="x:1", files={"etc/app/conf": source}, entrypoint=["/bin"])
    assert first == second
    entries = _read(tmp_path / "a.tar")
    manifest = json.loads(_blob(entries, first))
    with tarfile.open(fileobj=io.BytesIO(_blob(entries, manifest["layers"][0]["digest"]))) as tar:
        assert [(m.name, m.isdir()) for m in tar] == [
            ("etc", True),
            ("etc/app", True),
            ("etc/app/conf", False),
        ]
