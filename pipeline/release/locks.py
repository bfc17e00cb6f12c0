"""The locks publishers and gc exclude each other with (see gc.py for why): each side writes its own
before reading the other's, so of two racing parties at least one sees the other and backs off.

- `locks/publish-<id>.json` (`PublishLock`): a publisher's, from before it looks at any blob until its
  manifest is written, refreshed while it uploads; stale after PUBLISH_STALE_S without a refresh;
- `locks/gc.json` (`gc_lease`): one gc at a time, leased for `lease_s` and renewed while it deletes.

Ages are measured against the store's own clock: the modification time of the lock just written.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid

from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.release.stores import Conflict

GC_LOCK = "locks/gc.json"
PUBLISH_LOCKS = "locks"
PUBLISH_STALE_S = 600.0  # a publisher refreshes its lock every HEARTBEAT_S while it uploads
HEARTBEAT_S = 30.0


def store_time(store, key: str) -> float | None:
    prefix, _, name = key.rpartition("/")
    return next((t for k, t in store.list_times(prefix) if k == key), None)


def gc_lock_live(store, now: float) -> dict | None:
    """The gc lock, if a gc holds it at store time `now` (its lease not run out)."""
    data = store.get(GC_LOCK)
    if data is None:
        return None
    try:
        doc = json.loads(data)
    except ValueError:
        doc = {}
    written = store_time(store, GC_LOCK)
    if written is None or written + float(doc.get("lease_s", 60)) < now:
        return None
    return doc


class PublishLock:
    """Held by a publisher from before it looks at blobs until its manifest is written."""

    def __init__(self, store, wait_s: float = 600.0, log=lambda _: None):
        self.store, self.wait_s, self.log = store, wait_s, log
        self.key = f"{PUBLISH_LOCKS}/publish-{uuid.uuid4().hex}.json"
        self.refreshed = 0.0

    def _write(self) -> float:
        self.store.put(self.key, json.dumps({"pid_host": uuid.getnode(), "at": time.time()}).encode())
        self.refreshed = time.monotonic()
        return store_time(self.store, self.key) or time.time()

    def __enter__(self):
        deadline = time.monotonic() + self.wait_s
        while True:
            now = self._write()
            holder = gc_lock_live(self.store, now)
            if holder is None:
                return self
            self.store.delete(self.key)  # let the gc finish before blobs are looked at
            if time.monotonic() > deadline:
                raise PipelineError(f"{self.store.url}: a gc holds the store (lock {GC_LOCK}) for longer than "
                                    f"{self.wait_s:.0f} s; try again later")
            self.log("waiting for a gc of the store to finish")
            time.sleep(0.2)

    def heartbeat(self) -> None:
        if time.monotonic() - self.refreshed > HEARTBEAT_S:
            self._write()

    def __exit__(self, *exc):
        self.store.delete(self.key)
        return False


@contextlib.contextmanager
def gc_lease(store, lease_s: float):
    token = uuid.uuid4().hex
    body = json.dumps({"token": token, "lease_s": lease_s}).encode()
    try:
        store.create(GC_LOCK, body)
    except Conflict:
        probe = f"{PUBLISH_LOCKS}/clock-{token}.json"  # the store's clock, from an object written now
        store.put(probe, b"{}")
        now = store_time(store, probe) or time.time()
        store.delete(probe)
        if gc_lock_live(store, now) is not None:
            raise PipelineError(f"{store.url}: another gc holds {GC_LOCK}; try again when it finishes") from None
        store.delete(GC_LOCK)  # its lease ran out (a killed gc): take over
        try:
            store.create(GC_LOCK, body)
        except Conflict:
            raise PipelineError(f"{store.url}: another gc took {GC_LOCK} first") from None

    def renew():
        data = store.get(GC_LOCK)
        if data is None or json.loads(data).get("token") != token:
            raise PipelineError(f"{store.url}: lost {GC_LOCK} to another gc; stopping")
        store.put(GC_LOCK, body)

    try:
        yield renew
    finally:
        data = store.get(GC_LOCK)
        if data is not None and json.loads(data).get("token") == token:
            store.delete(GC_LOCK)
