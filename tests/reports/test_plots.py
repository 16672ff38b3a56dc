"""Every plot kind renders from a saved result: a non-empty PNG per figure, and the same
input gives the same bytes."""

from __future__ import annotations

import pytest

from infer_opt.errors import InvalidInput
from infer_opt.registry import KINDS, plotter
from infer_opt.reports.plots import write_plots
from tests.reports.fixtures import fixture

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


PLOTTED = sorted(k for k, entry in KINDS.items() if entry.plot)


def test_every_plotter_names_a_known_kind_and_an_importable_function():
    for kind in PLOTTED:
        assert callable(plotter(kind))
    assert plotter("attention-window") is None


@pytest.mark.parametrize("kind", PLOTTED)
def test_plot_kind_writes_non_empty_pngs(kind, tmp_path):
    target = tmp_path / f"{kind}.png"
    written = write_plots(fixture(kind), target)
    assert written[0] == target
    for path in written:
        data = path.read_bytes()
        width, height = _png_size(data)
        assert len(data) > 10_000, path.name
        assert 300 <= width <= 2000 and 250 <= height <= 1500, (path.name, width, height)


def test_same_result_gives_the_same_bytes(tmp_path):
    first = write_plots(fixture("compare"), tmp_path / "a.png")[0].read_bytes()
    second = write_plots(fixture("compare"), tmp_path / "b.png")[0].read_bytes()
    assert first == second


def test_a_kind_without_a_plot_is_refused(tmp_path):
    with pytest.raises(InvalidInput, match="have no plot"):
        write_plots(fixture("attention-window"), tmp_path / "x.png")


def test_speedup_heat_map_colour_bar_is_drawn(tmp_path):
    """A colour-bar tick just outside the norm's range (0.45 < vmin 0.4545 here) made
    matplotlib produce NaN transforms and a blank bar; the render must be warning-free."""
    import warnings

    from infer_opt.cost_models import speculative as model
    from infer_opt.reports.plots.speculative import plot_speedup_grid
    from tests.helpers import invoke

    run = invoke(
        "speculative",
        "speedup",
        "--k",
        "3",
        "--alpha",
        "0.8",
        "--target-cost",
        "10ms",
        "--draft-cost",
        "1ms",
        "--verify-cost",
        "12ms",
        "--out",
        str(tmp_path / "s.json"),
    )
    assert run.exit_code == 0, run.stderr
    from infer_opt.results import load_result

    result = load_result(tmp_path / "s.json").result
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        path = plot_speedup_grid(result, model.speedup_grid(result), tmp_path / "grid.png")
    assert path.stat().st_size > 0


def test_the_trace_roofline_legend_shows_only_the_colours_drawn(monkeypatch):
    """A device without peaks draws every op grey: its legend says so, and no compute/bandwidth
    colour stands in it for dots that are not there; a long op name is cut on the bar chart."""
    import dataclasses

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from infer_opt.reports.plots import trace as trace_plot

    result = fixture("trace")
    ops = tuple(dataclasses.replace(g, bound="unknown", name="x" * 200) for g in result.ops)
    result = dataclasses.replace(result, ops=ops)
    fig, axes = plt.subplots(2, 1)
    trace_plot._roofline(axes[0], result)
    trace_plot._top_ops(axes[1], result)
    labels = [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert not {"compute", "bandwidth", "launch"} & set(labels)
    assert any("unknown" in label for label in labels)
    texts = axes[1].texts  # each op's label on its bar, no tick label to push the panels right
    assert len(texts) == min(len(ops), trace_plot.TOP_OPS) and not any(
        t.get_text() for t in axes[1].get_yticklabels()
    )
    assert all(len(t.get_text()) <= trace_plot.LABEL_CHARS for t in texts)
    assert all(0 <= t.get_position()[0] <= axes[1].get_xlim()[1] for t in texts)
    plt.close(fig)
