"""``infer-opt compare``: two profiles (or two kernel-suite runs), per operator and category,
and which changes exceed the noise."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infer_opt.cli.output import with_output
from infer_opt.cli.types import Count, Fraction, InputFile, Number
from infer_opt.cost_models import compare as model
from infer_opt.results import load_result

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


@with_output(plot=True)
def compare(
    base: Annotated[
        Path, typer.Argument(metavar="BASE", click_type=InputFile(), help="The baseline result (.json).")
    ],
    new: Annotated[
        Path,
        typer.Argument(metavar="NEW", click_type=InputFile(), help="The result to compare with it (.json)."),
    ],
    threshold: Annotated[
        float,
        typer.Option(
            "--threshold", click_type=Fraction(0, 1), help="Smallest change worth reporting: 5% or 0.05."
        ),
    ] = "5%",
    alpha: Annotated[
        float,
        typer.Option(
            "--alpha",
            click_type=Number(0, 1, low_open=True, high_open=True),
            help="Significance level of the Mann-Whitney U test, in (0, 1).",
        ),
    ] = 0.05,
    force: Annotated[
        bool, typer.Option("--force", help="Compare even if model, shapes, dtype or device differ.")
    ] = False,
    seed: Annotated[int, typer.Option("--seed", click_type=Count(0), help="Seed of the bootstrap.")] = 0,
) -> model.CompareResult:
    loaded_base, loaded_new = load_result(base), load_result(new)
    distinct = base.name != new.name
    return model.compare_results(
        loaded_base.result,
        loaded_new.result,
        base_name=base.name if distinct else str(base),
        new_name=new.name if distinct else str(new),
        force=force,
        alpha=alpha,
        threshold=threshold,
        seed=seed,
    )


def register(app: typer.Typer) -> None:
    app.command("compare", help=HELP)(compare)
