"""``infer-opt ab``: run two commands alternately (A B A B …) and compare their results with
run-level statistics; the same command twice (an A/A) measures and saves the noise floor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infer_opt.cli.common import option, progress_bar
from infer_opt.cli.compare import AlphaOpt, ForceOpt, SeedOpt, ThresholdOpt
from infer_opt.cli.output import with_output
from infer_opt.cli.types import Count
from infer_opt.requests import MAX_AB_ROUNDS, AbRequest

HELP = (
    "Run two infer-opt kernels or profile command lines alternately, A B A B … for --rounds rounds "
    "(each a new process writing its result), then compare all BASE runs with all NEW runs: drift "
    "falls on both sides alike, and the verdicts test each change against the spread between runs.\n\n"
    "Per case/operator: t test on the log run medians (between-run variance pooled over both sides, "
    "at least its family's); faster/slower iff p < --significance and max(r, 1/r) - 1 >= --threshold.\n\n"
    "Each command is split like a shell would (no shell runs it) and gets --out FILE appended; a "
    "leading 'infer-opt' runs this infer-opt, anything else (another environment's infer-opt) runs "
    "as given. --base-env/--new-env KEY=VALUE set environment variables per side.\n\n"
    "The same command on both sides (an A/A) measures this machine's run-to-run noise per case "
    "family and saves it (per device, threads and dtype) as the noise floor compare uses for "
    "single-run comparisons.\n\n"
    "Examples:\n\n"
    "  infer-opt ab --base 'infer-opt kernels --only matmul --threads 1' --new 'infer-opt kernels "
    "--only matmul --threads 2'\n\n"
    "  infer-opt ab --base 'infer-opt kernels --suite quick --threads 1' --new 'infer-opt kernels "
    "--suite quick --threads 1'   (A/A: saves the noise floor)\n\n"
    "  infer-opt ab --base 'infer-opt profile --threads 1' --new 'infer-opt profile --threads 1' "
    "--new-env OMP_PROC_BIND=close --rounds 5 --out ab.json\n"
)


BaseOpt = option(str, "--base", help="The baseline command line (quoted).")
NewOpt = option(str, "--new", help="The command line to compare with it (quoted).")
RoundsOpt = option(
    int,
    "--rounds",
    parse=Count(1, MAX_AB_ROUNDS),
    help="Rounds of A then B: 2 or more give a run-level t test (3 or more to trust it); one "
    "leans on the within-run spread and the noise floor.",
)
BaseEnvOpt = option(list[str] | None, "--base-env", help="Environment for BASE, KEY=VALUE (repeatable).")
NewEnvOpt = option(list[str] | None, "--new-env", help="Environment for NEW, KEY=VALUE (repeatable).")
FolderOpt = option(
    Path | None,
    "--dir",
    help="Folder for the rounds' result files (kept). Default: a new folder in the cache.",
)
SaveFloorOpt = option(
    bool, "--save-floor/--no-save-floor", help="After an A/A, save the measured noise floor."
)


@with_output(plot=True)
def ab(
    base: BaseOpt,
    new: NewOpt,
    rounds: RoundsOpt = 3,
    base_env: BaseEnvOpt = None,
    new_env: NewEnvOpt = None,
    dir: FolderOpt = None,
    threshold: ThresholdOpt = "5%",
    significance: AlphaOpt = 0.05,
    force: ForceOpt = False,
    save_floor: SaveFloorOpt = True,
    seed: SeedOpt = 0,
) -> Any:
    from infer_opt.profilers import ab as core

    request = AbRequest(
        base=base, new=new, rounds=rounds, base_env=base_env, new_env=new_env, dir=dir, threshold=threshold,
        significance=significance, force=force, save_floor=save_floor, seed=seed,
    )  # fmt: skip
    with progress_bar("ab") as update:
        return core.run(request, progress=update, said=lambda line: typer.echo(line, err=True))


def register(app: typer.Typer) -> None:
    app.command("ab", help=HELP)(ab)
