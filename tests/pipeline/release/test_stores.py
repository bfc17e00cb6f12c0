"""Stores: S3 errors that say what went wrong and never show a credential."""

from __future__ import annotations

import os

from .test_publish import FULL, cli, dist_copy, publisher, s3  # noqa: F401 (fixtures)


def test_wrong_credentials_are_clear_and_secret_free(root, s3, dist_copy):  # noqa: F811
    secret = "wrong-" + os.urandom(8).hex()
    proc = cli(root, publisher(root, "6.0.0", f"s3://{s3.bucket}/{s3.prefix}", dist_copy),
               env={**s3.env, "AWS_SECRET_ACCESS_KEY": secret})
    assert proc.returncode == 1
    assert "rejected the credentials (SignatureDoesNotMatch)" in proc.stderr
    assert secret not in proc.stdout + proc.stderr and s3.env["AWS_SECRET_ACCESS_KEY"] not in proc.stderr
