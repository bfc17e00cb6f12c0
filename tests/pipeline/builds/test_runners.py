"""Where a build runs: auto picks docker when an engine answers, and says which."""

from __future__ import annotations

import pytest
from tritonforge.pipeline.errors import PipelineError


def test_auto_runner_says_which(docker_engine, monkeypatch):
    from tritonforge.pipeline.builds.runners import choose_runner

    said = []
    assert choose_runner("auto", said.append) == "docker"
    assert said == ["runner: docker (a Docker engine answered)"]
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert choose_runner("auto", said.append) == "local"
    assert said[1].startswith("runner: local (no Docker engine reachable") and "nonexistent" in said[1]
    assert choose_runner("docker", said.append) == "docker" and len(said) == 2  # asked by name: no guess
    with pytest.raises(PipelineError, match="--runner must be one of auto, docker, local, not 'podman'"):
        choose_runner("podman", said.append)
