"""Garbage collection of a store, safe against concurrent publishes: blobs no manifest references, older
than a grace period, are deleted; referenced blobs never are.

The danger is a publisher that finds a blob already stored (an orphan of an earlier refused or killed
publish), skips uploading it, and writes a manifest naming it while a gc deletes it. Publishers and
gc exclude each other with two kinds of lock object, each side writing its own before reading the
other's (so at least one of two racing parties sees the other, and backs off):

- `locks/publish-<id>.json`: written by each publisher before it looks at any blob, refreshed while
  it uploads, deleted when its manifest is written (or the publish fails); stale after PUBLISH_STALE_S
  without a refresh (a killed publisher), then ignored and removed by gc;
- `locks/gc.json`: one gc at a time, leased for `lease_s` and renewed while it deletes; a publisher that
  sees a live one waits for it. A gc killed midway leaves its lease to expire: everything it had not
  deleted stays, and every referenced blob is untouched.

Ages are measured against the store's own clock: the modification time of the lock just written.
"""

from __future__ import annotations

import json
import time

from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.release.locks import GC_LOCK, PUBLISH_LOCKS, PUBLISH_STALE_S, gc_lease, store_time


def _referenced(store) -> set[str]:
    refs = set()
    for key in store.list("versions"):
        if key.endswith("/manifest.json"):
            data = store.get(key)
            if data is None:
                continue
            try:
                refs.update(e["sha256"] for e in json.loads(data)["files"])
            except (ValueError, KeyError, TypeError):
                raise PipelineError(f"{store.url}/{key}: not a release manifest; gc refuses to guess what it "
                                    "references") from None
    return refs


def collect_garbage(store, grace_s: float = 3600.0, dry_run: bool = False, log=print,
                    lease_s: float = 60.0) -> dict:
    """Delete (or, dry run, list) blobs that no manifest references and that are older than grace_s.
    Refuses, changing nothing, while a publish is under way. Returns {"deleted", "kept", "bytes"}."""
    if grace_s < 0:
        raise PipelineError("--grace must not be negative")
    with gc_lease(store, lease_s) as renew:
        now = store_time(store, GC_LOCK) or time.time()
        live = []
        for key, t in store.list_times(PUBLISH_LOCKS):
            if not key.startswith(f"{PUBLISH_LOCKS}/publish-"):
                continue
            if t + PUBLISH_STALE_S < now:
                store.delete(key)  # a killed publisher's
            else:
                live.append(key)
        if live:
            raise PipelineError(f"{store.url}: {len(live)} publish(es) under way; gc changes nothing until they "
                                "finish (try again later)")
        referenced = _referenced(store)
        blobs = store.list_times("blobs/sha256")
        doomed = [(k, t) for k, t in blobs if k.rsplit("/", 1)[1] not in referenced and t + grace_s <= now]
        kept = len(blobs) - len(doomed)
        if dry_run:
            for k, _ in doomed:
                log(f"would delete {k}")
            log(f"dry run: {len(doomed)} unreferenced blobs older than {grace_s:g} s would go, {kept} stay")
            return {"deleted": 0, "would_delete": len(doomed), "kept": kept}
        renewed = time.monotonic()
        for k, _ in doomed:
            if time.monotonic() - renewed > lease_s / 3:
                renew()
                renewed = time.monotonic()
            store.delete(k)
            log(f"deleted {k}")
        log(f"gc: deleted {len(doomed)} unreferenced blobs older than {grace_s:g} s; {kept} stay")
        return {"deleted": len(doomed), "kept": kept}


def parse_duration(text: str) -> float:
    """`90`, `90s`, `15m`, `2h`, `7d` -> seconds."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", str(text))
    if not m:
        raise PipelineError(f"bad duration {text!r} (e.g. 3600, 90s, 15m, 2h, 7d)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
