"""Container images made from a few static files, as OCI archives containerd imports.

No registry is reachable here, so the node's own images (its sandbox "pause" image, the probe
image the cluster tests run) are written directly: one uncompressed layer holding the files,
an image config naming the entrypoint, a manifest and an OCI image-layout index, in one tar.
``ctr images import`` reads the image's name from the index's ``io.containerd.image.name``
annotation. Only the standard library is used, so the setup scripts can run it with the
system Python: ``python3 oci.py ARCHIVE NAME ENTRYPOINT SRC=DEST...``.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_CONFIG = "application/vnd.oci.image.config.v1+json"
_LAYER = "application/vnd.oci.image.layer.v1.tar"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _layer(files: dict[str, Path]) -> bytes:
    """A tar of ``files`` (path in the image -> file here), every file root-owned, mode kept,
    timestamps zero, so the same inputs give the same layer digest."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        folders: set[str] = set()
        for inside in sorted(files):
            parts = inside.strip("/").split("/")
            for depth in range(1, len(parts)):
                folder = "/".join(parts[:depth])
                if folder not in folders:
                    folders.add(folder)
                    info = tarfile.TarInfo(folder)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            source = files[inside]
            info = tarfile.TarInfo("/".join(parts))
            info.size, info.mode = source.stat().st_size, source.stat().st_mode & 0o7777
            with source.open("rb") as data:
                tar.addfile(info, data)
    return buffer.getvalue()


def write_image(archive: Path, *, name: str, files: dict[str, Path], entrypoint: list[str]) -> str:
    """Write an OCI archive of one linux/amd64 image called ``name``; returns its manifest digest."""
    layer = _layer(files)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": entrypoint, "Env": ["PATH=/"], "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [_digest(layer)]},
        },
        sort_keys=True,
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": _MANIFEST,
            "config": {"mediaType": _CONFIG, "digest": _digest(config), "size": len(config)},
            "layers": [{"mediaType": _LAYER, "digest": _digest(layer), "size": len(layer)}],
        },
        sort_keys=True,
    ).encode()
    index = json.dumps(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": _MANIFEST,
                    "digest": _digest(manifest),
                    "size": len(manifest),
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                    },
                }
            ],
        },
        sort_keys=True,
    ).encode()
    entries = {
        "oci-layout": b'{"imageLayoutVersion":"1.0.0"}',
        "index.json": index,
        **{f"blobs/sha256/{_digest(blob)[7:]}": blob for blob in (layer, config, manifest)},
    }
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(".partial")
    with tarfile.open(partial, mode="w") as tar:
        for entry, data in entries.items():
            info = tarfile.TarInfo(entry)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    partial.replace(archive)
    return _digest(manifest)


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit("usage: oci.py ARCHIVE NAME ENTRYPOINT SRC=DEST [SRC=DEST...]")
    target, image, command, *pairs = sys.argv[1:]
    mapping = {dest: Path(src) for src, dest in (pair.split("=", 1) for pair in pairs)}
    print(write_image(Path(target), name=image, files=mapping, entrypoint=[command]))
