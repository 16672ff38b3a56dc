"""Words for :class:`~infer_opt.notices.Notice` codes: the one place a warning or a
verdict reason is phrased (the core only says which code and which values).

Each entry maps a code to a function of the notice's values returning one sentence that
says what happened and, for a warning, the fix. Group entries by the part of the package
that emits them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from infer_opt.notices import Notice
from infer_opt.units import format_bytes, format_duration

Words = Callable[[Mapping[str, Any]], str]


def _pct(value: float) -> str:
    return f"{100.0 * value:.0f}%"


MESSAGES: dict[str, Words] = {
    # ---- a warning saved as words by an older infer-opt (notices.Notice.from_text)
    "legacy_text": lambda v: str(v["text"]),
    # ---- timing (profilers/timing.py), shared by every measurement
    "high_variance": lambda v: (
        f"high variance (IQR/median {_pct(v['rel_iqr'])}): raise --reps or --warmup, close other programs"
    ),
    "variance_not_settled": lambda v: (
        f"IQR/median {_pct(v['rel_iqr'])} did not settle below {_pct(v['target'])} "
        + (
            f"(time limit {format_duration(v['max_time_s'])})"
            if v.get("max_time_s")
            else f"(at most {v['max_reps']} repetitions)"
        )
        + "; raise --max-time or quiet the machine"
    ),
    "reps_cut_by_time": lambda v: (
        f"stopped after {v['reps']} of {v['wanted']} repetitions "
        f"(time limit {format_duration(v['max_time_s'])})"
    ),
    # ---- amdahl (cost_models/amdahl.py)
    "parts_slower": lambda v: f"speedup below 1 for {', '.join(v['parts'])}: that part gets slower",
    "slower_overall": lambda v: "the change makes the whole slower (end-to-end speedup below 1)",
    "target_above_ceiling": lambda v: (
        f"impossible: target {v['target']:g}x is at or above the ceiling {v['ceiling']:.4g}x "
        "(the part would have to take no time at all)"
    ),
    "part_takes_no_time": lambda v: (
        "the part takes none of the time: the target holds for any speedup"
        if v["target_holds"]
        else "the part takes none of the time, and the target is above what the rest allows"
    ),
    # ---- profile (profilers/model_profile.py)
    "step_unattributed": lambda v: (
        f"{_pct(v['share'])} of the step is not attributed to any operator: "
        + (
            "the GPU sat idle between kernels (host/launch overhead: Python, module calls, kernel "
            "launches); CUDA graphs or torch.compile cut it"
            if v["on_cuda"]
            else "host/framework overhead outside the ops (Python, nn.Module calls, the dispatcher); "
            "torch.compile or a larger --batch/--seq-len amortise it"
        )
    ),
    "ops_exceed_step": lambda v: (
        f"per-op times add up to {_pct(v['coverage'])} of the step: the machine was busier during the "
        "operator pass than during the step timing; raise --reps or quiet the machine"
    ),
    "machine_busy": lambda v: (
        f"the machine is busy (load average {v['load']:.1f} on {v['cpus']} cores): CPU timings are noisy "
        "and intra-op threads stall each other; quiet the machine or use fewer threads (--threads)"
    ),
    "ops_without_flops": lambda v: (
        "ops with no FLOP formula (counted as 0 FLOPs) take real time: " + ", ".join(v["ops"])
    ),
    "calls_not_in_trace": lambda v: (
        f"{v['calls']} recorded op calls were not found in the profiler trace; their time counts as "
        "unattributed"
    ),
    "flops_differ_from_analytic": lambda v: (
        f"counted FLOPs differ from the analytic count by {100 * v['difference']:+.1f}%"
    ),
    "ops_beat_fit": lambda v: (
        f"{v['ops']} large ops run faster than the roofline fit allows (up to {v['efficiency']:.2g}× its "
        f"bound, {v['op']}): the fit looks stale or was measured under load; refit with infer-opt roofline"
    ),
    "fit_for_other_device": lambda v: (
        f"the roofline fit is for {v['fit']} but this run is {v['run']}: bounds and efficiencies may not "
        "apply (run infer-opt roofline on this device, or drop --roofline)"
    ),
    # ---- speculative measure (profilers/speculative_costs.py)
    "verify_cost_not_linear": lambda v: (
        f"c_v(k) is not close to a + b·k here (fit error up to {_pct(v['max_rel_error'])}): "
        "the predictions use the fit; compare with the measured c_v(k)"
    ),
    # ---- speculative run (profilers/speculative_run.py), vLLM's metrics (inputs/prometheus.py)
    "spec_run_tokens_differ": lambda v: (
        f"greedy speculative decoding with k = {v['k']} differs from plain greedy decoding from token "
        f"{v['index']} on: the verification pass and the decode step disagree on an argmax (rounding of "
        "near-tied logits, e.g. in bfloat16); try --dtype float32"
    ),
    "spec_run_nondeterministic": lambda v: (
        f"{v['what']}: the repetitions did not all decode the same tokens (non-deterministic kernels); "
        "the reported tokens and α are the last repetition's"
    ),
    "prometheus_accepted_mismatch": lambda v: (
        f"vllm:spec_decode_num_accepted_tokens_total is {v['accepted']} but the per-position counters sum "
        f"to {v['per_position']} (a scrape taken between two updates?); the rates use the per-position counts"
    ),
    # ---- GPU paths and calibrations (profilers/timing.py, kernels.py, amortize_measure.py,
    #      store.py, profilers/roofline_sweep.py; cost_models/roofline.py's fit checks)
    "graph_capture_failed": lambda v: f"{v['reason']}; t_c is without a graph",
    "high_variance_cases": lambda v: (
        f"high variance (IQR/median > 10%) in {len(v['cases'])} case(s): "
        + ", ".join(v["cases"][:4])
        + (f" and {len(v['cases']) - 4} more" if len(v["cases"]) > 4 else "")
        + "; raise --reps or --warmup, close other programs"
    ),
    "sweep_interrupted": lambda v: f"interrupted: {v['cases']} case(s) finished and are shown/saved",
    "sweep_stopped": lambda v: (
        f"stopped at {v['case']}: {v['reason']}; the device no longer works in this process, so the rows "
        "before it are kept and the rest were not run (start a new process to measure them)"
    ),
    "fit_not_finite": lambda v: (
        f"{_parameter(v['parameter'])} is {_num(v['value'])}, not a finite number > 0: no kernel pins it"
    ),
    "fit_at_search_edge": lambda v: (
        f"{_parameter(v['parameter'])} ended at the edge of its search range: the measurements do not pin "
        "it down"
        + (
            " (no launch-bound kernel, e.g. an interrupted sweep)"
            if v["parameter"] == "t0"
            else " (100× from the best achieved rate) — check them for stalls or mixed regimes"
        )
    ),
    "fit_error_high": lambda v: (
        f"the model misses the median kernel by {_pct(v['median_abs_rel_error'])} (more than "
        f"{_pct(v['threshold'])}): the measurements are noisy or mix regimes; measure on a quiet machine"
    ),
    "fit_too_few_kernels": lambda v: (
        f"only {v['n_fitted']} kernels were fitted (at least {v['minimum']} needed): an interrupted or "
        "partial sweep"
    ),
    "fit_tick_quantized": lambda v: (
        f"{v['kernels']} kernels of very different work all took whole multiples of "
        f"{format_duration(float(v['tick_s']))}: the scheduler's time slice, not the device (a loaded "
        "machine stalls multi-threaded kernels); quiet the machine or use --threads 1"
    ),
    "fit_below_its_kernels": lambda v: (
        f"the fitted {v['parameter']} is {v['fitted']:.3g}/s but its own kernels reached "
        f"{v['achieved']:.3g}/s: "
        "the fit contradicts its data (another process loaded the machine during some of the points); "
        "not cached: measure again on a quiet machine"
    ),
    "machine_speed_moved": lambda v: (
        f"the machine's speed probe (a fixed matmul timed before and after each run) moved by "
        f"{abs(v['ratio'] - 1):.0%} between BASE and NEW (more than {v['limit']:.0%}): another process "
        "loaded the machine on one side, so no change is called; run `infer-opt ab` to alternate the two"
    ),
    "fit_missing_families": lambda v: (
        "the fit lacks the kernels that pin "
        + ", ".join(_FAMILY_PINS.get(f, f) for f in v["families"])
        + ": measure the matmul, elementwise and launch families (an interrupted or partial sweep?)"
    ),
    "fit_mismatch": lambda v: (
        f"the fit's {_FIT_FIELDS.get(v['field'], v['field'])} is {_recorded(v['fit'])}, "
        f"this run's is {_recorded(v['run'])}"
    ),
    "fit_not_keyed": lambda v: (
        "the fit does not record the device, threads and timing it was measured with (an older "
        "infer-opt made it): refit with `infer-opt roofline`"
    ),
    "fit_above_datasheet": lambda v: (
        f"fitted {_parameter(v['parameter'])} is above the datasheet figure given "
        f"({_num(v['fitted'])} > {_num(v['datasheet'])}): give the {v['precision']} figure"
        + (" (TF32 matmuls: the TF32 peak, not plain fp32)" if v["precision"] == "tf32" else "")
    ),
    "calibration_cache_corrupt": lambda v: (
        f"the cached {v['kind']} file {v['path']} is corrupt ({v['reason']})"
        + (f"; moved to {v['moved_to']} and replaced" if v.get("moved_to") else "; it will be replaced")
    ),
    "validate_interrupted": lambda v: (
        f"interrupted: {v['points']} of the {v['of']} grid points measured"
        + (f", in {v['passes']} of {v['asked']} passes" if v["asked"] > 1 else "")
        + "; the comparison is of those"
    ),
    "spec_run_interrupted": lambda v: (
        f"interrupted: {v['rounds']} of the {v['asked']} timing rounds finished; every decoding and "
        "cost is of those rounds"
    ),
    "runs_interrupted": lambda v: (
        f"interrupted: {v['done']} of the {v['asked']} runs finished; the profile is of those runs"
    ),
    "calibration_threads_used": lambda v: (
        f"no calibration is cached for this thread count; the one cached at {v['threads']} thread(s) "
        f"is used, and the step is for {v['threads']} thread(s) (--threads N picks another)"
    ),
    "calibration_cache_concurrent": lambda v: (
        f"another run wrote the cached {v['kind']} {v['path']} while this one ran: its file is kept "
        f"as {v['kept']}, this run's is in the cache"
    ),
    "calibration_cache_not_written": lambda v: (
        f"the {v['kind']} could not be cached at {v['path']} ({v['reason']}); the run goes on "
        "(--out FILE.json keeps it)"
    ),
    "calibration_cache_rejected": lambda v: (
        f"the cached {v['kind']} at {v['path']} is not usable for this run (reasons below); it is "
        "replaced when a good one is saved"
    ),
    "roofline_calibration_rejected": lambda v: (
        f"roofline sweep {v['attempt']}"
        + (f" ({v['threads']} threads)" if v.get("threads") else "")
        + " is unusable (reasons below)"
        + ("; measuring once more" if v["attempt"] == 1 else "; not cached")
    ),
    "roofline_saved_for_other_threads": lambda v: (
        f"a good {v['threads']}-thread fit was measured and cached at {v['path']}; it serves runs with "
        f"--threads {v['threads']}"
    ),
    "roofline_unavailable": lambda v: (
        "no usable roofline fit for this run: operators are shown without bound, efficiency and "
        "at-bound speedups. "
        + (
            "The machine is loaded: rerun with --threads 1, or quiet it and run `infer-opt roofline`"
            if v.get("loaded")
            else "Run `infer-opt roofline` on a quiet machine (or give one with --roofline)"
        )
    ),
    "roofline_not_saved": lambda v: f"the roofline fit was not cached ({v['reason']})",
    # ---- house: calculators' and checks' views (cost_models/bucketing.py, speculative.py;
    #      checks/speculative_sampler.py)
    "lengths_unbucketed": lambda v: (
        f"{v['count']} of {v['total']} lengths exceed the largest bound {v['largest_bound']} "
        f"(max {v['max_length']}); they are left out of every expectation and count above"
    ),
    "verify_cost_assumed": lambda v: (
        "verification cost assumed equal to one target step (c_v = c_t); give --verify-cost or "
        "--verify-cost-model for your engine"
    ),
    "naive_ranking_differs": lambda v: (
        "the mean of per-round time/tokens ranks the plans differently"
        + (f" (it would pick {v['naive_best']})" if v["naive_best"] != v["best"] else "")
        + "; it over-weights rounds that commit few tokens. The long-run cost is Σ time / Σ tokens."
    ),
    "short_drafts": lambda v: (
        f"draft tokens ({v['draft_tokens']}) < drafts × k ({v['drafts'] * v['k']}): some rounds "
        "drafted fewer than k tokens, so the later positions' rates are biased low"
    ),
    "bucket_not_compiled": lambda v: f"not compiled: {v['error']}",
    "wrong_rule_missed_by_sampling": lambda v: (
        f"the Monte-Carlo ({v['trials']:,} rounds) did not detect the wrong rule (exact enumeration did): "
        "raise --trials"
    ),
    # ---- communication and tensor parallelism (profilers/comm.py, profilers/profile_tp.py)
    "comm_single_rank": lambda v: (
        f"a collective needs at least two ranks (devices): this run has one ({v['device']}), so only "
        "the local copy was measured; run it with --nproc 2 or under torchrun --nproc-per-node 2"
    ),
    "comm_partial": lambda v: (
        f"the sweep stopped early: {v['measured']} of {v['planned']} message sizes measured "
        "(kept as they were when it stopped)"
    ),
    "comm_high_variance": lambda v: (
        f"{v['sizes']} message size(s) vary by more than 10% (IQR/median up to {_pct(v['worst_rel_iqr'])}): "
        "raise --reps, quiet the machine, or give each rank its own cores"
    ),
    "comm_fit_one_side": lambda v: (
        f"every size is below the crossover S* = {format_bytes(v['crossover'])} "
        f"(largest {format_bytes(v['largest'])}): the bandwidth β is extrapolated, not measured: "
        "raise --max-size past S*"
        if v["parameter"] == "beta"
        else f"every size is above the crossover S* = {format_bytes(v['crossover'])} "
        f"(smallest {format_bytes(v['smallest'])}): the latency α is extrapolated, not measured: "
        "lower --min-size below S*"
    ),
    "comm_fit_unpinned": lambda v: (
        f"the sizes do not pin the fit's {' and '.join(v['parameters'])} (it ended at the edge of "
        "its range): widen --min-size/--max-size around the crossover"
    ),
    # ---- compare, ab, noise floors (cost_models/compare_runs.py, profilers/ab.py)
    "compared_despite_differences": lambda v: (
        f"compared with --force although the runs differ in {', '.join(v['differences'])}"
    ),
    "rows_in_one_run": lambda v: (
        f"{v['count']} {v['what']}{'s appear' if v['count'] > 1 else ' appears'} on one side only "
        "(listed as 'only in base' / 'only in new')"
    ),
    "single_run": lambda v: _single_run(v),
    "noise_floor_default": lambda v: (
        f"no noise floor measured on this machine: single-run verdicts use the stated default "
        f"({_pct(v['floor'])}; {_pct(v['short_floor'])} for rows under {format_duration(v['short_s'])}); "
        "measure this machine's with an A/A (the same command as --base and --new)"
        + (f": {v['command']}" if v.get("command") else "")
    ),
    "noise_floor_not_saved": lambda v: f"the measured noise floor was not saved: {v['reason']}",
    "noise_floor_empty": lambda v: (
        f"the noise floor holds {v['runs']} run(s) and {v['groups']} group(s): an A/A needs at least 2 runs "
        "of the command"
    ),
    "noise_floor_not_finite": lambda v: (
        f"the noise floor's spread is not a finite number for {', '.join(v['groups'])}"
    ),
    "noise_floor_mismatch": lambda v: (
        f"the noise floor's {v['field']} is {v['floor']!r}, this run's {v['run']!r}"
    ),
    # ---- calibrated performance model (calibrate, predict, validate: cost_models/op_model.py,
    # profilers/calibration.py, meta_record.py, predict.py, validate.py)
    "trace_calibration_few_shapes": lambda v: (
        f"families on fewer than {v['min']} distinct shapes (their residual rests on few points; "
        f"a shape between them is interpolated, one beyond is extrapolated): {', '.join(v['families'])}"
    ),
    "trace_calibration_coverage": lambda v: (
        f"only {_pct(v['share'])} of the traces' GPU time is in ops with recorded shapes and a formula: "
        "the rest (CUDA-graph replays, torch.compile regions, custom kernels, kernels outside any op) "
        "teaches the calibration nothing"
    ),
    "calibration_cases_skipped": lambda v: (
        f"{v['count']} shape(s) not timed (they failed their correctness check or could not run), "
        f"e.g. {v['first']}"
    ),
    "calibration_noisy": lambda v: (
        "the calibration is noisy: "
        + " and ".join(
            part
            for part in (
                f"a shape's repetitions spread by {_pct(v['spread'])} (median IQR/median)"
                if v.get("spread") is not None
                else "",
                f"colder cache states came out more than {_pct(v.get('tolerance', 0.1))} faster than "
                f"hotter ones at {_pct(v['out_of_order'])} of the shapes measured in both"
                if v.get("out_of_order") is not None
                else "",
            )
            if part
        )
        + " — the machine's speed moved while it was measured, and predictions from it carry that; "
        "close other programs and calibrate again, or calibrate on a quieter machine"
    ),
    "option_ignored": lambda v: (
        f"{v['option']} is ignored: --mode {' and '.join(v['modes'])} does not read it ({v['instead']})"
    ),
    "option_overridden": lambda v: (
        f"{v['option']} is ignored: --grid {v['option'].removeprefix('--')}=… gives that parameter's values"
    ),
    "validation_other_device": lambda v: (
        f"the calibration was made on {v['calibrated']} and the steps measured on {v['measured']}: "
        "the errors include the difference between the two machines"
    ),
    "validation_threads_differ": lambda v: (
        f"measured at {v['threads']} thread(s) against a calibration made at {v['calibrated']}: "
        f"every comparison mixes the two (--threads {v['calibrated']} measures as it was calibrated)"
    ),
    "calibration_smoke_grid": lambda v: (
        f"the calibration is of the {v['grid']} grid, a smoke test of a few shapes per group: "
        "most operators are extrapolated far from it (calibrate with the standard grid to predict)"
    ),
    "calibration_nothing_to_resume": lambda v: (
        f"--continue: no saved run to continue (neither an --out JSON file nor {v['cache']}): "
        "this is a new calibration"
    ),
    "calibration_incomplete": lambda v: (
        "the calibration is incomplete (measured: "
        + (", ".join(v["groups"]) or "nothing")
        + "): ops of the other groups come from the device roofline; run infer-opt calibrate --continue"
    ),
    "calibration_no_host_term": lambda v: (
        "the calibration has no host term: time outside the operators is not predicted; run "
        "infer-opt calibrate --continue"
    ),
    "prediction_extrapolated": lambda v: (
        f"{_pct(v['share'])} of the predicted operator time is extrapolated (shapes outside the calibrated "
        "grid, borrowed families or the device roofline): expect a larger error than the band says"
    ),
    "recorded_by_real_run": lambda v: (
        f"the model could not be recorded on fake tensors ({v['reason']}); its ops were recorded by one real "
        "run on random data instead"
    ),
    "recorded_for_cpu_kernels": lambda v: (
        f"the calibration is for {v['device']} but this torch has no CUDA: the op sequence was recorded "
        "with the CPU's kernel choices (fused attention may differ)"
    ),
    "gpu_trace_prediction": lambda v: (
        f"predicted: GPU kernel time on {v['device']} ({v['source']}), fused attention as the "
        f"{v['attention']} kernel the traces ran; the host term is the traces' median gap between "
        f"kernels ({format_duration(v['gap_s'])}) per kernel-launching call — what launching them cost "
        "there, which a CUDA graph would hide"
    ),
    "gpu_trace_replay": lambda v: (
        f"predicted: GPU kernel time on {v['device']} ({v['source']}), fused attention as the "
        f"{v['attention']} kernel the traces ran; the step is replayed: the host issues each op after "
        + (
            f"{format_duration(v['launch_s'])} + {format_duration(v['python_s'])} per Python call + "
            f"{format_duration(v['op_s'])} per aten op since the previous one (fitted on the traces)"
            if "launch_s" in v
            else f"its family's issue cost in the traces (median {format_duration(v['issue_s'])})"
        )
        + f", each kernel starts when its launch arrives and the stream is free "
        f"({format_duration(v['queued_gap_s'])} between queued kernels)"
    ),
    "validation_on_grid": lambda v: (
        f"{_pct(v['share'])} of the predicted op time is on shapes the calibration measured: this point "
        "checks the grid, not the interpolation; choose shapes between grid points"
    ),
    # ---- operator calibration cache (profilers/calibration.py)
    "calibration_bad_time": lambda v: f"family {v['family']} has a time that is not a finite positive number",
    "calibration_empty": lambda v: "it holds no measured families",
    "calibration_no_roofline": lambda v: (
        "it has no device roofline (the linear and elementwise groups were not measured)"
    ),
    # ---- input files (infer_opt/inputs/tables.py; robustness helper)
    "extra_columns": lambda v: (
        f"{v['file']}: column{'s' if len(v['columns']) > 1 else ''} {', '.join(v['columns'])} not used "
        "(check the spelling if one was meant to be read)"
    ),
    # ---- trace devices and collectives (trace/devices.py, trace/collectives.py)
    "device_inferred": lambda v: (
        f"device identified as {v['device']} from {', '.join(v['evidence'])}"
        + (
            f" (its name {v['name']!r} names no known device)"
            if v.get("name")
            else " (the trace gives no device name)"
        )
    ),
    "device_unknown": lambda v: (
        f"device not identified ({', '.join(v['seen'])}"
        + (f"; could be {' or '.join(v['candidates'])}" if v.get("candidates") else "")
        + "): no datasheet peaks; give --device NAME or --peak-flops/--peak-bandwidth"
    ),
    "collective_wait_included": lambda v: (
        "a collective's kernel time includes waiting for its peers: the fitted α-β "
        f"({', '.join(v['collectives'])}) is an upper bound on the link's latency and a lower bound on "
        "its bandwidth"
    ),
    # ---- trace reading and timeline (trace/reader.py, trace/timeline.py)
    "trace_truncated": lambda v: (
        f"{v['file']}: the file is cut short; read up to its last complete event"
        + (f" ({v['events_kept']} events kept)" if v.get("events_kept", -1) >= 0 else "")
        + ": figures after the cut are missing"
    ),
    "trace_duplicates": lambda v: f"{v['file']}: {v['events']} exact duplicate events dropped",
    "trace_bad_durations": lambda v: (
        f"{v['file']}: {v['events']} duration events with a missing or impossible ts/dur dropped"
        + (
            f" (the first: event #{v['index']} '{v['name']}', {v['field']} = "
            f"{'missing' if v.get('value') is None else v['value']}; allowed: a finite ts in "
            "[0, 2^53] µs and dur in [0, 1 day])"
            if "field" in v
            else ""
        )
    ),
    "validate_trace_in_calibration": lambda v: (
        f"{v['trace']} is among the traces the calibration was built from: not a held-out trace; the "
        "errors say how well the model fits it, not how well it predicts another"
    ),
    "trace_clock_skew": lambda v: (
        f"{os.path.basename(v['file'])}: {v['events']} GPU events start before their launch call (up to "
        f"{format_duration(v['lead_s'])} before it: the host's and the device's clocks disagree); each "
        "step keeps the GPU events it launched, its window widened to hold them"
    ),
    "trace_gpu_step_spans_ignored": lambda v: (
        f"{os.path.basename(v['file'])}: the GPU-side ProfilerStep span of {v['steps']} step(s) does not "
        f"hold the step's own kernels (#{v['step']}: {format_duration(v['span_s'])}, {v['held']} of its "
        f"{v['events']} GPU events in it): each such step is measured from its own GPU events"
    ),
    "trace_repeated_steps": lambda v: (
        f"{v['file']}: ProfilerStep#{', #'.join(map(str, v['steps']))}"
        + (f" (and {v['count'] - len(v['steps'])} more)" if v["count"] > len(v["steps"]) else "")
        + " recorded more than once at different times (several profiler sessions in one file?): "
        + (
            f"each kept as its own step, the steps numbered in time order #{v['first']}–#{v['last']}"
            if "first" in v
            else "only the first of each number is analyzed as that step"
        )
    ),
    "trace_bad_sizes": lambda v: (
        f"{v['file']}: {v['args']} distinct event args with an impossible size ignored (the first: "
        f"'{v['key']}' = {v['value']}; allowed: whole numbers in [0, 2^53]): those events have no size"
    ),
    "trace_no_steps": lambda v: (
        f"{v['file']}: no ProfilerStep in the trace: analyzed as one window from the first GPU event to "
        "the last, idle time between the host's phases included (record with a schedule and prof.step())"
    ),
    "trace_no_gpu_events": lambda v: f"{v['file']}: no GPU events (a CPU-only trace): no GPU timeline",
    "trace_rank_failed": lambda v: (
        f"rank file {v['file']} could not be analysed ({v['error']}); the other ranks are reported "
        "without it (--strict refuses the job instead)"
    ),
    "trace_rank_id_missing": lambda v: (
        f"no rank id (distributedInfo) in {', '.join(v['files'])}: numbered by position among the files"
    ),
    "trace_rank_duplicate": lambda v: (
        f"rank {v['rank']} is claimed by {', '.join(v['files'])}: the cross-rank analysis is left out; "
        "give each rank's trace once"
    ),
    "trace_ranks_absent": lambda v: (
        f"{v['present']} of the job's {v['world_size']} ranks are here (absent: "
        + ", ".join(str(r) for r in v["absent"])
        + (f" and {v['more']} more" if v["more"] else "")
        + "); the cross-rank figures are over the ranks present"
    ),
    "trace_devices_differ": lambda v: (
        f"the traces were not all taken on one device ({'; '.join(v['seen'])}): the first one's peaks are "
        "used for every rank"
    ),
    "trace_no_peaks": lambda v: (
        "no roofline for this device: ops get achieved rates but no bound or peak fraction, and the "
        "what-ifs that need peaks are left out; give --device NAME, --peak-flops/--peak-bandwidth or "
        "--roofline FIT.json"
    ),
    "trace_cpu_only": lambda v: (
        "no GPU events in the trace"
        + ("s" if v["files"] > 1 else "")
        + ": only the CPU-op analysis (self time per op) is given"
    ),
    "trace_compare_devices": lambda v: (
        f"the two traces ran on different devices ({v['base']} against {v['new']}): the ratios compare "
        "the devices as much as any change"
    ),
    "capture_keep_current": lambda v: (
        f"the list found is no faster than the current one ({v['current']}; gain {v['gain']:.4g}×, within "
        "the limits given): keep the current list — no flags to change"
    ),
    "trace_compare_unmatched": lambda v: (
        f"only {v['ops_both']} of the {v['ops']} (op, shapes, dtype) groups ran on both sides, "
        f"{v['matched']:.0%} of the kernel time: the traces are of different workloads (models, shapes), "
        "so the step and category ratios compare the workloads, not a change"
    ),
    "trace_compare_host_bound": lambda v: (
        f"both steps are host-bound (the GPU idle {v['base']:.0%} and {v['new']:.0%} of them): the step time "
        "measures the host (Python, launches, syncs), so the headline compares the GPU kernel time per step"
    ),
    "trace_compare_host_bound_path": lambda v: (
        f"both steps are host-bound (host work, launches and syncs {v['base']:.0%} and {v['new']:.0%} of the "
        "replayed critical path): the step time measures the host, so the headline compares the host's "
        "time on the path and the GPU kernel time per step"
    ),
    "trace_compare_one_step": lambda v: (
        "neither trace has two steps: the spread between steps is unknown, so a change is called on "
        "the threshold alone"
    ),
    "launch_backlog": lambda v: (
        f"the launch queue is deep (up to {v['max_depth']} kernels launched ahead of the GPU): the delay "
        "from launch to start is queueing behind earlier kernels, not launch overhead"
    ),
    "trace_incomplete_step_dropped": lambda v: (
        f"ProfilerStep#{v['step']} is incomplete (its GPU work runs past the trace's end or it has none) "
        "and is not analyzed"
    ),
    # ---- engine settings (tune: cost_models/capture_sizes.py, capture_tuning.py, speculative_tuning.py)
    "cost_decreasing": lambda v: (
        f"{v['source']}: the step cost goes down as the batch grows ({v['before']} → {v['at']}, "
        f"{v['before_s'] * 1e3:.4g} ms → {v['time_s'] * 1e3:.4g} ms; {v['count']} such drop(s)): "
        "padding to a larger capture then looks free, and a capture list from observed sizes may not be "
        "optimal; check the measurement"
    ),
    "speculative_cost_extrapolated": lambda v: (
        f"the {v['curve']} cost is measured for {v['low']}..{v['high']} tokens and asked up to "
        f"{v['asked']} ({v['share']:.1%} of steps): extrapolated log-log beyond (estimated)"
    ),
    "cost_extrapolated": lambda v: (
        f"{v['count']} observed batch size(s) ({v['share']:.1%} of steps) lie outside the measured cost "
        f"range {v['low']}..{v['high']}: their cost is extrapolated log-log (estimated)"
    ),
    "histogram_overflow": lambda v: (
        f"{v['share']:.1%} of steps are in the histogram's +Inf bucket: placed just above the last finite "
        "edge, so their cost is a lower bound"
    ),
    "k_max_capped": lambda v: (
        f"--k-max {v['k_max']} is more than the {v['positions']} acceptance rates given: k is tuned up to "
        f"{v['positions']} (no rate to model a longer draft)"
    ),
    # trace: per-op rates against the roofline (infer_opt/trace/roofline.py)
    "trace_replay_unplaced": lambda v: (
        f"{v['file']}: the dependency graph could not place {v['events']} events ({v['reasons']}; "
        f"e.g. {v['example']}): corrupt or skewed timestamps; the replay keeps their measured offsets"
    ),
    "rate_above_peak": lambda v: (
        f"{v['op']} {v['shapes']} measured "
        + (f"{v['rate'] / 1e12:.3g} TFLOP/s" if v["resource"] == "flops" else f"{v['rate'] / 1e9:.4g} GB/s")
        + f", {v['rate'] / v['peak']:.2f}× the assumed "
        + (v["precision"] if v["resource"] == "flops" else "memory")
        + " peak (more than the 1.1× margin): "
        + _RATE_CAUSES.get(v.get("cause", "cache"), _RATE_CAUSES["cache"])
    ),
    "trace_capture_absent": lambda v: (
        f"{v['replays']} CUDA/HIP graph launch(es) replayed kernels with no op and no shapes, and no "
        "capture trace was given: their kernels are broken down by name only (give the engine's "
        "capture trace with --capture FILE for per-op figures)"
    ),
    "trace_capture_partial": lambda v: (
        f"{v['capture']}: {v['linked']} of {v['replays']} graph launches matched a captured graph "
        f"({v['kernels_linked']} of {v['kernels']} replayed GPU events linked to their ops); the others "
        "are broken down by kernel name only (a graph captured at another size, or not in this capture)"
    ),
    "trace_capture_no_formula": lambda v: (
        f"linked to its capture, {v['share']:.1%} of the replay's GPU time is still in ops with no FLOP/byte "
        "formula ("
        + ", ".join(f"{name} {share:.1%}" for name, share in v["ops"])
        + "): ops with no formula for their name here (an engine's MoE and paged-attention ops leave the "
        "weights or KV lengths a formula needs out of their recorded inputs)"
    ),
    "trace_capture_by_order": lambda v: (
        f"{v['capture']}: its launches record no kernel names (CUDA's do not): replayed kernels were "
        "matched to captured launches by count and order only; a graph whose branches ran in another "
        "order gets its ops mixed up (check the kernel names in the op table)"
    ),
    "trace_capture_ambiguous": lambda v: (
        "the graphs captured as "
        + ", ".join(v["labels"])
        + " have the same kernels and a replay records no size: the replays were linked to "
        + ", ".join(v["chosen"])
        + "'s ops and shapes (check the kernel times against them)"
    ),
}

#: the likely causes of a rate above its peak (infer_opt/trace/roofline.py likely_cause)
_RATE_CAUSES = {
    "link": "the host link is faster than assumed (NVLink-C2C, a newer PCIe; give --device)",
    "formula": "too far above for any cache: the op's FLOP/byte formula overcounts (its shapes or dim) "
    "or the device is wrong (give --device)",
    "precision": "a faster precision's kernel ran (TF32, FP8) or the device is wrong (give --device)",
    "cache": "its data stayed in L2 (a small working set), or the device is wrong (give --device)",
}

_FAMILY_PINS = {"matmul": "R (matmul)", "elementwise": "b (elementwise)", "launch": "t0 (launch)"}

_FIT_FIELDS = {
    "device_kind": "device kind",
    "device_name": "device",
    "dtype": "dtype",
    "threads": "CPU thread count",
    "matmul_precision": "float32 matmul precision",
    "timing": "timing",
}


def _parameter(name: str) -> str:
    return {"R": "R (compute rate)", "b": "b (bandwidth)", "t0": "t0 (launch floor)"}.get(name, name)


def _recorded(value: Any) -> str:
    return "not recorded" if value in ("", None) else str(value)


def _num(value: Any) -> str:
    """A number with 3 significant figures; non-finite values (stored as strings in JSON)
    as themselves."""
    try:
        return f"{float(value):.3g}"
    except (TypeError, ValueError):
        return str(value)


def _single_run(v: Mapping[str, Any]) -> str:
    """One run on a side: no between-run estimate, and the commands that give one."""
    sides = " and ".join(
        name for name, runs in (("BASE", v["runs_base"]), ("NEW", v["runs_new"])) if runs < 2
    )
    text = (
        f"{sides} {'hold' if ' and ' in sides else 'holds'} one run: the spread between runs is unknown, "
        "so no change below the noise floor gets a verdict. For a run-level test, "
    )
    commands = [c for c in dict.fromkeys((v.get("base_command"), v.get("new_command"))) if c]
    if commands:
        text += "rerun with 3 runs: " + " and ".join(commands)
    else:
        text += f"rerun each side with --runs 3 (infer-opt {v.get('kind', 'kernels')} ... --runs 3)"
    ab = v.get("ab_command") or "infer-opt ab --base '…' --new '…'"
    return f"{text}, or alternate the two commands: {ab}"


def text(notice: Notice) -> str:
    """``notice`` in words, prefixed with its subject. An unknown code (a result saved by a
    newer infer-opt) is shown as its code and values rather than dropped."""
    words = MESSAGES.get(notice.code)
    if words is None:
        values = ", ".join(f"{k}={v}" for k, v in notice.values.items())
        body = f"{notice.code}" + (f" ({values})" if values else "")
    else:
        body = words(notice.values)
    return body if notice.subject is None else f"{notice.subject}: {body}"


def as_json(notice: Notice) -> dict[str, Any]:
    """What the JSON envelope lists for a warning: code, words, subject and values."""
    out: dict[str, Any] = {"code": notice.code, "message": text(notice)}
    if notice.subject is not None:
        out["subject"] = notice.subject
    if notice.values:
        out["values"] = dict(notice.values)
    return out


__all__ = ["MESSAGES", "as_json", "text"]
