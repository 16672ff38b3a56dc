"""Rendering only: every result kind builds one :class:`~infer_opt.reports.view.View`
(its summary, table rows, notes and warnings) and each format renders that view."""
