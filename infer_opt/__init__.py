"""infer-opt: measure where inference time goes and decide which optimization pays."""

__version__ = "0.1.0"
