"""The tuner's method, on a scripted setup (no GPU): what is skipped, checked, timed and chosen."""

from __future__ import annotations

from tritonforge.runtime.launch import Unsupported
from tritonforge.runtime.tune import tune_problem


class ScriptedSetup:
    """Candidates with fixed per-launch times; `wrong` ones fail the numerical check, `refused` ones
    cannot be prepared. Records every check and every timing request."""

    ort_group = "softmax_fp16"

    def __init__(self, times: dict[str, float], wrong=(), refused=(), ort=()):
        self.times, self.wrong, self.refused, self.ort = times, set(wrong), set(refused), set(ort)
        self.checked: list[str] = []
        self.reps: dict[str, list[int]] = {}

    def candidates(self):
        return list(self.times)

    def launch(self, name):
        if name in self.refused:
            raise Unsupported(f"{name}: refused")
        return name

    def is_ort(self, name):
        return name in self.ort

    def check(self, name):
        self.checked.append(name)
        return "max error 1.0" if name in self.wrong else None

    def time_ms(self, name, reps):
        self.reps.setdefault(name, []).append(reps)
        return self.times[name]


def test_slow_candidates_are_skipped_before_their_check():
    setup = ScriptedSetup({"a": 0.010, "slow": 0.025, "fast_wrong": 0.004, "b": 0.006, "gone": 0.001},
                          wrong={"fast_wrong"}, refused={"gone"})
    out = tune_problem(setup, budget_ms=1.0)
    assert out.best == "b" and out.best_ms == 0.006
    assert setup.checked == ["a", "fast_wrong", "b"]  # "slow" (over 2x "a") is never checked
    assert out.skipped == 1 and set(out.rejected) == {"fast_wrong", "gone"}
    assert "numerical check failed" in out.rejected["fast_wrong"] and "refused" in out.rejected["gone"]
    assert set(out.timed) == {"a", "b"}


def test_the_budget_covers_warm_up_and_five_replays():
    setup = ScriptedSetup({"long": 0.5, "short": 0.0001})
    tune_problem(setup, budget_ms=30.0)
    assert setup.reps["long"] == [3, 10]  # quick estimate, then 30 ms / (6 x 0.5 ms)
    assert setup.reps["short"] == [3, 100]  # capped at 100 launches


def test_ort_candidates_are_timed_against_the_ort_best():
    """A candidate of ORT's own group is kept while within 2x of the best ORT kernel, however far it is
    from the overall best, so the ORT-contract figure is the best ORT can pick."""
    setup = ScriptedSetup({"fast": 0.001, "ort_1": 0.010, "ort_2": 0.008}, ort={"ort_1", "ort_2"})
    out = tune_problem(setup, budget_ms=1.0)
    assert out.best == "fast" and out.ort_best == "ort_2" and out.ort_ms == 0.008
    assert setup.checked == ["fast", "ort_1", "ort_2"]


def test_exhaustive_checks_and_times_everything():
    setup = ScriptedSetup({"a": 0.001, "slow": 0.1})
    out = tune_problem(setup, exhaustive=True)
    assert setup.checked == ["a", "slow"] and set(out.timed) == {"a", "slow"} and out.skipped == 0
    # every candidate timed with four times the budget: 40 ms / (6 x 0.1 ms) launches, at most 100
    assert setup.reps["slow"] == [3, 66] and setup.reps["a"] == [3, 100]
