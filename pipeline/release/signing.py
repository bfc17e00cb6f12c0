"""Ed25519 signatures over release manifests (the `cryptography` package).

A key pair is two PEM files: the private key (PKCS#8, kept by the publisher, e.g. in a CI secret) and
the public key (SubjectPublicKeyInfo, handed to consumers). A signature is a small JSON document stored
beside the manifest, at `versions/<V>/signatures/<manifest sha256>.<key id>.json`: it names the bytes
it signs, so a publish killed after signing and run again signs its new manifest without a conflict,
and a manifest changed after signing no longer has a signature of its own.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError

SCHEMA = "tritonforge.signature/1"


def _crypto():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise PipelineError("signing needs the 'cryptography' package (pip install cryptography)") from None
    return serialization, ed25519, InvalidSignature


def key_id(public_raw: bytes) -> str:
    """16 hex digits naming a public key: the start of the sha256 of its 32 raw bytes."""
    return hashlib.sha256(public_raw).hexdigest()[:16]


def keygen(private_path: Path | str, public_path: Path | str) -> str:
    """Write a new key pair (the private key readable by its owner only); refuses to replace either file.
    Returns the key id."""
    serialization, ed25519, _ = _crypto()
    private_path, public_path = Path(private_path), Path(public_path)
    for p in (private_path, public_path):
        if p.exists():
            raise PipelineError(f"{p} exists; keys are never overwritten (remove it or choose another path)")
    key = ed25519.Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    public = key.public_key()
    public_pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    private_path.parent.mkdir(parents=True, exist_ok=True)
    public_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(private_pem)
    public_path.write_bytes(public_pem)
    return key_id(_raw(public))


def _raw(public) -> bytes:
    serialization, _, _ = _crypto()
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _pem(source: str, what: str) -> bytes:
    """PEM text given as such (as a CI secret hands it over), or read from the file it names."""
    if source.lstrip().startswith("-----BEGIN"):
        return source.encode()
    try:
        return Path(source).read_bytes()
    except OSError as exc:
        raise PipelineError(f"cannot read the {what} {source}: {exc.strerror}") from None


def load_private(source: str) -> object:
    """An Ed25519 private key from a PEM file path or PEM text."""
    serialization, ed25519, _ = _crypto()
    try:
        key = serialization.load_pem_private_key(_pem(source, "signing key"), password=None)
    except (ValueError, TypeError) as exc:
        raise PipelineError(f"the signing key is not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise PipelineError("the signing key is not an Ed25519 key (make one with `invoke keygen`)")
    return key


def load_public(source: str) -> object:
    """An Ed25519 public key from a PEM file path or PEM text."""
    serialization, ed25519, _ = _crypto()
    try:
        key = serialization.load_pem_public_key(_pem(source, "trusted key"))
    except (ValueError, TypeError) as exc:
        raise PipelineError(f"the trusted key is not a PEM public key ({exc})") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise PipelineError("the trusted key is not an Ed25519 public key")
    return key


def signature_key(version_dir: str, manifest: bytes, kid: str) -> str:
    return f"{version_dir}/signatures/{hashlib.sha256(manifest).hexdigest()}.{kid}.json"


def sign(private, manifest: bytes) -> tuple[str, bytes]:
    """(key id, signature document) for these exact manifest bytes."""
    kid = key_id(_raw(private.public_key()))
    doc = {"schema": SCHEMA, "algorithm": "ed25519", "key_id": kid,
           "manifest_sha256": hashlib.sha256(manifest).hexdigest(),
           "signature": base64.b64encode(private.sign(manifest)).decode()}
    return kid, (json.dumps(doc, indent=1) + "\n").encode()


def verify(public, manifest: bytes, signatures: dict[str, bytes], what: str) -> str:
    """Check that `manifest` carries a valid signature by `public` among `signatures` ({store key: document},
    every signature stored for that version). Returns the key id; raises naming what is wrong."""
    _, _, invalid = _crypto()
    kid = key_id(_raw(public))
    digest = hashlib.sha256(manifest).hexdigest()
    docs = []
    for key, data in signatures.items():
        try:
            docs.append(json.loads(data))
        except ValueError:
            raise PipelineError(f"{what}: signature {key} is not JSON") from None
    mine = [d for d in docs if d.get("key_id") == kid]
    for d in mine:
        if d.get("manifest_sha256") != digest:
            continue
        try:
            public.verify(base64.b64decode(d["signature"]), manifest)
            return kid
        except (invalid, KeyError, ValueError):
            raise PipelineError(f"{what}: the signature by key {kid} does not verify: the manifest was changed "
                                "after it was signed") from None
    if mine:
        raise PipelineError(f"{what}: the manifest was changed after it was signed (key {kid} signed sha256 "
                            f"{mine[0].get('manifest_sha256')}, the manifest is {digest})")
    if docs:
        others = ", ".join(sorted({str(d.get("key_id")) for d in docs}))
        raise PipelineError(f"{what}: signed by another key ({others}), not by the trusted key {kid}")
    raise PipelineError(f"{what}: unsigned, and a trusted key {kid} was given")
