"""One spelling and one meaning per option name across commands (issue 43 §5), and the old
spellings of the renamed ones still working for one release, said on stderr."""

from __future__ import annotations

from collections import defaultdict

import pytest

from infer_opt.cli.app import COMMANDS, _load_command
from infer_opt.cli.common import RENAMED, renamed_spellings
from tests.helpers import invoke, parse_command_line

#: what a value given to an option is, by its parameter type: a name's options must agree. A
#: type that reads a bare whole number as a count (``auto`` or ``200ms`` besides) is a count.
#: A new type must be added here, saying what its values are.
MEANING = {
    "Count": "count",
    "KMax": "count",
    "Reps": "count",
    "Warmup": "count",
    "Number": "number",
    "Fraction": "fraction",
    "Size": "bytes",
    "Bandwidth": "bytes per second",
    "FlopRate": "FLOP/s",
    "NumberList": "numbers",
    "CountList": "counts",
    "Bounds": "counts",
    "CountRange": "counts",
    "Sweep": "parameter=values",
    "VerifyModel": "durations A + B·k",
    "PartSpec": "name=fraction:speedup",
    "Choice": "word",
    "StringParamType": "word",
    "InputFile": "file to read",
    "CostSource": "file to read",
    "TyperPath": "path",
    "OutputFile": "file to write",
    "TracePath": "file to write",
    "OutputDir": "folder to write",
}


def _commands():
    """Every leaf command of the tree, by its path (``tune speculative``), and the groups."""
    stack = [(name, _load_command(name)) for name in COMMANDS]
    while stack:
        path, command = stack.pop()
        yield path, command
        stack += [(f"{path} {n}", sub) for n, sub in getattr(command, "commands", {}).items()]


def _meaning(param) -> str:
    if param.is_flag:
        return "flag"
    kind = type(param.type).__name__
    if kind == "Duration":
        return f"duration (bare number = {param.type.default_unit})"
    assert kind in MEANING, f"{param.opts}: add {kind} to MEANING (what are its values?)"
    return MEANING[kind]


def _options_by_name():
    by_name = defaultdict(list)
    for path, command in _commands():
        for param in command.params:
            if param.param_type_name == "option":
                for flag in [*param.opts, *param.secondary_opts]:
                    if flag.startswith("--"):
                        by_name[flag].append((path, param))
    return by_name


def test_every_option_name_has_one_meaning_in_every_command():
    by_name = _options_by_name()
    assert len(by_name) > 100
    drift = {}
    for flag, uses in by_name.items():
        meanings = {_meaning(p) for _, p in uses}
        if len(meanings) > 1:
            drift[flag] = sorted((path, _meaning(p)) for path, p in uses)
    assert drift == {}, drift


def test_an_option_name_picks_from_one_set_of_words():
    """``--backend`` once meant torch.compile's backends in one command and torch.distributed's in
    another: two options of one name with choices share some of them."""
    for flag, uses in _options_by_name().items():
        sets = [set(p.type.choices) for _, p in uses if hasattr(p.type, "choices")]
        for a in sets:
            assert all(a & b for b in sets), (flag, [path for path, _ in uses], sets)


def test_the_meaning_check_sees_a_drift():
    """The tree before issue 43: ``--target-cost`` a duration in ``speculative speedup``, a cost
    file in ``tune speculative``."""
    from infer_opt.cli.tune import CostSource
    from infer_opt.cli.types import Duration

    class Param:
        is_flag = False

        def __init__(self, kind):
            self.type = kind

    assert _meaning(Param(Duration("ms"))) != _meaning(Param(CostSource()))
    assert _meaning(Param(Duration("ms"))) != _meaning(Param(Duration("s")))


@pytest.mark.parametrize("command", sorted(RENAMED))
def test_a_renamed_option_is_gone_from_help_and_its_new_name_is_there(command):
    tree = dict(_commands())
    flags = {f for p in tree[command].params for f in [*p.opts, *p.secondary_opts]}
    for old, new in RENAMED[command].items():
        assert new in flags and old not in flags, (command, old, new)


def test_renamed_spellings_writes_the_new_one_and_says_so_once(capsys):
    args = ["--cost", "a.csv", "--cost=b.csv", "--eager-cost", "c.csv", "--", "--cost"]
    assert renamed_spellings("tune capture-sizes", args) == [
        "--cost-file", "a.csv", "--cost-file=b.csv", "--eager-cost-file", "c.csv", "--", "--cost",
    ]  # fmt: skip
    said = capsys.readouterr().err.splitlines()
    assert said == [
        "warning: `tune capture-sizes --cost` is now `--cost-file`; the old spelling goes in the next "
        "release.",
        "warning: `tune capture-sizes --eager-cost` is now `--eager-cost-file`; the old spelling goes in "
        "the next release.",
    ]
    assert renamed_spellings("buckets", ["--cost", "quadratic"]) == ["--cost", "quadratic"]


def test_an_old_spelling_still_works_for_one_release():
    spec = [
        "speculative",
        "speedup",
        "--k",
        "3",
        "--alpha",
        "0.8",
        "--target-cost",
        "10",
        "--draft-cost",
        "1",
    ]
    spec.append("--json")
    new = invoke(*spec, "--k-max", "6")
    old = invoke(*spec, "--sweep-k", "6")
    assert new.exit_code == 0 and old.exit_code == 0, old.stderr
    assert old.json()["result"] == new.json()["result"]
    assert "is now" not in new.stderr
    assert "`speculative speedup --sweep-k` is now `--k-max`" in old.stderr


#: a value for each renamed option (``{file}``: a file that exists)
OLD_VALUES = {
    "--resume": [], "--grid": ["tiny"], "--alpha": ["0.1"], "--backend": ["gloo"], "--sweep-k": ["4"],
    "--target": ["2"], "--calls": ["1,2"], "--cost": ["{file}"], "--eager-cost": ["{file}"],
    "--target-cost": ["{file}"], "--draft-cost": ["{file}"],
}  # fmt: skip
#: what the command needs besides
REQUIRED = {
    "ab": ["--base", "true", "--new", "true"],
    "compare": ["{file}", "{file}"],
    "tune speculative": ["--target-cost-file", "{file}", "--draft-cost-file", "{file}"],
}


@pytest.mark.parametrize(
    ("command", "old"), [(c, old) for c, renamed in sorted(RENAMED.items()) for old in renamed]
)
def test_every_old_spelling_parses_as_its_new_one(tmp_path, capsys, command, old):
    path = tmp_path / "x.csv"
    path.write_text("batch_size,time_ms\n1,1\n")
    value, base = ([v.format(file=path) for v in vs] for vs in (OLD_VALUES[old], REQUIRED.get(command, [])))
    new = RENAMED[command][old]
    as_new = parse_command_line([*command.split(), *base, new, *value]).params
    assert "is now" not in capsys.readouterr().err
    as_old = parse_command_line([*command.split(), *base, old, *value]).params
    assert as_old == as_new
    assert f"`{command} {old}` is now `{new}`" in capsys.readouterr().err
