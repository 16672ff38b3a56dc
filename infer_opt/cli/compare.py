"""``infer-opt compare``: two profiles (or two kernel-suite runs), per operator and category,
and which changes exceed the noise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infer_opt.cli.common import argument, option, seed_option
from infer_opt.cli.output import with_output
from infer_opt.cli.types import Fraction, InputFile, Number
from infer_opt.cost_models import compare_runs as model
from infer_opt.results import load_result

# Rich keeps single newlines in help text, so each paragraph is one (concatenated) line.
HELP = (
    "Compare two saved profiles (or two kernel-suite runs) of the same model or suite: per operator "
    "(case) and category, which changes exceed the noise between runs. Two GPU traces (trace files or "
    "saved `infer-opt trace` results) compare op by op (name, shapes, dtype): kernel time per step, "
    "its ratio against the spread between steps, and the categories' shares.\n\n"
    "When each side was measured with --runs 3 or more (infer-opt profile --runs 3, kernels --runs 3): "
    "r = e^(mean log run median new - base), Student's t test on "
    "the log run medians (between-run variance pooled over both sides, at least its family's); "
    "faster/slower iff p < --significance and max(r, 1/r) - 1 >= --threshold. With one run on a side the "
    "spread between runs is unknown: no verdict under this machine's noise floor (measured by an "
    "A/A with infer-opt ab, else a stated default of 40%, 100% under 20 µs).\n\n"
    "Headline as in hyperfine: NEW ran 1.52 ± 0.04 times faster than BASE (the step time for "
    "profiles, the geometric mean over the cases for kernel suites, tested on the per-run levels), "
    "or 'no significant difference (within ±X%)'. Results of different models, shapes, dtypes or "
    "devices (suites) are refused unless --force.\n\n"
    "Examples:\n\n"
    "  infer-opt profile --runs 3 --out base.json   (change something)   infer-opt profile --runs 3 "
    "--out new.json\n\n"
    "  infer-opt compare base.json new.json\n\n"
    "  infer-opt compare base.json new.json --threshold 10% --markdown diff.md --plot diff.png\n\n"
    "  infer-opt compare kernels-old.json kernels-new.json --json\n\n"
    "  infer-opt compare h100.json.gz mi300x.json.gz --plot ops.png\n"
)


#: the options of a comparison, shared with ``infer-opt ab``
ThresholdOpt = option(
    float, "--threshold", parse=Fraction(0, 1), help="Smallest change worth reporting: 5% or 0.05."
)
AlphaOpt = option(
    float,
    "--significance",
    parse=Number(0, 1, low_open=True, high_open=True),
    help="Significance level of the tests (p adjusted over each table), in (0, 1).",
)
ForceOpt = option(bool, "--force", help="Compare even if model, shapes, dtype or device differ.")
SeedOpt = seed_option("the bootstrap")
BaseArg = argument(Path, metavar="BASE", parse=InputFile(), help="The baseline result (.json).")
NewArg = argument(Path, metavar="NEW", parse=InputFile(), help="The result to compare with it (.json).")
NoiseFloorOpt = option(
    float | None,
    "--noise-floor",
    parse=Fraction(0, 10),
    help="One run's noise floor, e.g. 15%: no single-run verdict below it, and the least "
    "between-run spread a run-level test assumes. Default: the floor measured here by an A/A "
    "(infer-opt ab), else 40% (100% under 20 µs).",
)


@with_output(plot=True)
def compare(
    base: BaseArg,
    new: NewArg,
    threshold: ThresholdOpt = "5%",
    alpha: AlphaOpt = 0.05,
    force: ForceOpt = False,
    seed: SeedOpt = 0,
    noise_floor: NoiseFloorOpt = None,
) -> Any:
    distinct = base.name != new.name
    names = (base.name if distinct else str(base), new.name if distinct else str(new))
    traces = _traces(base, new)
    if traces is not None:
        from infer_opt.trace.compare import compare_traces

        return compare_traces(*traces, base_name=names[0], new_name=names[1], threshold=threshold)
    loaded_base, loaded_new = load_result(base), load_result(new)
    if noise_floor is not None:
        noise = model.Noise.given(noise_floor)
    else:
        from infer_opt.store import noise_for

        noise = noise_for([loaded_base.result, loaded_new.result])
    return model.compare_results(
        loaded_base.result,
        loaded_new.result,
        base_name=names[0],
        new_name=names[1],
        force=force,
        alpha=alpha,
        threshold=threshold,
        seed=seed,
        noise=noise,
        commands=(loaded_base.envelope.get("command", ""), loaded_new.envelope.get("command", "")),
    )


#: how far :func:`_is_trace_file` reads for a top-level key that decides
SNIFF_BYTES = 64 << 20


def _is_trace_file(path: Path) -> bool:
    """A torch.profiler trace (gzip, a bare array of events, or an object with ``traceEvents``),
    not a saved result (an object whose ``schema`` is ``infer-opt/<kind>``): the top-level keys
    are read in order, their values skipped, until one decides (at most :data:`SNIFF_BYTES`,
    the read doubling so each value is parsed a bounded number of times). Only a regular file
    is opened (a FIFO would never end: the reader it goes to refuses it)."""
    import json

    if not path.is_file():
        return False
    decoder = json.JSONDecoder()
    with open(path, "rb") as handle:
        raw = handle.read(1 << 16)
        if raw[:2] == b"\x1f\x8b":
            return True
        while True:
            text = raw.decode("utf-8", "replace")
            pos = len(text) - len(text.lstrip(" \t\r\n\ufeff"))
            if text[pos : pos + 1] == "[":
                return True
            decided = _top_level_decides(decoder, text, pos + 1) if text[pos : pos + 1] == "{" else False
            if decided is not None or len(raw) >= SNIFF_BYTES:
                return bool(decided)
            more = handle.read(len(raw))
            if not more:
                return False
            raw += more


def _top_level_decides(decoder: Any, text: str, pos: int) -> bool | None:
    """True at a ``traceEvents`` key, False at an ``infer-opt/`` schema or the object's end,
    None when ``text`` ends first (read more)."""
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text):
            return None
        if text[pos] == "}":
            return False
        try:
            key, pos = decoder.raw_decode(text, pos)
            while pos < len(text) and text[pos] in " \t\r\n:":
                pos += 1
            if key == "traceEvents":
                return True
            value, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return None
        if pos >= len(text):  # a number may go on in the next read
            return None
        if key == "schema" and isinstance(value, str) and value.startswith("infer-opt/"):
            return False


def _traces(base: Path, new: Path) -> tuple | None:
    """The two trace analyses when the inputs are trace files or saved trace results; None when
    both are other results; a mix is refused."""
    from infer_opt.errors import InvalidInput

    sides = []
    for path in (base, new):
        if _is_trace_file(path):
            from infer_opt.trace.analyze import analyze

            sides.append(analyze([path]).result)
        else:
            loaded = load_result(path)
            sides.append(loaded.result if loaded.kind == "trace" else loaded.kind)
    kinds = ["trace" if not isinstance(s, str) else s for s in sides]
    if kinds == ["trace", "trace"]:
        return sides[0], sides[1]
    if "trace" in kinds:
        other = next(k for k in kinds if k != "trace")
        which = "NEW" if kinds[0] == "trace" else "BASE"
        where = new if which == "NEW" else base
        raise InvalidInput(which, str(where), f"a {other} result; a trace compares with a trace")
    return None


def register(app: typer.Typer) -> None:
    app.command("compare", help=HELP)(compare)
