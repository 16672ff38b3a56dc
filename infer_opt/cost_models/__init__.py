"""Pure cost models: stdlib + numpy (scipy where it is the right tool, imported lazily).
Never import torch, typer, rich, pandas or matplotlib here."""
