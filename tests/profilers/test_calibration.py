"""``calibrate``: checked cases timed as profile times ops, saved per group, resumable."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from infer_opt.cost_models import op_model
from infer_opt.errors import InvalidInput
from infer_opt.profilers import calibration as cal
from infer_opt.profilers import calibration_cases, op_families, op_recorder
from infer_opt.results.calibration import STATES, CalibrationResult, HostCalibration
from tests.profilers.synthetic_calibration import local_calibration, synthetic_calibration


@pytest.fixture(scope="module")
def small_run() -> CalibrationResult:
    """The tiny grid's views and norms groups and the host term."""
    saved: list[CalibrationResult] = []
    result = cal.calibrate(
        "cpu", torch.float32, grid="tiny", only=["views", "norms", "host"], reps=3, on_group=saved.append
    )
    assert [r.groups_done for r in saved][:2] == [("norms",), ("norms", "views")]
    return result


def test_every_case_of_every_grid_passes_its_check_in_the_tiny_grid():
    for group in calibration_cases.groups("tiny", "cpu"):
        passed, skipped = cal.checked_inputs(group.cases, torch.float32)
        assert not skipped, skipped
        assert len(passed) == len(group.cases)


def test_the_large_matmuls_lie_between_the_dense_cap_and_the_large_one_and_are_timed_hot():
    spec = calibration_cases.grid_spec("standard", "cpu")
    shapes = calibration_cases.large_linear_shapes(spec)
    assert shapes and len(set(shapes)) == len(shapes)
    assert all(spec["linear_flops"] < 2.0 * m * n * k <= spec["large_flops"] for m, n, k in shapes)
    assert (256, 4096, 4096) in shapes and (2048, 4096, 4096) not in shapes
    linear = {c.label: c for c in calibration_cases.groups("standard", "cpu", ["linear"])[0].cases}
    for m, n, k in shapes:
        assert linear[f"linear M={m} N={n} K={k}"].states == ("hot",)
    assert calibration_cases.large_linear_shapes(calibration_cases.grid_spec("tiny", "cpu")) == []


def test_grouped_query_decode_cases_share_each_key_value_head_among_group_query_heads():
    cases = [c for c in calibration_cases.groups("tiny", "cpu", ["sdpa"])[0].cases if " g=" in c.label]
    assert cases
    x = cases[0].inputs(torch.Generator().manual_seed(0), torch.float32)
    assert x["q"].shape[1] == 2 * x["k"].shape[1] and x["q"].shape[2] == 1
    passed, skipped = cal.checked_inputs(cases, torch.float32)
    assert not skipped and len(passed) == len(cases)


@pytest.mark.parametrize("lanes", [8, 16])
def test_prefill_attention_is_measured_on_and_off_the_vector_width_on_a_cpu_only(monkeypatch, lanes):
    """Every (B·H, T, d) of the prefill attention grid again at T + lanes/2 on a CPU — the
    ``.tail`` families, recorded as such —; on a GPU the grid's lengths only."""
    monkeypatch.setattr(calibration_cases, "cpu_vector_lanes", lambda: lanes)
    monkeypatch.setattr(op_families, "cpu_vector_lanes", lambda: lanes)
    spec = calibration_cases.grid_spec("tiny", "cpu")
    assert (
        spec["sdpa_tail"] == lanes // 2 and calibration_cases.grid_spec("standard", "cuda")["sdpa_tail"] == 0
    )
    prefill = [
        c for c in calibration_cases.sdpa_cases(spec) if c.label.startswith(("sdpa.causal", "sdpa.full"))
    ]
    lengths = {int(c.label.split("Tq=")[1].split()[0]) for c in prefill}
    assert lengths == {t + r for t in spec["sdpa_t"] for r in (0, lanes // 2)}
    gpu = [
        c for c in calibration_cases.sdpa_cases({**spec, "sdpa_tail": 0}) if c.label.startswith("sdpa.causal")
    ]
    assert {int(c.label.split("Tq=")[1].split()[0]) for c in gpu} == set(spec["sdpa_t"])
    for case in prefill:
        x = case.inputs(torch.Generator().manual_seed(0), torch.float32)
        recorder = op_families.FamilyRecorder()
        op_recorder.record_ops(lambda case=case, x=x: case.run(x), recorder=recorder)
        t = x["q"].shape[-2]
        kind = case.label.split()[0]
        assert recorder.signatures[-1].family == kind + (".tail" if t % lanes else ""), case.label


def test_attention_is_checked_on_its_first_batch_row():
    """A float64 copy of every head of a long cache cost more than timing it: the check covers the
    first batch row (8 heads) — and still catches a kernel that gets that row wrong."""
    case = calibration_cases._sdpa_case("decode", 16, 1, 64, 32)
    x = case.inputs(torch.Generator().manual_seed(0), torch.float32)
    assert x["k"].shape[0] == 2 and case.sample is not None
    assert case.sample(case.run(x)).shape == case.reference(x).shape == (1, 8, 1, 32)
    passed, skipped = cal.checked_inputs([case], torch.float32)
    assert [c for c, _ in passed] == [case] and not skipped
    broken = replace(case, label="broken", run=lambda x: case.run(x) * 1.01)
    passed, skipped = cal.checked_inputs([broken], torch.float32)
    assert not passed and skipped[0].startswith("broken: output differs")


def test_every_family_with_several_features_has_names_for_them():
    assert cal.feature_names("gemm.nt", 3) == ("M", "N", "K")
    assert cal.feature_names("bmm.nn", 4) == ("batch", "M", "N", "K")
    assert cal.feature_names("sdpa.decode.gqa", 4) == ("BH", "Tk", "d", "g")
    for tail in ("sdpa.causal.tail", "sdpa.full.tail"):
        assert cal.feature_names(tail, 3) == ("BH", "T", "d")
    # no x0, x1, … placeholders for the families the suite measures with several features
    for family in ("gemm.nn", "sdpa.causal", "sdpa.masked", "mean.r", "embedding", "layer_norm"):
        assert not any(name.startswith("x") for name in cal.feature_names(family, 4)), family


def test_small_ops_without_a_main_operand_are_measured_in_context_and_nothing_else_is():
    groups = {g.name: g for g in calibration_cases.groups("standard", "cpu")}
    for name, group in groups.items():
        for case in group.cases:
            small = (
                name in calibration_cases.CONTEXT_GROUPS and case.reads <= calibration_cases.CONTEXT_MAX_BYTES
            )
            main = "warm" in case.states or "cold" in case.states
            embedding = case.label.startswith("embedding")  # few rows of a table: context too
            assert ("context" in case.states) == (small and (embedding or not main)), case.label
            # and the smallest of them, without a main operand, after a flush of the LLC too
            tiny = small and case.reads <= calibration_cases.FAR_MAX_BYTES
            assert ("far" in case.states) == (tiny and not main), case.label
    assert any("context" in c.states for c in groups["elementwise"].cases)
    assert any("far" in c.states for g in calibration_cases.CONTEXT_GROUPS for c in groups[g].cases)
    assert not any("context" in c.states for c in groups["elementwise"].cases if c.input_bytes > 2**19)


def _fake_case(label: str, nbytes: int, log: list[str]) -> calibration_cases.Case:
    return calibration_cases.Case(
        "linear", label, lambda g, d: {}, lambda x: log.append(label), lambda x: None, nbytes
    )


def test_a_warm_case_runs_a_small_case_of_its_kind_between_the_scrub_and_its_timed_call():
    log: list[str] = []
    big, other, small = (_fake_case(f"linear {n}", n, log) for n in (2**22, 2**21, 2**12))
    lone = _fake_case("sdpa.decode 1", 2**10, log)
    items = [_recorded(c) for c in (big, other, small, lone)]
    warmers = cal._warmers(items, cal.WARMER_MAX_BYTES)
    # the smallest other case of the same kind, within the limit; none for a kind alone
    assert [w.case.label if w else None for w in warmers] == ["linear 4096", "linear 4096", None, None]
    scrubs = cal._Scrubs(*(_logged(word, log) for word in ("scrub", "flush", "read")))
    log.clear()  # recording ran each once
    assert warmers[0] is not None
    for part in cal._case_parts(items[0].part, "warm", scrubs, warmers[0].part):
        part.run()
    assert log == ["linear 4194304", "scrub", "linear 4096", "linear 4194304"]
    log.clear()
    for part in cal._case_parts(items[2].part, "context", scrubs):
        part.run()
    assert log == ["linear 4096", "read", "linear 4096"]
    # far: the flush of the LLC, then the case's inputs read by another op, then the case
    scrubs = cal._Scrubs(*(_logged(word, log) for word in ("scrub", "flush", "read", "far")))
    toucher = _logged("touch", log)
    log.clear()
    for part in cal._case_parts(items[2].part, "far", scrubs, toucher):
        part.run()
    assert log == ["linear 4096", "far", "touch", "linear 4096"]
    assert [scrubs.measures(s) for s in STATES] == [True] * 5
    gpu = cal._Scrubs(None, scrubs.llc)
    assert [gpu.measures(s) for s in STATES] == [True, False, True, False, False]
    # the warmer shares the most leading words of the label (a BLAS picks its kernel by M)
    same_m, tinier = _fake_case("linear M=4 N=64", 2**14, log), _fake_case("linear M=1 N=64", 2**10, log)
    timed = _fake_case("linear M=4 N=512", 2**20, log)
    picked = cal._warmers([_recorded(c) for c in (timed, tinier, same_m)], cal.WARMER_MAX_BYTES)[0]
    assert picked is not None and picked.case is same_m


def _recorded(case: calibration_cases.Case) -> cal._Recorded:
    return cal._Recorded(case, {}, cal._Part(lambda: case.run({}), ()), ())


def _logged(word: str, log: list[str]) -> cal._Part:
    return cal._Part.recorded(lambda: log.append(word))


def test_a_case_whose_output_is_wrong_is_not_timed():
    good = calibration_cases.groups("tiny", "cpu", ["views"])[0].cases[0]
    wrong = calibration_cases.Case("views", "wrong", good.inputs, good.run, lambda x: good.reference(x) + 1.0)
    passed, skipped = cal.checked_inputs([good, wrong], torch.float32)
    assert [c.label for c, _ in passed] == [good.label]
    assert skipped and skipped[0].startswith("wrong: output differs from the float64 reference")


def _sysfs_cache(root, index, level, kind, size):
    folder = root / f"index{index}"
    folder.mkdir()
    for name, text in (("level", str(level)), ("type", kind), ("size", size)):
        (folder / name).write_text(text + "\n")


def test_cache_sizes_come_from_sysfs_and_the_l1s_add_data_and_instructions(tmp_path, monkeypatch):
    from infer_opt.profilers import device as devices

    monkeypatch.setattr(devices, "CACHE_SYSFS", tmp_path)
    assert cal.code_cache_bytes() == 2**16 and cal.cache_level_bytes(2) is None  # unknown
    for i, (level, kind, size) in enumerate(
        ((1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"), (3, "Unified", "260M"))
    ):
        _sysfs_cache(tmp_path, i, level, kind, size)
    assert cal.code_cache_bytes() == 80 * 2**10
    assert cal.cache_level_bytes(1) == 48 * 2**10  # data, not instructions
    assert cal.cache_level_bytes(2) == 2 * 2**20 and cal.warm_reuse_bytes() == 4 * 2**20
    (tmp_path / "index0" / "level").write_text("one\n")  # unreadable: unknown, not a crash
    assert cal.code_cache_bytes() == 2**16


def test_a_run_measures_the_calls_each_case_makes(small_run):
    families = small_run.family_map()
    assert "layer_norm@hot" in families and "softmax@hot" in families
    assert "view.transpose@hot" in families
    assert {"pow.s@hot", "mean.r@hot", "rsqrt.s@hot"} <= set(families)  # rms_norm's parts
    assert not any(key.endswith(("@warm", "@cold")) for key in families)  # no main operands here
    # small ops are measured in context too (after a read of several L2s), and slower there
    assert {"layer_norm@context", "view.transpose@context", "mean.r@context"} <= set(families)
    assert small_run.context_reuse_bytes == cal.context_reuse_bytes() >= 2 * small_run.warm_reuse_bytes
    assert 0 < small_run.context_near_bytes == cal.code_cache_bytes() < small_run.warm_reuse_bytes
    # ... and the smallest after a flush of the last-level cache (at most 64 MiB)
    assert {"layer_norm@far", "view.transpose@far", "mean.r@far"} <= set(families)
    assert small_run.far_reuse_bytes == cal.far_reuse_bytes() <= cal.FAR_MAX_READ_BYTES
    ln = families["layer_norm@hot"]
    assert ln.feature_names == ("rows", "hidden")
    assert {p.features for p in ln.points} == {(1.0, 64.0), (1.0, 256.0), (16.0, 64.0), (16.0, 256.0)}
    assert all(p.time_s > 0 for f in small_run.families for p in f.points)
    assert small_run.threads == torch.get_num_threads()
    assert small_run.groups_done == ("norms", "views", "host")
    assert not small_run.complete  # the other groups were not measured


def test_host_term_is_measured(small_run):
    host = small_run.host
    assert host is not None
    assert host.chain_ops > 100 and host.chain_module_calls == 8 * 7 + 1
    # the chains are timed on a shared machine: the values are checked for sense, not size
    assert math.isfinite(host.per_op_s) and host.per_op_s >= 0
    assert math.isfinite(host.per_module_call_s) and host.per_module_call_s >= 0
    assert host.raw_wall_s > 0 and host.module_wall_s > 0 and host.raw_op_time_s > 0


def test_resume_skips_finished_groups(monkeypatch, small_run):
    measured: list[str] = []

    def fake(group, dtype, **_kw):
        measured.append(group.name)
        return [], []

    monkeypatch.setattr(cal, "measure_group", fake)
    cal.calibrate("cpu", torch.float32, grid="tiny", only=["views", "memory"], resume_from=small_run)
    assert measured == ["memory"]


def _spread(result: CalibrationResult, spread: float) -> CalibrationResult:
    families = [
        replace(f, points=tuple(replace(p, rel_spread=spread) for p in f.points)) for f in result.families
    ]
    return replace(result, families=tuple(families))


@pytest.mark.parametrize("spread, said", [(0.0, 0), (0.3, 1)])
def test_how_noisy_the_calibration_was_is_said_once_as_it_ends(monkeypatch, spread, said):
    """A run that continues another says it afresh: the earlier run's notice is dropped, and
    said again only when the whole calibration is still noisy."""
    monkeypatch.setattr(cal, "measure_group", lambda group, dtype, **_kw: ([], []))
    earlier = _spread(synthetic_calibration(families=True), spread)
    earlier = replace(earlier, warnings=(*earlier.warnings, *op_model.noise_notices(_spread(earlier, 0.5))))
    result = cal.calibrate("cpu", torch.float32, grid="tiny", only=["views"], resume_from=earlier)
    noisy = [w for w in result.warnings if w.code == "calibration_noisy"]
    assert len(noisy) == said
    assert all(w["spread"] == pytest.approx(spread) for w in noisy)


def test_merge_keeps_one_point_per_shape_with_the_median_time():
    sample = cal._Sample("add.t", "hot", (64,), 1e-6, 0.0, 64.0, 768.0)
    families = cal.merge_families([], [sample, sample.__class__(**{**sample.__dict__, "time_s": 3e-6})])
    assert len(families) == 1 and len(families[0].points) == 1
    assert families[0].points[0].time_s == pytest.approx(2e-6)
    again = cal.merge_families(families, [cal._Sample("add.t", "hot", (256,), 4e-6, 0.0, 256.0, 3072.0)])
    assert len(again[0].points) == 2


def test_save_and_load_round_trip(tmp_path):
    result = synthetic_calibration(families=True)
    path = cal.save_calibration(result, tmp_path / "cal.json")
    assert cal.load_calibration(path) == result


def test_unusable_files_are_one_line_errors(tmp_path):
    missing = tmp_path / "none.json"
    with pytest.raises(InvalidInput, match="does not exist"):
        cal.load_calibration(missing)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidInput, match="calibration: not valid JSON"):
        cal.load_calibration(bad)
    empty = CalibrationResult(
        device="cpu",
        device_name="x",
        device_key="k",
        dtype="float32",
        threads=1,
        warm_reuse_bytes=1,
        cold_reuse_bytes=2,
        groups_done=("views",),
    )
    cal.save_calibration(empty, tmp_path / "partial.json")  # an early save of a run: kept
    with pytest.raises(InvalidInput, match="unusable calibration: it holds no measured families"):
        cal.load_calibration(tmp_path / "partial.json")
    broken = synthetic_calibration(families=True)
    family = broken.families[0]
    point = family.points[0].__class__(**{**family.points[0].__dict__, "time_s": float("nan")})
    nan = replace(broken, families=(family.__class__(**{**family.__dict__, "points": (point,)}),))
    with pytest.raises(InvalidInput, match=r"not saved: family gemm\.nt@warm has a time"):
        cal.save_calibration(nan, tmp_path / "nan.json")


def test_a_corrupt_cache_file_is_reported_moved_aside_and_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("INFER_OPT_CACHE", str(tmp_path))
    path = cal.cache_path("cpu", torch.float32)
    path.parent.mkdir(parents=True)
    path.write_text("garbage")
    lookup = cal.load_cached("cpu", torch.float32)
    assert lookup.result is None and [n.code for n in lookup.notices] == ["calibration_cache_corrupt"]
    assert path.with_name(path.name + ".corrupt").exists() and not path.exists()
    with pytest.raises(InvalidInput, match="run infer-opt calibrate"):
        cal.resolve_calibration("cpu", torch.float32)
    stored = cal.cache_calibration(local_calibration())
    assert stored.saved and stored.path == path
    found, source, notices = cal.resolve_calibration("cpu", torch.float32)
    assert found.grid == "synthetic" and source == str(path) and notices == ()


def test_a_cached_calibration_of_another_machine_or_thread_count_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("INFER_OPT_CACHE", str(tmp_path))
    other = replace(local_calibration(), threads=local_calibration().threads + 1)
    path = cal.cache_path("cpu", torch.float32)
    path.parent.mkdir(parents=True)
    cal.save_calibration(other, path)  # under this run's key, but measured with other threads
    lookup = cal.load_cached("cpu", torch.float32)
    assert lookup.result is None
    assert {"calibration_cache_rejected", "fit_mismatch"} <= {n.code for n in lookup.notices}


def test_a_partial_run_is_cached_for_resume_but_not_used():
    partial = replace(local_calibration(), families=(), roofline=None, complete=False)
    stored = cal.cache_calibration(partial)
    assert stored.saved
    assert cal.load_cached("cpu", torch.float32).result is None
    assert cal.load_calibration(stored.path, to_use=False) == partial


def test_the_key_names_device_threads_dtype_and_timing():
    key = cal.calibration_key("cpu", torch.float32)
    assert key.startswith("cpu-") and f"-{torch.get_num_threads()}t-float32" in key
    assert key.endswith("-op-profiler")


def test_a_repetitions_calls_composed_from_its_recorded_parts_are_the_calls_it_makes():
    """Each case and scrub is recorded once; the calls a state's repetition is matched against
    are composed from those records, and must be what recording the whole repetition gives."""
    scrubs = cal._Scrubs(*(cal._Part.recorded(cal.reader(n)) for n in (2**16, 2**17, 2**16, 2**17)))
    for name in ("linear", "sdpa", "elementwise", "memory"):
        cases = calibration_cases.groups("tiny", "cpu", [name])[0].cases[:12]
        passed, _ = cal.checked_inputs(cases, torch.float32)
        items = [cal._record(case, inputs) for case, inputs in passed]
        for state in STATES:
            chosen = [item for item in items if state in item.case.states]
            if not chosen:
                continue
            program, calls, kept = cal._timed_program(chosen, state, scrubs)
            actual = op_recorder.record_ops(program)
            assert [(c.name, c.match_shapes) for c in calls] == [(c.name, c.match_shapes) for c in actual]
            assert kept and all(calls[i].name for i, _ in kept)


def test_the_far_state_reads_the_llc_flush_capped_and_the_cases_inputs_by_another_op(monkeypatch):
    from infer_opt.profilers import device as devices

    monkeypatch.setattr(devices, "flush_buffer_bytes", lambda device: 2**31)
    assert cal.far_reuse_bytes() == cal.FAR_MAX_READ_BYTES == 64 * 2**20
    monkeypatch.setattr(devices, "flush_buffer_bytes", lambda device: 2**24)
    assert cal.far_reuse_bytes() == 2**24
    inputs = {"x": torch.ones(3, 4), "index": torch.tensor([1, 2]), "dim": 1, "empty": torch.ones(0)}
    calls = op_recorder.record_ops(cal._toucher(inputs))
    assert [c.name for c in calls] == ["aten::sum", "aten::sum"]
    assert [c.shapes[0] for c in calls] == [(3, 4), (2,)]


def test_a_short_case_whose_main_operand_persists_is_timed_at_its_steady_state():
    log: list[str] = []
    case = _recorded(_fake_case("linear 1", 2**20, log))
    scrubs = cal._Scrubs(*(_logged(word, log) for word in ("scrub", "flush", "read")))
    warmer = _logged("warmer", log)
    log.clear()
    for part in cal._case_parts(case.part, "hot", scrubs, runs=cal.STEADY_RUNS):
        part.run()
    assert log == ["linear 1"] * 4
    log.clear()
    for part in cal._case_parts(case.part, "warm", scrubs, warmer, runs=cal.STEADY_RUNS):
        part.run()
    assert log == ["linear 1", "scrub", "warmer"] * 3 + ["linear 1"]
    log.clear()
    for part in cal._case_parts(case.part, "context", scrubs, runs=cal.STEADY_RUNS):
        part.run()
    assert log == ["linear 1", "read", "linear 1"]  # a small op runs after its producer, once


def test_only_short_cases_whose_main_operand_persists_run_to_their_steady_state():
    groups = {
        g.name: g for g in calibration_cases.groups("standard", "cpu", ["linear", "sdpa", "norms", "memory"])
    }

    def steady(group: str, prefix: str, flops: float = 1e6) -> list[bool]:
        cases = [c for c in groups[group].cases if c.label.startswith(prefix)][:3]
        assert cases, prefix
        calls = (replace(_CALL, flops=int(flops)),)
        return [cal._steady(cal._Recorded(c, {}, cal._Part(lambda: None, calls), ())) for c in cases]

    assert all(steady("linear", "linear M=1 ")) and all(steady("sdpa", "sdpa.decode"))
    assert all(steady("memory", "embedding"))
    assert not any(steady("linear", "linear M=1 ", flops=2 * cal.STEADY_MAX_FLOPS))  # long calls
    assert not any(steady("sdpa", "sdpa.causal")) and not any(steady("norms", "layer_norm"))


_CALL = op_recorder.OpCall(0, "aten::mm", ((1, 1),), "float32", 0, "torch", 0, "", "", "matmul")


def test_the_host_term_is_the_median_of_interleaved_rounds(monkeypatch):
    """Each round's host time is its own wall minus its own op sum: one round of each chain timed
    in a slow spell (wall 3× the others) changes neither figure."""

    def host(slow: bool) -> HostCalibration:
        walls = iter(([3.0e-3, 3.0e-3] if slow else []) + [1.0e-3] * (2 * cal.HOST_ROUNDS))
        # the module chain's ops take less than the plain chain's: it has host time of its own
        ops = {True: 0.5e-3, False: 0.2e-3}
        monkeypatch.setattr(
            cal._Chain, "round", lambda self, reps, device: (next(walls), ops[self.modules == 0])
        )
        return cal.calibrate_host(torch.float32)

    steady, spell = host(False), host(True)
    assert spell.per_op_s == steady.per_op_s == pytest.approx(0.5e-3 / steady.chain_ops)
    assert spell.per_module_call_s == pytest.approx(steady.per_module_call_s) and steady.per_module_call_s > 0
    assert spell.raw_wall_s == pytest.approx(1.0e-3)


@pytest.mark.parametrize("kind", ["masked", "causal"])
def test_attention_masks_live_on_the_device_of_the_inputs(monkeypatch, kind):
    """Found on a lent H200: the masked cases built their mask on the CPU beside CUDA inputs, so
    84 shapes failed ("mask on cpu and self on cuda:0"). Inputs on another device (meta, here)
    must get their masks (case and reference) there too."""

    def on_meta(g, dtype, *shape):
        return torch.empty(*shape, dtype=dtype, device="meta")

    monkeypatch.setattr(calibration_cases, "_randn", on_meta)
    seen = []
    monkeypatch.setattr(calibration_cases, "_attention_reference", lambda q, k, v, m: seen.append(m))
    case = calibration_cases._sdpa_case(kind, 8, 4, 16, 32)
    x = case.inputs(torch.Generator().manual_seed(0), torch.float32)
    if kind == "masked":
        assert x["mask"].device.type == "meta"
    case.reference(x)
    assert seen[0].device.type == "meta"


def test_a_cuda_calibration_is_cached_and_found_under_one_key_whatever_the_cpu_threads():
    """Found on a lent H200: the calibration recorded torch's 16 CPU threads, so it was cached as
    ``…-16t-…`` while validate looked it up without threads (CUDA keys have none) and found
    nothing. The key of a CUDA result has no thread count."""
    from infer_opt.run_key import RunKey

    result = replace(local_calibration(), device="cuda:0", device_name="NVIDIA H200", threads=16)
    assert RunKey.of(result).threads is None
    assert "16t" not in RunKey.of(result).slug()
    cpu = replace(local_calibration(), threads=3)
    assert RunKey.of(cpu).threads == 3
