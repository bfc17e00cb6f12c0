"""Artifact stores with one write primitive for releases: create an object only if its key is free.

`file://DIR` (the default, ./artifacts) uses exclusive hard links; `s3://bucket/prefix` uses
PutObject with If-None-Match: * and an x-amz-checksum-sha256 the server verifies. Credentials come
from boto3's standard chain and are never printed. `put` (overwrite), `delete` and `list_times`
serve the store's housekeeping only: locks and garbage collection (pipeline/release/gc.py).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import tempfile
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError

from tritonforge.atomic import write_bytes

KEY_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def check_key(key: str) -> str:
    """Keys are relative paths of safe parts: no '..', no absolute paths, no odd characters."""
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") or not KEY_PART.fullmatch(p) for p in parts):
        raise PipelineError(f"refusing object key {key!r}: keys are '/'-joined parts of [A-Za-z0-9._+-] "
                            "not starting with a dot, with no '..'")
    return key


class Conflict(PipelineError):
    """The key holds different bytes already."""


class FileStore:
    def __init__(self, root: Path | str):
        self.root = Path(root)
        self.url = f"file://{self.root}"

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def create(self, key: str, data: bytes) -> bool:
        """Write `data` at `key` unless the key exists; True if created, False if it held the same bytes."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)  # atomic and exclusive: fails if the key exists
                return True
            except FileExistsError:
                if path.read_bytes() == data:
                    return False
                raise Conflict(f"{self.url}/{key} exists with different content") from None
        finally:
            os.unlink(tmp)

    def get(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def list(self, prefix: str) -> list[str]:
        return [k for k, _ in self.list_times(prefix)]

    def list_times(self, prefix: str) -> list[tuple[str, float]]:
        """(key, last-modified time in seconds since the epoch) under prefix, sorted by key."""
        base = self.root / prefix if prefix else self.root
        if not base.is_dir():
            return []
        out = []
        for p in base.rglob("*"):
            if p.name.startswith("."):
                continue
            try:
                if p.is_file():
                    out.append((str(p.relative_to(self.root)), p.stat().st_mtime))
            except FileNotFoundError:  # deleted while listing
                continue
        return sorted(out)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        write_bytes(path, data)

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)


class S3Store:
    def __init__(self, bucket: str, prefix: str = "", endpoint_url: str | None = None):
        import boto3
        from botocore.config import Config

        self.bucket, self.prefix = bucket, prefix.strip("/")
        if self.prefix:
            check_key(self.prefix)
        self.url = f"s3://{bucket}/{self.prefix}".rstrip("/")
        cfg = Config(retries={"max_attempts": 8, "mode": "standard"}, s3={"addressing_style": "path"})
        self.client = boto3.client("s3", endpoint_url=endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None,
                                   config=cfg)

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def _fail(self, exc, action: str, key: str):
        from botocore.exceptions import ClientError, NoCredentialsError

        if isinstance(exc, NoCredentialsError):
            raise PipelineError(f"{action} {self.url}/{key}: no AWS credentials found (standard chain: env, "
                                "profile, instance role)") from None
        if isinstance(exc, ClientError):
            code = exc.response.get("Error", {}).get("Code", "?")
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403"):
                raise PipelineError(f"{action} {self.url}/{key}: the store rejected the credentials ({code})") from None
            raise PipelineError(f"{action} {self.url}/{key}: {code}: "
                                f"{exc.response.get('Error', {}).get('Message', '')}") from None
        raise PipelineError(f"{action} {self.url}/{key}: {type(exc).__name__}: {exc}") from None

    def create(self, key: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        checksum = base64.b64encode(hashlib.sha256(data).digest()).decode()
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, IfNoneMatch="*",
                                   ChecksumSHA256=checksum)
            return True
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code not in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
                self._fail(exc, "writing", key)
        except Exception as exc:
            self._fail(exc, "writing", key)
        existing = self.get(key)
        if existing == data:
            return False
        raise Conflict(f"{self.url}/{key} exists with different content")

    def get(self, key: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            self._fail(exc, "reading", key)
        except Exception as exc:
            self._fail(exc, "reading", key)

    def list(self, prefix: str) -> list[str]:
        return [k for k, _ in self.list_times(prefix)]

    def list_times(self, prefix: str) -> list[tuple[str, float]]:
        """(key, last-modified time in seconds since the epoch) under prefix, sorted by key."""
        full = self._key(prefix) if prefix else self.prefix
        objects = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(
                    Bucket=self.bucket, Prefix=f"{full}/" if full else ""):
                objects += [(o["Key"], o["LastModified"].timestamp()) for o in page.get("Contents", [])]
        except Exception as exc:
            self._fail(exc, "listing", prefix)
        strip = len(self.prefix) + 1 if self.prefix else 0
        return sorted((k[strip:], t) for k, t in objects)

    def put(self, key: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        except Exception as exc:
            self._fail(exc, "writing", key)

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as exc:
            self._fail(exc, "deleting", key)


def open_store(url: str | None, endpoint_url: str | None = None):
    """`file://DIR`, a plain directory path, or `s3://bucket[/prefix]`. Default: ./artifacts."""
    url = url or "file://artifacts"
    if url.startswith("s3://"):
        bucket, _, prefix = url[5:].partition("/")
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
            raise PipelineError(f"bad S3 bucket name in {url!r}")
        return S3Store(bucket, prefix, endpoint_url)
    if url.startswith("file://"):
        return FileStore(url[7:])
    if "://" in url:
        raise PipelineError(f"unknown store {url!r} (use file://DIR or s3://bucket/prefix)")
    return FileStore(url)
