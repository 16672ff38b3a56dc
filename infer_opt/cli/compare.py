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
from infer_opt.requests import CompareRequest

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
    significance: AlphaOpt = 0.05,
    force: ForceOpt = False,
    seed: SeedOpt = 0,
    noise_floor: NoiseFloorOpt = None,
) -> Any:
    request = CompareRequest(
        base, new, threshold=threshold, significance=significance, force=force, seed=seed,
        noise_floor=noise_floor,
    )  # fmt: skip
    return model.run(request)


def register(app: typer.Typer) -> None:
    app.command("compare", help=HELP)(compare)
