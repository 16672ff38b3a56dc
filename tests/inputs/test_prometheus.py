from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.cost_models import capture_sizes as cs
from infer_opt.errors import InvalidInput
from infer_opt.inputs import prometheus as pm
from infer_opt.results.speculative import Costs, MetricsSource

FIXTURES = Path(__file__).parents[1] / "cost_models" / "fixtures"
ONE_MODEL = FIXTURES / "vllm_one_model.prom"
BEFORE = FIXTURES / "vllm_two_models_before.prom"
AFTER = FIXTURES / "vllm_two_models_after.prom"
RESTARTED = FIXTURES / "vllm_restarted.prom"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN = "Qwen/Qwen2.5-7B-Instruct"

#: what vLLM v0 exported: no drafts counter, no per-position counter
V0_METRICS = """# HELP vllm:spec_decode_draft_acceptance_rate Speulative token acceptance rate.
# TYPE vllm:spec_decode_draft_acceptance_rate gauge
vllm:spec_decode_draft_acceptance_rate{model_name="m"} 0.61
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 2210.0
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{model_name="m"} 3600.0
"""


def exposition(
    drafts: float = 10, draft_tokens: float = 30, accepted: float = 15, per_pos=(8, 5, 2), **labels: str
) -> str:
    """A minimal exposition of the four counters for one engine (untyped: no TYPE lines)."""
    base = ",".join(f'{k}="{v}"' for k, v in {"engine": "0", "model_name": "m", **labels}.items())
    lines = [
        f"vllm:spec_decode_num_drafts_total{{{base}}} {drafts}",
        f"vllm:spec_decode_num_draft_tokens_total{{{base}}} {draft_tokens}",
        f"vllm:spec_decode_num_accepted_tokens_total{{{base}}} {accepted}",
    ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{base},position="{i}"}} {a}'
        for i, a in enumerate(per_pos)
    ]
    return "\n".join(lines) + "\n"


def write(tmp_path: Path, text: str, name: str = "metrics.prom") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_counters_are_summed_over_engines():
    counters = pm.read_counters(ONE_MODEL)
    assert counters.drafts == 1800 + 900
    assert counters.draft_tokens == 5400 + 2700
    assert counters.accepted == 3270 + 1670
    assert counters.accepted_per_position == (1450 + 750, 1090 + 540, 730 + 380)
    assert counters.model_name == LLAMA and counters.engines == ("0", "1")


def test_one_model_gives_rates_as_from_metrics_does():
    result = pm.metrics_from_prometheus(ONE_MODEL)
    assert result.drafts == 2700 and result.accepted_total == 4940
    assert result.expected_tokens == pytest.approx(1 + 4940 / 2700)  # E[N] = 1 + A/D
    assert result.draft_acceptance_rate == pytest.approx(4940 / 8100)  # A / draft tokens
    assert [p.conditional for p in result.positions] == pytest.approx([2200 / 2700, 1630 / 2200, 1110 / 1630])
    assert [p.unconditional for p in result.positions] == pytest.approx(
        [2200 / 2700, 1630 / 2700, 1110 / 2700]
    )
    assert result.source == MetricsSource(str(ONE_MODEL), None, LLAMA, ("0", "1"))
    assert result.warnings == ()


def test_the_interval_between_two_snapshots_uses_the_differences():
    result = pm.metrics_from_prometheus(AFTER, before=BEFORE, model_name=LLAMA)
    assert result.drafts == 1200 and result.draft_tokens == 3600
    assert result.accepted_per_position == (980, 730, 500)
    assert result.expected_tokens == pytest.approx(1 + 2210 / 1200)
    assert result.draft_acceptance_rate == pytest.approx(2210 / 3600)
    assert result.positions[1].conditional == pytest.approx(730 / 980)
    assert result.source is not None and result.source.before == str(BEFORE)


def test_the_other_model_is_read_apart():
    result = pm.metrics_from_prometheus(AFTER, before=BEFORE, model_name=QWEN)
    assert result.drafts == 100 and result.accepted_per_position == (70, 40)
    assert result.source is not None and result.source.engines == ("0",)


def test_several_models_without_a_name_are_listed():
    with pytest.raises(InvalidInput, match="several models") as err:
        pm.metrics_from_prometheus(AFTER)
    assert err.value.option == "model_name"
    assert LLAMA in str(err.value) and QWEN in str(err.value)


def test_an_unknown_model_name_lists_the_present_ones():
    with pytest.raises(InvalidInput, match=LLAMA) as err:
        pm.metrics_from_prometheus(ONE_MODEL, model_name="gpt2")
    assert err.value.option == "model_name"


def test_a_counter_that_went_down_means_a_restart():
    with pytest.raises(InvalidInput, match="restarted") as err:
        pm.metrics_from_prometheus(RESTARTED, before=AFTER, model_name=LLAMA)
    assert err.value.option == "before"
    assert "vllm:spec_decode_num_drafts_total went down from 2700 to 150" in str(err.value)


def test_a_changed_number_of_positions_means_a_restart(tmp_path):
    before = write(tmp_path, exposition(per_pos=(1, 1)), "before.prom")
    after = write(tmp_path, exposition(drafts=20, draft_tokens=60, per_pos=(9, 5, 2)), "after.prom")
    with pytest.raises(InvalidInput, match="another draft length"):
        pm.metrics_from_prometheus(after, before=before)


def test_an_interval_without_rounds_is_refused(tmp_path):
    with pytest.raises(InvalidInput, match="no speculative rounds"):
        pm.metrics_from_prometheus(AFTER, before=AFTER, model_name=LLAMA)


def test_a_file_without_the_counters_names_what_is_missing(tmp_path):
    with pytest.raises(InvalidInput) as err:
        pm.metrics_from_prometheus(write(tmp_path, V0_METRICS))
    message = str(err.value)
    assert "vllm:spec_decode_num_drafts_total" in message
    assert "vllm:spec_decode_num_accepted_tokens_per_pos_total" in message
    assert "vllm:spec_decode_num_draft_tokens_total" not in message
    assert err.value.option == "prometheus" and str(tmp_path) in message


def test_a_file_that_is_not_an_exposition_is_refused(tmp_path):
    with pytest.raises(InvalidInput, match="not a Prometheus text exposition"):
        pm.metrics_from_prometheus(write(tmp_path, 'vllm:spec_decode_num_drafts_total{engine="0" 3\n'))


@pytest.mark.parametrize("value", ["12.5", "-3", "NaN", "+Inf", "1e308", "9007199254740994"])
def test_a_counter_must_be_a_whole_number(tmp_path, value):
    with pytest.raises(InvalidInput, match="whole number") as err:
        pm.metrics_from_prometheus(write(tmp_path, exposition(drafts=value)))
    assert "vllm:spec_decode_num_drafts_total" in str(err.value) and str(tmp_path) in str(err.value)


def test_positions_must_be_numbered_from_zero(tmp_path):
    text = exposition().replace('position="1"', 'position="one"')
    with pytest.raises(InvalidInput, match="positions must be labelled"):
        pm.metrics_from_prometheus(write(tmp_path, text))
    text = exposition().replace('position="1"', 'position="5"')
    with pytest.raises(InvalidInput, match=r"positions \[1, 3, 4\] are missing"):
        pm.metrics_from_prometheus(write(tmp_path, text))


def test_inconsistent_counters_name_the_file(tmp_path):
    with pytest.raises(InvalidInput, match="do not fit together") as err:
        pm.metrics_from_prometheus(write(tmp_path, exposition(per_pos=(8, 9, 2), accepted=19)))
    assert err.value.option == "prometheus"


def test_an_accepted_total_that_disagrees_is_reported(tmp_path):
    result = pm.metrics_from_prometheus(write(tmp_path, exposition(accepted=16)))
    assert [n.code for n in result.warnings] == ["prometheus_accepted_mismatch"]
    assert result.warnings[0].values == {"accepted": 16, "per_position": 15}


def test_costs_give_the_implied_speedup():
    costs = Costs(10e-3, 1e-3, 12e-3, 0.0, 1e-3)
    result = pm.metrics_from_prometheus(ONE_MODEL, costs=costs)
    assert result.speedup == pytest.approx(10e-3 * (1 + 4940 / 2700) / 16e-3)


def test_a_missing_file_is_one_error(tmp_path):
    with pytest.raises(InvalidInput, match="does not exist"):
        pm.metrics_from_prometheus(tmp_path / "nope.prom")
    with pytest.raises(InvalidInput, match="does not exist") as err:
        pm.metrics_from_prometheus(ONE_MODEL, before=tmp_path / "nope.prom")
    assert err.value.option == "before"


engine_counts = st.tuples(
    st.integers(1, 10_000),
    st.lists(st.integers(0, 1000), min_size=1, max_size=4).map(lambda xs: sorted(xs, reverse=True)),
)


@settings(max_examples=30)
@given(engines=st.lists(engine_counts, min_size=1, max_size=3))
def test_what_prometheus_client_writes_is_read_back_summed(tmp_path_factory, engines):
    """Counters written by prometheus_client's own exposition code (HELP, TYPE, _created samples)
    for several engines come back summed."""
    from prometheus_client import CollectorRegistry, Counter, generate_latest

    k = max(len(per_pos) for _, per_pos in engines)
    registry = CollectorRegistry()
    labels = ["model_name", "engine"]
    drafts = Counter("vllm:spec_decode_num_drafts", "drafts", labels, registry=registry)
    tokens = Counter("vllm:spec_decode_num_draft_tokens", "tokens", labels, registry=registry)
    accepted = Counter("vllm:spec_decode_num_accepted_tokens", "accepted", labels, registry=registry)
    per_pos = Counter(
        "vllm:spec_decode_num_accepted_tokens_per_pos", "per pos", [*labels, "position"], registry=registry
    )
    for e, (d, acc) in enumerate(engines):
        padded = [*acc, *[0] * (k - len(acc))]
        drafts.labels("m", str(e)).inc(d + max(padded))
        tokens.labels("m", str(e)).inc((d + max(padded)) * k)
        accepted.labels("m", str(e)).inc(sum(padded))
        for i, a in enumerate(padded):
            per_pos.labels("m", str(e), str(i)).inc(a)
    path = tmp_path_factory.mktemp("prom") / "metrics.prom"
    path.write_bytes(generate_latest(registry))
    counters = pm.read_counters(path)
    assert counters.drafts == sum(d + max(acc) for d, acc in engines)
    assert counters.accepted == sum(sum(acc) for _, acc in engines)
    assert len(counters.accepted_per_position) == k
    assert sum(counters.accepted_per_position) == counters.accepted
    assert counters.engines == tuple(sorted(str(e) for e in range(len(engines))))


def test_the_parser_is_imported_only_when_a_file_is_read():
    code = "import sys\nimport infer_opt.inputs.prometheus\nassert 'prometheus_client' not in sys.modules\n"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_series_given_twice_is_refused_not_counted_twice(tmp_path):
    """Two scrapes in one file: summing would double the drafts (E[N] 2.10 instead of 2.83)."""
    path = write(tmp_path, exposition() + exposition())
    with pytest.raises(InvalidInput, match="appears more than once") as err:
        pm.read_counters(path)
    assert err.value.option == "prometheus" and str(path) in str(err.value)
    assert 'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"}' in str(err.value)


@pytest.mark.parametrize("duplicated", [0, 1, 2, 3])
def test_any_one_repeated_line_is_refused(tmp_path, duplicated):
    lines = exposition().splitlines()
    path = write(tmp_path, "\n".join([*lines, lines[duplicated]]) + "\n")
    with pytest.raises(InvalidInput, match="appears more than once"):
        pm.read_counters(path)


def test_the_same_series_of_two_engines_is_two_series(tmp_path):
    counters = pm.read_counters(write(tmp_path, exposition() + exposition(engine="1")))
    assert counters.drafts == 20 and len(counters.series) == 2 * (3 + 3)


def test_one_engine_going_back_is_named_though_the_sum_went_up(tmp_path):
    """Engine 1 restarted (its counters back near 0) while engine 0 went on: the sums still
    rise, the interval of engine 1 is not one."""
    before = write(tmp_path, exposition() + exposition(engine="1", drafts=50, draft_tokens=150), "b.prom")
    after_text = exposition(drafts=100, draft_tokens=300) + exposition(engine="1", drafts=5, draft_tokens=15)
    after = write(tmp_path, after_text, "a.prom")
    with pytest.raises(InvalidInput, match="restarted") as err:
        pm.metrics_from_prometheus(after, before=before)
    assert err.value.option == "before"
    series = 'vllm:spec_decode_num_drafts_total{engine="1",model_name="m"}'
    assert f"{series} went down from 50 to 5" in str(err.value)


def test_an_engine_gone_in_the_later_snapshot_is_named(tmp_path):
    before = write(tmp_path, exposition() + exposition(engine="1"), "b.prom")
    later = exposition(drafts=100, draft_tokens=300, accepted=150, per_pos=(80, 50, 20))
    after = write(tmp_path, later, "a.prom")
    with pytest.raises(InvalidInput, match=r'engine="1".*is gone'):
        pm.metrics_from_prometheus(after, before=before)


@given(
    start=st.lists(st.integers(0, 1000), min_size=2, max_size=4),
    growth=st.lists(st.integers(0, 1000), min_size=4, max_size=4),
)
@settings(max_examples=30, deadline=None)
def test_engines_that_only_grow_give_the_summed_differences(tmp_path_factory, start, growth):
    root = tmp_path_factory.mktemp("grow")
    before = "".join(exposition(drafts=d, draft_tokens=3 * d, engine=str(e)) for e, d in enumerate(start))
    after = "".join(
        exposition(drafts=d + g, draft_tokens=3 * (d + g), engine=str(e))
        for e, (d, g) in enumerate(zip(start, growth, strict=False))
    )
    b, a = write(root, before, "b.prom"), write(root, after, "a.prom")
    counters = pm.interval(pm.read_counters(b), pm.read_counters(a), source=str(b))
    assert counters.drafts == sum(growth[: len(start)])
    assert counters.draft_tokens == 3 * counters.drafts


# ----------------------------------------------------------------------------- histogram view


def _histogram(at_one: int, total: int, engine: str = "") -> pm.Histogram:
    labels = f'engine="{engine}",' if engine else ""
    return pm.histogram_from_text(
        f'vllm:iteration_tokens_total_bucket{{{labels}le="1.0"}} {at_one}\n'
        f'vllm:iteration_tokens_total_bucket{{{labels}le="8.0"}} {total}\n'
        f'vllm:iteration_tokens_total_bucket{{{labels}le="+Inf"}} {total}\n',
        source="m.prom",
    )


def test_histogram_range_and_interval():
    before = pm.histogram_from_text(
        "# TYPE vllm:iteration_tokens_total histogram\n"
        'vllm:iteration_tokens_total_bucket{le="1.0"} 10\n'
        'vllm:iteration_tokens_total_bucket{le="8.0"} 20\n'
        'vllm:iteration_tokens_total_bucket{le="+Inf"} 20\n'
        "vllm:iteration_tokens_total_count 20\nvllm:iteration_tokens_total_sum 60\n",
        source="b",
    )
    hi, lo, overflow = cs.histogram_distributions(before, source="b")
    assert hi.sizes.tolist() == [1, 8] and lo.sizes.tolist() == [1, 2] and overflow == 0
    with pytest.raises(InvalidInput, match="went down"):
        pm.histogram_interval(before, _histogram(5, 20), source="b")
    with pytest.raises(InvalidInput, match="no decode steps"):
        cs.histogram_distributions(pm.histogram_interval(before, before, source="b"), source="b")


@pytest.mark.parametrize("labels", ["", 'engine="0",'])
def test_a_histogram_series_given_twice_is_refused(labels):
    """Two scrapes concatenated in one file would count every step twice."""
    one = (
        f'vllm:iteration_tokens_total_bucket{{{labels}le="1.0"}} 10\n'
        f'vllm:iteration_tokens_total_bucket{{{labels}le="+Inf"}} 20\n'
    )
    with pytest.raises(InvalidInput, match="appears more than once") as err:
        pm.histogram_from_text(one + one, source="m.prom")
    assert err.value.option == "prometheus" and "m.prom" in str(err.value)


def test_the_same_buckets_of_two_engines_are_summed():
    text = "".join(
        f'vllm:iteration_tokens_total_bucket{{engine="{e}",le="{le}"}} {n}\n'
        for e in "01"
        for le, n in (("1.0", 10), ("+Inf", 20))
    )
    assert pm.histogram_from_text(text, source="m.prom").cumulative == (20.0, 40.0)


def test_a_histogram_engine_gone_in_the_later_snapshot_is_a_restart():
    """Engine 1's buckets missing later: the server restarted, even where the sums grew."""
    before = _histogram(5, 10, engine="1")
    after = _histogram(50, 100, engine="0")
    with pytest.raises(InvalidInput, match=r'engine="1".*is gone'):
        pm.histogram_interval(before, after, source="b.prom")
    assert pm.histogram_interval(_histogram(5, 10), _histogram(7, 30), source="b").cumulative == (2, 20, 20)
