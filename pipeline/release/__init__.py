"""Releases: stores with create-only writes, versioned immutable publishes and verified fetches,
signatures, lock files for consumers, and garbage collection that never races a publish."""
