"""Every option name of every command, what its values are and its help: the inventory behind
issue 43 §5 (one spelling and one meaning per name). ``python scripts/option_inventory.py``
prints it; ``--drift`` prints only the names whose parameter types differ between commands
(ranges and help wording may differ; tests/cli/test_options.py holds what must not)."""

from __future__ import annotations

import sys
from collections import defaultdict

from infer_opt.cli.app import COMMANDS, _load_command


def commands():
    stack = [(name, _load_command(name)) for name in COMMANDS]
    while stack:
        path, command = stack.pop()
        yield path, command
        stack += [(f"{path} {n}", sub) for n, sub in getattr(command, "commands", {}).items()]


def main() -> None:
    by_name = defaultdict(list)
    for path, command in commands():
        for p in command.params:
            name = "/".join([*p.opts, *p.secondary_opts]) if p.param_type_name == "option" else p.name.upper()
            kind = "flag" if getattr(p, "is_flag", False) else type(p.type).__name__
            unit = getattr(p.type, "default_unit", "")
            by_name[name].append(
                (path, f"{kind}{' ' + unit if unit else ''}", " ".join((p.help or "").split()))
            )
    for name in sorted(by_name):
        uses = by_name[name]
        if "--drift" in sys.argv and len({kind for _, kind, _ in uses}) < 2:
            continue
        print(name)
        for path, kind, help_text in sorted(uses):
            print(f"    {path:26} {kind:18} {help_text[:110]}")


if __name__ == "__main__":
    main()
