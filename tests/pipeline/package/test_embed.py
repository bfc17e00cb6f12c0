"""The archive: objcopy-wrapped blobs, in table order, with no owner or time in it."""

from __future__ import annotations

import json
import subprocess


def test_archive_members_in_table_order_without_owner_or_time(built):
    report, out, _ = built
    a = out / "cuda" / "sm_90" / "triton_kernel_infos.a"
    members = subprocess.run(["ar", "tv", str(a)], capture_output=True, text=True, check=True).stdout.splitlines()
    doc = json.loads((a.parent / "kernels.json").read_text())
    assert [m.split()[-1] for m in members] == [f"{k['name']}.o" for k in doc["kernels"]]
    assert all(" 0/0 " in m and "1970" in m for m in members)  # ar D: no uid/gid/mtime
