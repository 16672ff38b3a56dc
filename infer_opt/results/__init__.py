"""The result kinds: one torch-free schema module per kind, named after it.

A kind's module holds its result dataclass and its row classes, nothing that measures or
computes them: producers (profilers, cost models, the trace reader) build a kind, views and
plots read it, and loading or rendering a saved result imports no torch.
"""
