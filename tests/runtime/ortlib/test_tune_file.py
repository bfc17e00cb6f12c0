"""The library's tune file (TRITONFORGE_ORT_TUNE_FILE, or the .tune beside the library): one it cannot read fails
every session of the process with its path named, not the first alone; one that reads is taken."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("onnxruntime", reason="the sessions run in onnxruntime")
pytest.importorskip("onnx")

# Two sessions one after the other in a fresh process (the library reads the variable once per process): what
# each registration said, one JSON line.
SESSIONS = r"""
import json, sys
import onnxruntime as ort
from tritonforge.runtime import ortlib

said = []
for _ in range(2):
    so = ort.SessionOptions()
    try:
        ortlib.register(so, sys.argv[1])
        said.append("ok")
    except Exception as exc:
        said.append(str(exc))
print(json.dumps({"sessions": said, "info": ortlib.info(sys.argv[1])}))
"""


def _two_sessions(lib, tune) -> dict:
    env = {**os.environ, "TRITONFORGE_ORT_TUNE_FILE": str(tune)}
    proc = subprocess.run([sys.executable, "-c", SESSIONS, str(lib)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("case", ["missing", "directory", "not tab-separated"])
def test_a_tune_file_that_cannot_be_read_fails_every_session_naming_it(ort_library, tmp_path, case):
    tune = tmp_path / "choices.tune"
    if case == "directory":
        tune.mkdir()
    elif case == "not tab-separated":
        tune.write_text("# device, op key, signature, kernel\nNVIDIA H100 softmax_fp16 8_77 softmax_fp16_128\n")
    got = _two_sessions(ort_library, tune)
    assert len(got["sessions"]) == 2
    for said in got["sessions"]:
        assert said != "ok" and f"TRITONFORGE_ORT_TUNE_FILE={tune}" in said, got
    assert {"missing": "cannot read it", "directory": "not a file",
            "not tab-separated": "line 2 is not device, op, signature and kernel"}[case] in got["sessions"][1]


def test_a_tune_file_that_reads_is_taken_by_every_session(ort_library, tmp_path):
    tune = tmp_path / "choices.tune"
    tune.write_text("# device, op key, signature, kernel\nNVIDIA H100\tsoftmax_fp16\t8_77\tsoftmax_fp16_128\n")
    got = _two_sessions(ort_library, tune)
    assert got["sessions"] == ["ok", "ok"]
    assert got["info"]["tune_file"] == str(tune) and got["info"]["tune_choices"] == 1


SAVE = r"""
import sys
from tritonforge.runtime import ortlib
print(ortlib.save_choices(sys.argv[2], sys.argv[1]))
"""


def test_saved_choices_are_a_tune_file_the_next_process_takes(ort_library, tmp_path):
    """save_choices writes what the process chose (none on the CPU: choices are per CUDA shape) in the tune file's
    form, whole, and a later process reads it as its tune file."""
    saved = tmp_path / "sdxl.tune"
    proc = subprocess.run([sys.executable, "-c", SAVE, str(ort_library), str(saved)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["0"], proc.stderr
    assert saved.read_text().startswith("# device\top\tsignature\tkernel") and \
        sorted(p.name for p in tmp_path.iterdir()) == ["sdxl.tune"]
    got = _two_sessions(ort_library, saved)
    assert got["sessions"] == ["ok", "ok"] and got["info"]["tune_file"] == str(saved)
    assert got["info"]["tune_choices"] == 0


def test_saving_choices_into_a_missing_folder_fails_and_writes_nothing(ort_library, tmp_path):
    from tritonforge.runtime import ortlib

    with pytest.raises(FileNotFoundError):
        ortlib.save_choices(tmp_path / "nowhere" / "x.tune", ort_library)
    assert list(tmp_path.iterdir()) == []
