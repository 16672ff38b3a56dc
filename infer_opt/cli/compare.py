"""``infer-opt compare``: two profiles (or two kernel-suite runs), per operator and category,
and which changes exceed the noise."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infer_opt.cli.common import CsvOpt, FormatOpt, JsonOpt, MarkdownOpt, OutOpt, PlotOpt, emit
from infer_opt.cost_models import compare as model
from infer_opt.results import load_result
from infer_opt.units import parse_float, parse_fraction, parse_int

# Rich keeps single newlines in help text, so each paragraph is one (concatenated) line.
HELP = (
    "Compare two saved profiles (or two kernel-suite runs) of the same model or suite: per operator "
    "(case) and category, which changes exceed the noise.\n\n"
    "r = median(new)/median(base) with a bootstrap CI; faster/slower iff the two-sided Mann-Whitney U "
    "test on the repetition samples gives p < --alpha and max(r, 1/r) - 1 >= --threshold.\n\n"
    "Headline as in hyperfine: NEW ran 1.52 ± 0.04 times faster than BASE (the step time for "
    "profiles, the geometric mean over the cases for kernel suites). Results of different models, "
    "shapes, dtypes or devices (suites) are refused unless --force.\n\n"
    "Examples:\n\n"
    "  infer-opt profile --out base.json   (change something)   infer-opt profile --out new.json\n\n"
    "  infer-opt compare base.json new.json\n\n"
    "  infer-opt compare base.json new.json --threshold 10% --markdown diff.md --plot diff.png\n\n"
    "  infer-opt compare kernels-old.json kernels-new.json --json\n"
)


def compare(
    base: Annotated[Path, typer.Argument(metavar="BASE", help="The baseline result (.json).")],
    new: Annotated[Path, typer.Argument(metavar="NEW", help="The result to compare with it (.json).")],
    threshold: Annotated[
        str, typer.Option("--threshold", help="Smallest change worth reporting: 5% or 0.05.")
    ] = "5%",
    alpha: Annotated[
        str, typer.Option("--alpha", help="Significance level of the Mann-Whitney U test, in (0, 1).")
    ] = "0.05",
    force: Annotated[
        bool, typer.Option("--force", help="Compare even if model, shapes, dtype or device differ.")
    ] = False,
    seed: Annotated[str, typer.Option("--seed", help="Seed of the bootstrap.")] = "0",
    json_out: JsonOpt = False,
    out: OutOpt = None,
    markdown: MarkdownOpt = None,
    csv: CsvOpt = None,
    fmt: FormatOpt = None,
    plot: PlotOpt = None,
) -> None:
    t = parse_fraction(threshold, option="--threshold")
    a = parse_float(alpha, option="--alpha", low=0, high=1, low_open=True, high_open=True)
    s = parse_int(seed, option="--seed", low=0)
    loaded_base, loaded_new = load_result(base), load_result(new)
    result = model.compare_results(
        loaded_base.result,
        loaded_new.result,
        base_name=base.name if base.name != new.name else str(base),
        new_name=new.name if base.name != new.name else str(new),
        force=force,
        alpha=a,
        threshold=t,
        seed=s,
    )
    emit(result, json_out=json_out, out=out, markdown=markdown, csv=csv, fmt=fmt, plot=plot)


def register(app: typer.Typer) -> None:
    app.command("compare", help=HELP)(compare)
