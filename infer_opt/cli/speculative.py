"""``infer-opt speculative ...``: speculative-decoding calculators and checks.

The group object lives here; its commands may be defined in this module or in sibling
modules that import ``app`` from here (they are imported by :mod:`infer_opt.cli.app`)."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from infer_opt.cli.common import CsvOpt, FormatOpt, JsonOpt, MarkdownOpt, OutOpt, PlotOpt, check_png, emit
from infer_opt.cost_models import speculative as model
from infer_opt.errors import InvalidInput
from infer_opt.units import parse_duration, parse_float, parse_float_list, parse_int

app = typer.Typer(
    help="Speculative decoding: expected committed tokens, speedup, acceptance, plan comparison.",
    no_args_is_help=True,
)

# ------------------------------------------------------------------------------ shared options

TargetCostOpt = Annotated[
    str | None, typer.Option("--target-cost", help="c_t: one plain target decoding step (bare number = ms).")
]
DraftCostOpt = Annotated[
    str | None, typer.Option("--draft-cost", help="c_d: one draft token (bare number = ms).")
]
VerifyCostOpt = Annotated[
    str | None,
    typer.Option(
        "--verify-cost", help="c_v(k): one verification pass of the target (bare number = ms). Default: c_t."
    ),
]
VerifyModelOpt = Annotated[
    str | None,
    typer.Option("--verify-cost-model", help="c_v(k) as 'A + B*k', e.g. '12ms+0.5ms*k' (bare numbers = ms)."),
]
OverheadOpt = Annotated[
    str, typer.Option("--overhead", help="c_m: bookkeeping per round (bare number = ms), >= 0.")
]

_VERIFY_MODEL_EXPECTED = "expected 'A + B*k' with durations >= 0, e.g. '12ms+0.5ms*k' (bare numbers are ms)"
_K_TERM = re.compile(r"^(?:(?P<pre>.+?)\s*[*·×]?\s*k|k\s*[*·×]\s*(?P<post>.+))$", re.IGNORECASE)


def parse_verify_model(text: str, option: str = "--verify-cost-model") -> tuple[float, float]:
    """``"12ms + 0.5ms*k"`` -> ``(0.012, 0.0005)`` seconds: terms joined by ``+``, each a
    duration or a duration times ``k`` (``0.5ms*k``, ``k*0.5ms``, ``0.5ms·k``)."""
    terms = [t.strip() for t in re.split(r"(?<![eE])\+", str(text))]
    if not terms or any(t == "" for t in terms):
        raise InvalidInput(option, text, _VERIFY_MODEL_EXPECTED)
    base = per_k = 0.0
    for term in terms:
        match = _K_TERM.match(term)
        coefficient = (match.group("pre") or match.group("post")).strip() if match else term
        try:
            value = parse_duration(coefficient, option=option, default_unit="ms")
        except InvalidInput:
            raise InvalidInput(option, text, f"{_VERIFY_MODEL_EXPECTED}; {term!r} is not") from None
        if match:
            per_k += value
        else:
            base += value
    return base, per_k


def parse_costs(
    target_cost: str | None,
    draft_cost: str | None,
    verify_cost: str | None,
    verify_cost_model: str | None,
    overhead: str,
) -> model.Costs:
    """The per-round costs from the shared options; c_v = c_t (flagged as assumed) if neither
    ``--verify-cost`` nor ``--verify-cost-model`` is given."""
    if target_cost is None:
        raise InvalidInput(
            "--target-cost", "missing", "give c_t, the cost of one plain target step (e.g. 10ms)"
        )
    if draft_cost is None:
        raise InvalidInput("--draft-cost", "missing", "give c_d, the cost of one draft token (e.g. 1ms)")
    c_t = parse_duration(target_cost, option="--target-cost", default_unit="ms", allow_zero=False)
    c_d = parse_duration(draft_cost, option="--draft-cost", default_unit="ms")
    c_m = parse_duration(overhead, option="--overhead", default_unit="ms")
    if verify_cost is not None and verify_cost_model is not None:
        raise InvalidInput(
            "--verify-cost", verify_cost, "give --verify-cost or --verify-cost-model, not both"
        )
    if verify_cost is not None:
        return model.Costs(
            c_t, c_d, parse_duration(verify_cost, option="--verify-cost", default_unit="ms"), 0.0, c_m
        )
    if verify_cost_model is not None:
        base, per_k = parse_verify_model(verify_cost_model)
        return model.Costs(c_t, c_d, base, per_k, c_m)
    return model.Costs(c_t, c_d, c_t, 0.0, c_m, verify_assumed=True)


# ------------------------------------------------------------------------------------ speedup

SPEEDUP_HELP = (
    "Expected committed tokens per round and the speedup over plain decoding (a model\n"
    "prediction from the costs you give; bare durations are ms).\n\n"
    "E[N] = Σ_{i=0..k} Π_{j≤i} α_j (bonus token included); S = c_t·E[N] / (k·c_d + c_v(k) + c_m).\n\n"
    "Examples:\n\n"
    "  infer-opt speculative speedup --k 3 --alpha 0.8 --target-cost 10 --draft-cost 1 "
    "--verify-cost 12 --overhead 1\n\n"
    "  infer-opt speculative speedup --alphas 0.9,0.7,0.5 --target-cost 10 --draft-cost 1 "
    '--verify-cost-model "9ms+1ms*k"\n\n'
    "  infer-opt speculative speedup --alpha 0.8 --k 3 --target-cost 10 --draft-cost 1 --sweep-k 12 "
    "--plot s.png --plot-grid g.png\n"
)


def speedup(
    k: Annotated[
        str | None,
        typer.Option("--k", help="Draft length k, an integer >= 1 (default: the length of --alphas)."),
    ] = None,
    alpha: Annotated[
        str | None, typer.Option("--alpha", help="Constant per-position acceptance rate α in [0, 1].")
    ] = None,
    alphas: Annotated[
        str | None,
        typer.Option(
            "--alphas",
            help="Per-position conditional rates α_1,…,α_k in [0, 1] (longer lists for --sweep-k/--plot).",
        ),
    ] = None,
    target_cost: TargetCostOpt = None,
    draft_cost: DraftCostOpt = None,
    verify_cost: VerifyCostOpt = None,
    verify_cost_model: VerifyModelOpt = None,
    overhead: OverheadOpt = "0",
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget", help="Tokens left before a length limit, L >= 1: report the expected min(N, L)."
        ),
    ] = None,
    sweep_k: Annotated[
        str | None, typer.Option("--sweep-k", help="Sweep k = 1..KMAX and report the best draft length.")
    ] = None,
    plot_grid: Annotated[
        Path | None, typer.Option("--plot-grid", help="Write a heat map of S over (α, k) to FILE.png.")
    ] = None,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    fmt: FormatOpt = None,
    plot: PlotOpt = None,
) -> None:
    if (alpha is None) == (alphas is None):
        raise InvalidInput("--alpha", "both or neither", "give one constant --alpha or per-position --alphas")
    a = None if alpha is None else parse_float(alpha, option="--alpha", low=0, high=1)
    rates = None if alphas is None else parse_float_list(alphas, option="--alphas", low=0, high=1)
    if k is None and rates is None:
        raise InvalidInput("--k", "missing", "give the draft length --k (an integer >= 1)")
    k_val = len(rates) if k is None and rates is not None else parse_int(k, option="--k", low=1)
    kmax = None if sweep_k is None else parse_int(sweep_k, option="--sweep-k", low=1)
    if rates is not None and len(rates) > k_val and kmax is None and plot is None and plot_grid is None:
        raise InvalidInput(
            "--alphas", alphas, f"give exactly k = {k_val} rates (longer lists only with --sweep-k or --plot)"
        )
    costs = parse_costs(target_cost, draft_cost, verify_cost, verify_cost_model, overhead)
    limit = None if budget is None else parse_int(budget, option="--budget", low=1)
    check_png("--plot-grid", plot_grid)
    result = model.speculative_speedup(k_val, costs, alpha=a, alphas=rates, budget=limit, sweep_kmax=kmax)
    emit(result, json_out=json_out, out=out, markdown=markdown, csv=csv, fmt=fmt, plot=plot)
    if plot_grid is not None:
        _plot_grid(result, plot_grid)
        typer.echo(f"wrote {plot_grid}", err=True)


def _plot_curves(result: model.SpeedupResult, path: Path) -> Path:
    from infer_opt.reports.plots import speculative as plots

    return plots.plot_speedup_curves(result, model.speedup_curves(result), path)


def _plot_grid(result: model.SpeedupResult, path: Path) -> None:
    from infer_opt.reports.plots import speculative as plots

    plots.plot_speedup_grid(result, model.speedup_grid(result), path)


# --------------------------------------------------------------------------------- acceptance

ACCEPTANCE_HELP = f"""Acceptance of draft tokens x ~ q against the target p, the residual used after
a rejection, and the output distribution of the exact rule beside the wrong one.

a(x) = min(1, p(x)/q(x)); A = Σ min(p, q) = 1 - TV(p, q); r = max(p - q, 0)/(1 - A).

Distributions must sum to 1 within {model.DISTRIBUTION_TOLERANCE:g} (absolute) unless --normalize is given.

Example:

  infer-opt speculative acceptance --p 0.5,0.3,0.2 --q 0.2,0.5,0.3
"""

_SEPARATORS = re.compile(r"[,;\s]+")


def _read_text(path: Path, option: str) -> str:
    """The UTF-8 text of ``path``; a directory or an unreadable/binary file is a one-line error."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(option, str(path), "file does not exist") from None
    except IsADirectoryError:
        raise InvalidInput(option, str(path), "is a directory, expected a file") from None
    except UnicodeDecodeError:
        raise InvalidInput(option, str(path), "not a UTF-8 text file") from None
    except OSError as exc:
        raise InvalidInput(option, str(path), f"cannot read it ({exc.strerror})") from None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_vector(path: Path, option: str) -> list[float]:
    """Numbers from a ``.npy`` file, or from text/CSV separated by commas, spaces or newlines
    (one leading header line is skipped)."""
    if not path.exists():
        raise InvalidInput(option, str(path), "file does not exist")
    if path.suffix.lower() == ".npy":
        import numpy as np

        try:
            arr = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise InvalidInput(option, str(path), f"not a readable .npy file ({exc})") from None
        if arr.ndim != 1 and arr.squeeze().ndim != 1:
            raise InvalidInput(option, f"{path} shape {arr.shape}", "expected a 1-D array")
        try:
            return [float(v) for v in arr.squeeze().tolist()]
        except (TypeError, ValueError):
            raise InvalidInput(option, str(path), "expected a numeric array") from None
    lines = _read_text(path, option).splitlines()
    if len(lines) > 1 and not all(_is_number(t) for t in _SEPARATORS.split(lines[0]) if t):
        lines = lines[1:]  # a header line
    items = [t for t in _SEPARATORS.split("\n".join(lines)) if t]
    if not items:
        raise InvalidInput(option, str(path), "the file holds no numbers")
    values = []
    for i, item in enumerate(items):
        try:
            values.append(float(item))
        except ValueError:
            raise InvalidInput(
                option,
                f"{path}: entry {i + 1} {item!r}",
                "expected numbers separated by commas, spaces or newlines",
            ) from None
    return values


def _vector(inline: str | None, file: Path | None, name: str, logits: bool) -> tuple[list[float], str]:
    if (inline is None) == (file is None):
        raise InvalidInput(f"--{name}", "both or neither", f"give --{name} (inline) or --{name}-file")
    if file is not None:
        return read_vector(file, f"--{name}-file"), f"--{name}-file"
    return parse_float_list(inline, option=f"--{name}", allow_inf=logits), f"--{name}"  # type: ignore[arg-type]


def acceptance(
    p: Annotated[str | None, typer.Option("--p", help="Target distribution p, comma-separated.")] = None,
    q: Annotated[
        str | None, typer.Option("--q", help="Draft distribution q (as actually sampled), comma-separated.")
    ] = None,
    p_file: Annotated[Path | None, typer.Option("--p-file", help="p from a .npy or CSV/text file.")] = None,
    q_file: Annotated[Path | None, typer.Option("--q-file", help="q from a .npy or CSV/text file.")] = None,
    logits: Annotated[
        bool,
        typer.Option("--logits", help="The values are logits: p = softmax(z/T) with the temperatures below."),
    ] = False,
    p_temperature: Annotated[
        str | None,
        typer.Option("--p-temperature", help="Target temperature T > 0 (with --logits; default 1)."),
    ] = None,
    q_temperature: Annotated[
        str | None,
        typer.Option("--q-temperature", help="Draft temperature T > 0 (with --logits; default 1)."),
    ] = None,
    normalize: Annotated[
        bool, typer.Option("--normalize", help="Rescale p and q by their sums instead of requiring sum 1.")
    ] = False,
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    fmt: FormatOpt = None,
) -> None:
    p_vals, p_name = _vector(p, p_file, "p", logits)
    q_vals, q_name = _vector(q, q_file, "q", logits)
    temps: list[float | None] = [None, None]
    for i, (text, option) in enumerate(
        ((p_temperature, "--p-temperature"), (q_temperature, "--q-temperature"))
    ):
        if text is not None and not logits:
            raise InvalidInput(option, text, "a temperature applies only to logits; add --logits")
        if logits:
            temps[i] = 1.0 if text is None else parse_float(text, option=option, low=0, low_open=True)
    if logits:
        p_vals = model.softmax(p_vals, temps[0], name=p_name).tolist()  # type: ignore[arg-type]
        q_vals = model.softmax(q_vals, temps[1], name=q_name).tolist()  # type: ignore[arg-type]
    p_arr, q_arr = model.validate_pair(p_vals, q_vals, normalize=normalize, names=(p_name, q_name))
    result = model.acceptance_report(
        p_arr,
        q_arr,
        normalized=normalize,
        from_logits=logits,
        p_temperature=temps[0],
        q_temperature=temps[1],
    )
    emit(result, json_out=json_out, out=out, markdown=markdown, csv=csv, fmt=fmt)


# -------------------------------------------------------------------------------------- plans

PLANS_HELP = """Compare speculative plans from logged rounds: long-run cost per committed token
Σ time / Σ tokens per plan (never the mean of per-round ratios), tokens per round, best plan.

FILE is a CSV with a header naming the columns plan, time, tokens (time like 12ms; bare = ms).

Example:

  infer-opt speculative plans rounds.csv
"""

_PLAN_COLUMNS = ("plan", "time", "tokens")


def read_plan_log(path: Path) -> list[model.PlanRound]:
    """Rounds from a CSV with columns plan, time, tokens (any order; extra columns ignored)."""
    if not path.exists():
        raise InvalidInput("FILE", str(path), "file does not exist")
    reader = csv.reader(io.StringIO(_read_text(path, "FILE")))
    header = next(reader, None)
    names = [h.strip().lower() for h in header or []]
    missing = [c for c in _PLAN_COLUMNS if c not in names]
    if missing:
        raise InvalidInput(
            f"{path} line 1",
            ",".join(header or []),
            f"the header must name the columns plan, time, tokens (missing: {', '.join(missing)})",
        )
    col = {c: names.index(c) for c in _PLAN_COLUMNS}
    rounds = []
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row) or row[0].lstrip().startswith("#"):
            continue
        where = f"{path} line {line}"
        if len(row) <= max(col.values()):
            raise InvalidInput(where, ",".join(row), f"expected {len(names)} columns: {','.join(names)}")
        plan = row[col["plan"]].strip()
        if not plan:
            raise InvalidInput(f"{where}, column plan", row[col["plan"]], "the plan name is empty")
        time_s = parse_duration(
            row[col["time"]].strip(), option=f"{where}, column time", default_unit="ms", allow_zero=False
        )
        tokens = parse_int(row[col["tokens"]].strip(), option=f"{where}, column tokens", low=1)
        rounds.append(model.PlanRound(plan, time_s, tokens))
    if not rounds:
        raise InvalidInput("FILE", str(path), "the log has no data rows")
    return rounds


def plans(
    file: Annotated[
        Path, typer.Argument(help="CSV of logged rounds: plan, time, tokens.", show_default=False)
    ],
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    fmt: FormatOpt = None,
) -> None:
    result = model.compare_plans(read_plan_log(file))
    emit(result, json_out=json_out, out=out, markdown=markdown, csv=csv, fmt=fmt)


# ------------------------------------------------------------------------------- from-metrics

METRICS_HELP = """Per-position acceptance from serving-engine counters, E[N], and (with costs) the
implied speedup. vLLM exports these as spec_decode_num_drafts and
spec_decode_num_accepted_tokens_per_pos.

u_i = acc_i/drafts; α_i = acc_i/acc_{i-1} (acc_0 = drafts); E[N] = 1 + Σ u_i.

Examples:

  infer-opt speculative from-metrics --drafts 1000 --accepted-per-position 820,610,400

  infer-opt speculative from-metrics --file metrics.json --target-cost 10 --draft-cost 1 --verify-cost 12
"""

_METRIC_ALIASES = {
    "accepted_tokens_per_pos": "accepted_per_position",
    "accepted_per_pos": "accepted_per_position",
}


def _metric_key(key: str) -> str:
    k = (
        key.strip()
        .lower()
        .replace("-", "_")
        .removeprefix("vllm:")
        .removeprefix("spec_decode_")
        .removeprefix("num_")
    )
    return _METRIC_ALIASES.get(k, k)


def _whole(option: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 0:
        raise InvalidInput(option, value, "counts must be non-negative whole numbers")
    return int(value)


def read_metrics(path: Path) -> dict[str, Any]:
    """``{"drafts": ..., "accepted_per_position": [...], "draft_tokens": ...}`` from a JSON file
    (vLLM's names, with or without the ``vllm:spec_decode_num_`` prefix, are accepted)."""
    if not path.exists():
        raise InvalidInput("--file", str(path), "file does not exist")
    try:
        data = json.loads(_read_text(path, "--file"))
    except json.JSONDecodeError as exc:
        raise InvalidInput("--file", str(path), f"not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise InvalidInput(
            "--file", str(path), "expected a JSON object with drafts and accepted_per_position"
        )
    found = {_metric_key(k): v for k, v in data.items()}
    out: dict[str, Any] = {}
    for key in ("drafts", "accepted_per_position"):
        if key not in found:
            raise InvalidInput(
                "--file", str(path), f"missing key {key!r} (keys: drafts, accepted_per_position)"
            )
    out["drafts"] = _whole(f"{path}: drafts", found["drafts"])
    acc = found["accepted_per_position"]
    if not isinstance(acc, list) or not acc:
        raise InvalidInput(f"{path}: accepted_per_position", acc, "expected a non-empty list of counts")
    out["accepted_per_position"] = [_whole(f"{path}: accepted_per_position", a) for a in acc]
    if found.get("draft_tokens") is not None:
        out["draft_tokens"] = _whole(f"{path}: draft_tokens", found["draft_tokens"])
    return out


def _count_list(text: str, option: str) -> list[int]:
    items = [t for t in str(text).replace(" ", "").split(",") if t]
    if not items:
        raise InvalidInput(option, text, "expected comma-separated counts, e.g. 820,610,400")
    return [parse_int(t, option=option, low=0) for t in items]


def from_metrics(
    drafts: Annotated[str | None, typer.Option("--drafts", help="Number of draft rounds.")] = None,
    accepted_per_position: Annotated[
        str | None,
        typer.Option(
            "--accepted-per-position", help="Accepted count at draft positions 1..k, e.g. 820,610,400."
        ),
    ] = None,
    draft_tokens: Annotated[
        str | None, typer.Option("--draft-tokens", help="Total draft tokens proposed (optional).")
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", help="JSON with keys drafts, accepted_per_position[, draft_tokens]."),
    ] = None,
    target_cost: TargetCostOpt = None,
    draft_cost: DraftCostOpt = None,
    verify_cost: VerifyCostOpt = None,
    verify_cost_model: VerifyModelOpt = None,
    overhead: OverheadOpt = "0",
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    fmt: FormatOpt = None,
) -> None:
    if file is not None:
        if drafts is not None or accepted_per_position is not None or draft_tokens is not None:
            raise InvalidInput("--file", str(file), "give the counters in --file or as options, not both")
        counters = read_metrics(file)
    else:
        if drafts is None or accepted_per_position is None:
            raise InvalidInput("--drafts", "missing", "give --drafts and --accepted-per-position (or --file)")
        counters = {
            "drafts": parse_int(drafts, option="--drafts", low=1),
            "accepted_per_position": _count_list(accepted_per_position, "--accepted-per-position"),
        }
        if draft_tokens is not None:
            counters["draft_tokens"] = parse_int(draft_tokens, option="--draft-tokens", low=0)
    cost_options = (draft_cost, verify_cost, verify_cost_model)
    costs = None
    if target_cost is not None:
        costs = parse_costs(target_cost, draft_cost, verify_cost, verify_cost_model, overhead)
    elif any(c is not None for c in cost_options) or overhead != "0":
        raise InvalidInput(
            "--target-cost", "missing", "costs need c_t too (the cost of one plain target step)"
        )
    result = model.rates_from_counts(**counters, costs=costs)
    emit(result, json_out=json_out, out=out, markdown=markdown, csv=csv, fmt=fmt)


app.command("speedup", help=SPEEDUP_HELP)(speedup)
app.command("acceptance", help=ACCEPTANCE_HELP)(acceptance)
app.command("plans", help=PLANS_HELP)(plans)
app.command("from-metrics", help=METRICS_HELP)(from_metrics)
