"""Plots: matplotlib with the Agg backend, one shared style (:mod:`._style`), one module
per result kind. Imported lazily: a command that plots nothing never loads matplotlib."""
