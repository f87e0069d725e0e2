"""Certificates for the local control plane, made with the ``openssl`` command.

The kube-apiserver serves TLS and authenticates clients by certificate: a CA signs the
serving certificates (the API server's, a node's kubelet's) and one client certificate per
user (the admin is in ``system:masters``; the operator's RBAC tests get a user of their own, a
node's kubelet is ``system:node:<name>``). A service-account key pair signs tokens.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "ca.crt").exists():
        return
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "3650",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-subj",
        "/CN=spark-dlq-testbed-ca",
        cwd=folder,
    )
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=folder)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=folder)


def make_server_cert(
    folder: Path, *, name: str = "apiserver", common_name: str = "kube-apiserver", sans: tuple[str, ...] = ()
) -> tuple[Path, Path]:
    """A serving certificate ``<name>.crt`` for 127.0.0.1, localhost and ``sans`` (``IP:...`` or
    ``DNS:...``), made again when the names change. Returns (cert, key)."""
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    names = ["IP:127.0.0.1", "DNS:localhost", *sans]
    ext = f"subjectAltName={','.join(dict.fromkeys(names))}\nextendedKeyUsage=serverAuth\n"
    ext_file = folder / f"{name}.ext"
    if cert.exists() and ext_file.exists() and ext_file.read_text() == ext:
        return cert, key
    ext_file.write_text(ext)
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        key.name,
        "-out",
        f"{name}.csr",
        "-subj",
        f"/CN={common_name}",
        cwd=folder,
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "3650",
        "-out",
        cert.name,
        "-extfile",
        ext_file.name,
        cwd=folder,
    )
    return cert, key


def make_client_cert(folder: Path, user: str, groups: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """A client certificate for ``user`` in ``groups``; returns (cert, key)."""
    stem = "client-" + "".join(c if c.isalnum() else "-" for c in user)
    cert, key = folder / f"{stem}.crt", folder / f"{stem}.key"
    if not cert.exists():
        subject = f"/CN={user}" + "".join(f"/O={g}" for g in groups)
        (folder / f"{stem}.ext").write_text("extendedKeyUsage=clientAuth\n")
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            key.name,
            "-out",
            f"{stem}.csr",
            "-subj",
            subject,
            cwd=folder,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{stem}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "3650",
            "-out",
            cert.name,
            "-extfile",
            f"{stem}.ext",
            cwd=folder,
        )
    return cert, key
