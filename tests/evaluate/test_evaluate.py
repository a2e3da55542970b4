"""The evaluator on the CPU: each candidate ends in the right verdict and the caller lives on."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from autoprofiler.evaluate import EvalConfig, FailureKind, evaluate
from autoprofiler.evaluate.baselines import compiled_candidate, reference_as_candidate
from autoprofiler.store import Store

FAST = EvalConfig(
    device="cpu",
    correctness_trials=3,
    timing_budget_ms=20,
    warmup_ms=2,
    min_timing_trials=5,
    compile_timeout_s=60,
    run_timeout_s=30,
)

HEADER = "import torch\nimport torch.nn as nn\n"

SCALE_PROBLEM_WITH_BATCH = (
    HEADER + "class Model(nn.Module):\n"
    "    def __init__(self, features):\n"
    "        super().__init__()\n"
    "        self.weight = nn.Parameter(torch.randn(features, features))\n"
    "    def forward(self, x):\n"
    "        return torch.relu(x @ self.weight) * 2\n"
    "batch_size = 16\n"
    "def get_inputs():\n"
    "    return [torch.randn(batch_size, 32)]\n"
    "def get_init_inputs():\n"
    "    return [32]\n"
)


def candidate(body: str) -> str:
    return HEADER + textwrap.dedent(body)


CORRECT = candidate(
    """
    class ModelNew(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(features, features))

        def forward(self, x):
            return torch.clamp(torch.mm(x, self.weight), min=0) * 2
    """
)


def test_correct_candidate_passes_and_is_timed(scale_problem):
    result = evaluate(scale_problem, CORRECT, FAST)
    assert result.correct, result.failure_message
    assert result.failure_kind is None
    assert result.correctness_trials == 3
    assert result.timer == "perf_counter" and result.device == "cpu"
    assert result.reference.trials >= 5 and result.candidate.trials >= 5
    assert result.speedup > 0
    assert result.max_abs_diff < 1e-4
    assert result.atol == 1e-4
    assert 0 < result.timed_s < result.wall_s


def test_the_wall_time_is_split_into_the_stages_the_runner_saw(scale_problem):
    from autoprofiler.evaluate.runner import STAGE_FROM_MARK

    result = evaluate(scale_problem, CORRECT, FAST)
    stages = result.stages_s
    after = ["comparison", "slab_free", "verdict"]
    assert list(stages) == ["reference", "slab_offer", *STAGE_FROM_MARK.values(), *after]
    assert all(seconds >= 0 for seconds in stages.values())
    assert stages["comparison"] > 0 and stages["slab_free"] == 0.0  # no slab on a CPU
    assert sum(stages.values()) <= result.wall_s
    assert result.wall_s - sum(stages.values()) < 0.5  # little goes unaccounted for
    # the timing stage is the timing phase the runner timed itself
    assert stages["timing"] == pytest.approx(result.timing_phase_s, abs=0.05)


def test_the_stages_of_a_run_that_died_end_where_it_died(scale_problem):
    result = evaluate(scale_problem, SEGFAULT, FAST)
    assert result.failure_kind is FailureKind.KILLED_BY_SIGNAL
    assert "correctness" not in result.stages_s and "timing" not in result.stages_s
    assert {"reference", "start", "verdict"} <= set(result.stages_s)


def test_marks_written_out_of_order_or_twice_are_timed_as_they_arrived():
    from autoprofiler.evaluate.runner import stage_seconds

    marks = {"began": 10.0, "done": 11.0, "device": 12.0, "nonsense": 11.5}
    assert stage_seconds(marks, 15.0) == {"start": 1.0, "exit": 1.0, "problem": 3.0}
    assert stage_seconds({}, 1.0) == {}


def test_wrong_values_report_the_difference(scale_problem):
    wrong = CORRECT.replace("* 2", "* 2.01")
    result = evaluate(scale_problem, wrong, FAST)
    assert not result.correct
    assert result.failure_kind is FailureKind.WRONG_VALUES
    assert result.max_abs_diff > 1e-4
    assert "max abs diff" in result.failure_message


def test_loose_tolerance_accepts_small_error(scale_problem):
    slightly_off = CORRECT.replace("* 2", "* 2.001")
    strict = evaluate(scale_problem, slightly_off, FAST)
    loose = evaluate(
        scale_problem, slightly_off, EvalConfig(**{**FAST.to_dict(), "atol": 1e-2, "rtol": 1e-2})
    )
    assert not strict.correct and loose.correct
    assert loose.atol == 1e-2


def test_wrong_shape(scale_problem):
    result = evaluate(scale_problem, CORRECT.replace(" * 2\n", "[:, :5] * 2\n"), FAST)
    assert result.failure_kind is FailureKind.WRONG_SHAPE
    assert "shape" in result.failure_message


SEGFAULT = candidate(
    """
    import ctypes

    class ModelNew(nn.Module):
        def __init__(self, features):
            super().__init__()

        def forward(self, x):
            return ctypes.string_at(0)
    """
)

HANG = candidate(
    """
    class ModelNew(nn.Module):
        def __init__(self, features):
            super().__init__()

        def forward(self, x):
            while True:
                pass
    """
)


def test_segfault_is_a_failed_result(scale_problem):
    result = evaluate(scale_problem, SEGFAULT, FAST)
    assert result.failure_kind is FailureKind.KILLED_BY_SIGNAL
    assert "SIGSEGV" in result.failure_message


def test_hang_is_killed_at_the_limit(scale_problem):
    config = EvalConfig(**{**FAST.to_dict(), "compile_timeout_s": 8})
    result = evaluate(scale_problem, HANG, config)
    assert result.failure_kind is FailureKind.TIMEOUT
    assert result.wall_s < 30


def test_hang_after_first_call_uses_the_run_limit(scale_problem):
    hang_later = candidate(
        """
        class ModelNew(nn.Module):
            calls = 0

            def __init__(self, features):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(features, features))

            def forward(self, x):
                ModelNew.calls += 1
                while ModelNew.calls > 1:
                    pass
                return torch.relu(x @ self.weight) * 2
        """
    )
    config = EvalConfig(**{**FAST.to_dict(), "run_timeout_s": 4})
    result = evaluate(scale_problem, hang_later, config)
    assert result.failure_kind is FailureKind.TIMEOUT
    assert "run phase" in result.failure_message
    assert result.compiled


@pytest.mark.parametrize(
    ("source", "kind", "words"),
    [
        (
            candidate("import not_a_module_anywhere\nclass ModelNew(nn.Module):\n    pass\n"),
            FailureKind.BUILD_ERROR,
            "not_a_module_anywhere",
        ),
        (
            candidate("class Other(nn.Module):\n    pass\n"),
            FailureKind.MISSING_MODELNEW,
            "ModelNew",
        ),
        (candidate("class ModelNew(nn.Module:\n    pass\n"), FailureKind.SYNTAX_ERROR, "line"),
        (
            candidate(
                """
            class ModelNew(nn.Module):
                def __init__(self, features):
                    super().__init__()

                def forward(self, x):
                    raise RuntimeError("kernel launch failed on purpose")
            """
            ),
            FailureKind.RUNTIME_ERROR,
            "on purpose",
        ),
        (
            candidate(
                """
            import os

            class ModelNew(nn.Module):
                def __init__(self, features):
                    super().__init__()

                def forward(self, x):
                    os._exit(3)
            """
            ),
            FailureKind.RUNTIME_ERROR,
            "code 3",
        ),
    ],
    ids=["import_error", "no_modelnew", "syntax_error", "raises", "os_exit"],
)
def test_broken_candidates(scale_problem, source, kind, words):
    result = evaluate(scale_problem, source, FAST)
    assert not result.correct
    assert result.failure_kind is kind, result.failure_message
    assert words in result.failure_message


def test_input_mutation_cannot_fool_the_reference(scale_problem):
    mutating = candidate(
        """
        class ModelNew(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(features, features))

            def forward(self, x):
                out = torch.relu(x @ self.weight) * 2
                x.zero_()
                return out
        """
    )
    result = evaluate(scale_problem, mutating, FAST)
    assert result.correct  # the reference ran on its own copy of the inputs
    assert any(f.name == "mutates_inputs" for f in result.findings)


def test_cached_output_is_caught(scale_problem):
    caching = candidate(
        """
        class ModelNew(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(features, features))
                self.cache = {}

            def forward(self, x):
                key = tuple(x.shape)
                if key not in self.cache:
                    self.cache[key] = torch.relu(x @ self.weight) * 2
                return self.cache[key]
        """
    )
    result = evaluate(scale_problem, caching, FAST)
    assert not result.correct
    assert result.failure_kind is FailureKind.WRONG_VALUES
    assert any(f.name == "constant_output" for f in result.findings)


def test_returned_input_is_flagged():
    from autoprofiler.problem import problem_from_source

    identity = problem_from_source(
        HEADER + "class Model(nn.Module):\n    def forward(self, x):\n        return x.clone()\n"
        "def get_inputs():\n    return [torch.randn(4, 4)]\n"
        "def get_init_inputs():\n    return []\n",
        "identity",
        "<test>",
    )
    lazy = candidate("class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")
    result = evaluate(identity, lazy, FAST)
    assert any(f.name == "returns_input" for f in result.findings)


def test_reference_renamed_is_correct_and_timed(scale_problem):
    result = evaluate(scale_problem, reference_as_candidate(scale_problem), FAST)
    assert result.correct
    assert result.reference.median_ms > 0 and result.candidate.median_ms > 0


def test_store_caches_results(scale_problem, tmp_path):
    with Store(tmp_path / "s.sqlite") as store:
        first = evaluate(scale_problem, CORRECT, FAST, store=store)
        second = evaluate(scale_problem, CORRECT, FAST, store=store)
        again = evaluate(scale_problem, CORRECT, FAST, store=store, use_cache=False)
        assert not first.from_cache and second.from_cache and not again.from_cache
        assert second.candidate.median_ms == first.candidate.median_ms
        assert store.count("evaluations") == 1 and store.count("candidates") == 1


@pytest.mark.slow
def test_torch_compile_candidate_on_cpu(scale_problem, tmp_path):
    config = EvalConfig(
        **{**FAST.to_dict(), "time_compile_baseline": True, "compile_timeout_s": 240}
    )
    with Store(tmp_path / "s.sqlite") as store:
        result = evaluate(scale_problem, compiled_candidate(scale_problem), config, store=store)
        assert result.correct, result.failure_message
        assert result.compiled_reference is not None and result.speedup_vs_compile > 0
        assert store.count("baselines") == 2


def test_the_timed_program_never_saw_the_second_shape(tmp_path):
    """torch.compile recompiles a graph for any batch once it has seen two (automatic dynamic
    shapes), which can be slower: the trial at another shape must come after the timing."""
    from autoprofiler.problem import problem_from_source

    problem = problem_from_source(SCALE_PROBLEM_WITH_BATCH, "scale_batched", "<test>")
    log = tmp_path / "batches.txt"
    spy = candidate(
        f"""
        class ModelNew(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(features, features))

            def forward(self, x):
                with open({str(log)!r}, "a") as seen:
                    seen.write(f"{{x.shape[0]}}\\n")
                return torch.relu(x @ self.weight) * 2
        """
    )
    result = evaluate(problem, spy, FAST)
    assert result.correct, result.failure_message
    batches = [int(line) for line in log.read_text().split()]
    first_other = batches.index(8)
    assert batches[first_other:] == [8]  # the other shape once, and nothing timed after it
    assert batches[:first_other].count(16) >= FAST.min_timing_trials


def test_a_stored_reference_timing_is_reused_and_retimed_once_a_run_on_request(
    scale_problem, tmp_path, caplog
):
    from autoprofiler.evaluate.runner import REFERENCES

    again = CORRECT + "# the same kernel, another candidate\n"
    once_more = CORRECT + "# and a third\n"
    with Store(tmp_path / "s.sqlite") as store:
        first = evaluate(scale_problem, CORRECT, FAST, store=store)
        REFERENCES.close()  # a new run: no warm reference process remembers its timing
        reused = evaluate(scale_problem, again, FAST, store=store)
        assert reused.reference.median_ms == first.reference.median_ms
        REFERENCES.close()
        with caplog.at_level("WARNING", logger="autoprofiler.evaluate.runner"):
            retimed = evaluate(scale_problem, once_more, FAST, store=store, retime_reference=True)
            later = evaluate(
                scale_problem, reference_as_candidate(scale_problem), FAST, store=store,
                retime_reference=True,
            )  # fmt: skip
        drifts = [r for r in caplog.records if "re-timed" in r.getMessage()]
        assert len(drifts) == 1  # once in this run, not for every candidate
        assert retimed.reference.median_ms != first.reference.median_ms
        assert later.reference.median_ms == retimed.reference.median_ms
        assert store.count("baselines") == 1  # the stored timing is replaced, not added to


def test_a_reference_timed_slow_is_timed_again_at_the_first_large_win(
    scale_problem, tmp_path, caplog, monkeypatch
):
    """A stored reference timing ten times too slow (taken on a busy day) would make an
    honest candidate a 10x win; the win has the reference timed again, once a run, and the
    faster timing is kept, stored and used."""
    from autoprofiler.evaluate import runner

    timed = []
    real_time_reference = runner._time_reference

    def counting(*args, **kwargs):
        timed.append(args[1])
        return real_time_reference(*args, **kwargs)

    monkeypatch.setattr(runner, "_time_reference", counting)
    runner.REFERENCES.close()  # no warm process remembers a timing of this problem
    with Store(tmp_path / "s.sqlite") as store:
        first = evaluate(scale_problem, CORRECT, FAST, store=store)
        assert timed == ["eager"]  # the first timing; an honest candidate confirms nothing
        [(key, problem_hash, device, kind, stored)] = store.iter_baselines()
        slow = {**stored, "stats": {k: v * 10 if k.endswith("_ms") else v
                                    for k, v in stored["stats"].items()}}  # fmt: skip
        store.put_baseline(key, problem_hash, device, kind, slow)
        runner.REFERENCES.close()  # a new run: the slow timing comes from the store
        with caplog.at_level("WARNING", logger="autoprofiler.evaluate.runner"):
            again = evaluate(scale_problem, CORRECT + "# again\n", FAST, store=store)
            third = evaluate(scale_problem, CORRECT + "# third\n", FAST, store=store)
        assert timed == ["eager", "eager"]  # once in this run, not for every candidate
        kept = [
            r.getMessage() for r in caplog.records if "the faster one is kept" in r.getMessage()
        ]
        assert len(kept) == 1, kept
        assert again.speedup < runner.CONFIRM_SPEEDUP  # the honest speed, not a 10x win
        assert again.reference.median_ms < slow["stats"]["median_ms"]
        assert third.reference.median_ms == again.reference.median_ms
        assert store.get_baseline(key)["stats"]["median_ms"] == again.reference.median_ms
    assert first.correct and again.correct and third.correct


GIB = 2**30


@pytest.mark.parametrize(
    ("slabs", "failures", "asked", "kind"),
    [
        # Out of memory beside a 60 GiB slab: again beside one of at most 30 GiB, which held.
        ([60 * GIB, 30 * GIB], ["oom", None], [None, 30 * GIB], None),
        # Out of memory beside that one too: once more with no slab.
        ([60 * GIB, 24 * GIB, 0], ["oom", "oom", None], [None, 30 * GIB, 0], None),
        # Out of memory with no slab at all: its own fault, judged once.
        ([0], ["oom"], [None], FailureKind.OUT_OF_MEMORY),
        # Not one output fits in half the slab: the second run has none, and its verdict stands.
        ([8 * GIB, 0], ["oom", "oom"], [None, 4 * GIB], FailureKind.OUT_OF_MEMORY),
        # Out of memory every time: three runs, then the verdict.
        ([60 * GIB, 30 * GIB, 0], ["oom"] * 3, [None, 30 * GIB, 0], FailureKind.OUT_OF_MEMORY),
        ([60 * GIB], ["wrong"], [None], FailureKind.WRONG_VALUES),
        ([60 * GIB], [None], [None], None),
    ],
)
def test_out_of_memory_beside_the_evaluators_slab_is_judged_again_with_less_of_it(
    scale_problem, slabs, failures, asked, kind
):
    from autoprofiler.evaluate.result import EvalResult
    from autoprofiler.evaluate.runner import judge_beside_slab

    named = {"oom": FailureKind.OUT_OF_MEMORY, "wrong": FailureKind.WRONG_VALUES, None: None}
    seen: list[int | None] = []

    def judge(max_slab_bytes: int | None) -> tuple[EvalResult, int]:
        run = len(seen)
        seen.append(max_slab_bytes)
        result = EvalResult(problem_hash="p", candidate_hash="c")
        result.failure_kind = named[failures[run]]
        result.correct = result.failure_kind is None
        result.stages_s = {"timing": 1.0}
        return result, slabs[run]

    result = judge_beside_slab(judge, scale_problem)
    assert result.failure_kind is kind
    assert seen == asked
    assert result.stages_s.get("first_run", 0.0) == len(asked) - 1  # earlier runs' seconds


def test_as_many_outputs_as_fit_go_in_the_slab_the_rest_on_the_host() -> None:
    from autoprofiler.evaluate.layout import layout_of
    from autoprofiler.evaluate.reference import slots_that_fit

    def output(gib: float) -> list[dict]:
        return layout_of([{"dtype": "float32", "shape": [int(gib * GIB) // 4]}])

    eight = output(8)
    wanted = {f"correctness-{i}": eight for i in range(5)}
    wanted |= {f"timed#{k}": eight for k in range(4)} | {"other_shape": output(2)}
    # Ten slots, the second shape's of 2 GiB, with 122 GiB free: the whole slab (74 GiB) is
    # over 60 % of the free memory; all but its last slot fit.
    held = slots_that_fit(wanted, 122 * GIB, 8 * GIB)
    assert list(held) == list(wanted)[:-1]
    assert slots_that_fit(wanted, 200 * GIB, 8 * GIB) == wanted  # all of it fits
    assert list(slots_that_fit(wanted, 122 * GIB, 8 * GIB, max_bytes=20 * GIB)) == [
        "correctness-0",
        "correctness-1",
    ]
    assert slots_that_fit(wanted, 122 * GIB, 8 * GIB, max_bytes=GIB) == {}
    assert slots_that_fit(wanted, 30 * GIB, 8 * GIB) == {}  # the candidate's headroom first
    # KernelBench's 6 GiB-output L1 problems on an 80 GB GPU (about 76 GiB free): 7 of 10.
    six = {name: output(6) for name in list(wanted)[:-1]} | {"other_shape": output(6)}
    assert len(slots_that_fit(six, 76 * GIB, 6 * GIB)) == 7


def test_outputs_a_partial_slab_leaves_out_need_room_on_the_host_for_themselves_only(
    monkeypatch, tmp_path
):
    from autoprofiler.evaluate import runner

    monkeypatch.setattr(runner, "SHARED_MEMORY", str(tmp_path / "no-shm"))
    monkeypatch.setattr(runner, "_free_bytes", lambda folder: 20 * GIB)  # the work folder's
    config = EvalConfig(device="cuda")
    everything = runner.host_output_bytes(config, 8 * GIB)
    assert everything == (5 + 1) * 8 * GIB + 4 * 8 * GIB
    with pytest.raises(runner.NoRoomForOutputs, match=r"\(80\.0 GiB\)"):
        runner._output_root(config, tmp_path, everything)
    assert runner._output_root(config, tmp_path, 8 * GIB) == tmp_path  # the one left out
    assert runner._output_root(config, tmp_path, 0) == tmp_path  # a slab holds them all


def test_with_the_slab_off_no_slab_is_asked_of_the_reference_process(monkeypatch):
    from autoprofiler.evaluate import runner
    from autoprofiler.evaluate.runner import _offer_slab

    monkeypatch.setattr(runner, "on_gpu", lambda config: True)  # as on a GPU machine

    class NoSlabs:
        def offer_slab(self, *args):
            raise AssertionError("a slab was asked for")

    assert _offer_slab(EvalConfig(device="cuda", output_slab=False), NoSlabs(), 2**20) is None
    with pytest.raises(AssertionError, match="asked for"):
        _offer_slab(EvalConfig(device="cuda"), NoSlabs(), 2**20)


def test_outputs_with_no_room_on_the_host_fail_in_one_line_before_the_candidate_runs(
    scale_problem, monkeypatch, tmp_path
):
    from autoprofiler.evaluate import runner

    monkeypatch.setattr(runner, "_free_bytes", lambda folder: 2**20)  # 1 MiB free anywhere
    result = evaluate(scale_problem, CORRECT, FAST, work_root=tmp_path)
    assert result.failure_kind is FailureKind.OUT_OF_MEMORY
    assert "no room to cross on the host" in result.failure_message
    assert "\n" not in result.failure_message
    assert not list(tmp_path.rglob("worker.log"))  # the candidate never started


def test_outputs_left_by_a_killed_judge_are_swept_and_a_live_ones_kept(tmp_path):
    import os
    import subprocess
    import sys

    from autoprofiler.evaluate.runner import OUTPUTS_PREFIX, sweep_abandoned_outputs

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    abandoned = tmp_path / f"{OUTPUTS_PREFIX}{gone}-1"
    live = tmp_path / f"{OUTPUTS_PREFIX}{os.getpid()}-2"
    other = tmp_path / "someone-elses-folder"
    for folder in (abandoned, live, other):
        folder.mkdir()
        (folder / "correctness-0.pt").write_bytes(b"0" * 1024)
    sweep_abandoned_outputs(tmp_path)
    assert not abandoned.exists()
    assert live.exists() and other.exists()


def test_candidates_keep_the_bytecode_they_compile_in_a_folder_all_runs_share(
    scale_problem, monkeypatch, tmp_path
):
    """Where writing bytecode is off (``PYTHONDONTWRITEBYTECODE``, as on the machines here),
    a candidate's process still keeps what it compiled, in the evaluator's folder, without a
    finding: the next process loads it instead of compiling the module again."""
    import sys

    from autoprofiler.evaluate import runner

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    env, roots = runner.worker_env(tmp_path / "work", FAST)
    prefix = Path(env["PYTHONPYCACHEPREFIX"])
    assert "PYTHONDONTWRITEBYTECODE" not in env and str(prefix) in roots
    assert runner.worker_env(tmp_path / "other", FAST)[0]["PYTHONPYCACHEPREFIX"] == str(prefix)
    sandboxed = EvalConfig(**{**FAST.to_dict(), "sandbox": "bwrap"})  # a folder of its own
    assert runner.worker_env(tmp_path / "box", sandboxed)[0]["PYTHONPYCACHEPREFIX"] != str(prefix)

    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "scale_factor.py").write_text("FACTOR = 2\n")
    source = CORRECT.replace(
        "import torch\n", f"import sys\nsys.path.insert(0, {str(modules)!r})\nimport torch\n", 1
    ).replace("min=0) * 2", "min=0) * __import__('scale_factor').FACTOR")
    result = evaluate(scale_problem, source, FAST, work_root=tmp_path / "runs")
    assert result.correct, result.failure_message
    assert not [f for f in result.findings if f.name == "writes_outside_workdir"]
    kept = (
        prefix
        / modules.relative_to(modules.anchor)
        / f"scale_factor.{sys.implementation.cache_tag}.pyc"
    )
    assert kept.is_file()
    assert not (modules / "__pycache__").exists()  # nothing written beside the source

    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "callers"))  # the caller's own
    assert runner.worker_env(tmp_path / "work", FAST)[0]["PYTHONPYCACHEPREFIX"] == str(
        tmp_path / "callers"
    )
