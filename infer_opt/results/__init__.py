"""Every result kind: one torch-free schema module per kind, named after it, and their base.

A kind's module holds its result dataclass and its row classes, nothing that measures or
computes them: producers (profilers, cost models, the trace reader) build a kind, views and
plots read it, and loading or rendering a saved result imports no torch. :mod:`.base` holds
the common :class:`Result` and the versioned JSON envelope, re-exported here.
"""

from infer_opt.results.base import (  # noqa: F401 (the package re-exports the base)
    COMMAND_ENV,
    FieldError,
    LoadedResult,
    Result,
    dumps,
    envelope,
    environment_info,
    load_result,
    number_problems,
    parse_envelope,
    result_class,
    save_result,
    to_jsonable,
)
