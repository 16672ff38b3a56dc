"""Command-line interface (typer). Each module parses and validates one command or group,
calls one core function and hands the result to :mod:`infer_opt.reports`.
Heavy imports (torch, pandas, scipy, matplotlib) happen inside command bodies only."""
