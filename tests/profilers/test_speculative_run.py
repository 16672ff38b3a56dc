from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.checks import speculative_sampler
from infer_opt.cost_models import speculative as calc
from infer_opt.errors import InvalidInput
from infer_opt.profilers import models, speculative_run
from infer_opt.profilers.speculative_costs import ModelPair
from infer_opt.profilers.timing import Measurement
from infer_opt.results import dumps, parse_envelope
from infer_opt.stats import Summary

VOCAB_FACTORY = """
import torch
from infer_opt.profilers import models


def make():
    config = models.TransformerConfig("mini", 1000, 32, 1, 2, 2, 64, 128)
    return models.DecoderLM(config).eval(), torch.zeros(1, 4, dtype=torch.long)
"""


pytestmark = pytest.mark.usefixtures("one_thread")


def small_model(
    *, vocab: int = 64, layers: int = 2, std: float = 0.3, seed: int = 1, positions: str = "learned"
) -> models.DecoderLM:
    """A small decoder with peaked (std 0.3) random weights from ``seed``, so that its layers
    disagree; norms 1, biases 0."""
    rotary = positions == "rotary"
    config = models.TransformerConfig(
        "small",
        vocab,
        16,
        layers,
        2,
        1 if rotary else 2,
        32,
        128,
        norm="rmsnorm" if rotary else "layernorm",
        positions=positions,  # type: ignore[arg-type]
    )
    model = models.DecoderLM(config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.ndim > 1:
                param.normal_(0.0, std, generator=generator)
            elif name.endswith("bias"):
                param.zero_()  # not torch's random default: the same seed gives the same model
    return model.eval()


def prefilled(pair: ModelPair, prompt: list[int], length: int = 64) -> tuple[models.KVCache, models.KVCache]:
    t_cache, d_cache = speculative_run.new_caches(pair, length)
    speculative_run.prefill_pair(pair, t_cache, d_cache, prompt)
    return t_cache, d_cache


# ----------------------------------------------------------------------------- the cache and self:N


def test_a_cropped_cache_decodes_as_if_the_dropped_tokens_were_never_fed():
    model = small_model()
    cache = model.new_cache(1, 32)
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3, 4, 5, 6]]), cache)
        cache.crop(3)
        after_crop = model(torch.tensor([[9]]), cache)
        fresh = model.new_cache(1, 32)
        model(torch.tensor([[1, 2, 3]]), fresh)
        expected = model(torch.tensor([[9]]), fresh)
    assert cache.length == 4
    torch.testing.assert_close(after_crop, expected)


def test_a_cache_only_crops_to_a_shorter_length():
    cache = small_model().new_cache(1, 8)
    cache.advance(3)
    with pytest.raises(ValueError, match="crop"):
        cache.crop(4)
    with pytest.raises(ValueError, match="crop"):
        cache.crop(-1)


def test_a_shared_cache_views_the_first_layers_of_another_with_its_own_length():
    model = small_model(layers=3)
    cache = model.new_cache(1, 16)
    shared = models.KVCache.sharing(cache, 2)
    assert len(shared.keys) == 2 and shared.shares is cache and shared.max_len == 16
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]]), cache)
    assert shared.length == 0 and cache.length == 3
    assert shared.keys[1].data_ptr() == cache.keys[1].data_ptr()
    assert torch.count_nonzero(shared.values[0][:, :, :3]) > 0  # the target's writes, seen through the view


def _tokens_fed_to_the_draft(pair: ModelPair) -> list[int]:
    """How many tokens each draft forward was fed while decoding 20 tokens with k = 3."""
    fed: list[int] = []
    handle = pair.draft.register_forward_pre_hook(lambda _module, args: fed.append(args[0].shape[1]))
    prompt = [4, 2]
    t_cache, d_cache = prefilled(pair, prompt)
    trace = speculative_run.decode_speculative(
        pair, t_cache, d_cache, prompt, 20, 3, speculative_run.Decoding(), np.random.default_rng(0)
    )
    handle.remove()
    assert len(trace.tokens) == 20
    return fed


def test_an_early_exit_draft_shares_the_targets_cache_and_never_catches_up():
    target = small_model(layers=3)
    pair = ModelPair(target, speculative_run.EarlyExitLM(target, 1), "t", "self:1", 64)
    t_cache, d_cache = speculative_run.new_caches(pair, 32)
    assert d_cache.shares is t_cache
    assert set(_tokens_fed_to_the_draft(pair)) == {1}


def test_a_separate_draft_catches_up_after_a_fully_accepted_round():
    target = small_model(layers=3)
    twin = small_model(layers=3)  # the same weights (same seed): every draft is accepted
    pair = ModelPair(target, twin, "t", "twin", 64)
    assert speculative_run.new_caches(pair, 32)[1].shares is None
    assert set(_tokens_fed_to_the_draft(pair)) == {1, 2}


@pytest.mark.parametrize("positions", ["learned", "rotary"])
def test_early_exit_is_the_targets_first_layers_norm_and_head(positions):
    target = small_model(layers=3, positions=positions)
    draft = speculative_run.EarlyExitLM(target, 2)
    assert draft.config.n_layers == 2 and draft.config.name == "self:2"
    assert {id(p) for p in draft.parameters()} <= {id(p) for p in target.parameters()}
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    with torch.no_grad():
        x = target.embed(ids)
        rotary = None
        if positions == "learned":
            x = x + target.pos_embed.weight[:5]
        else:
            rotary = (target.rope_cos[:5], target.rope_sin[:5])
        for i, block in enumerate(target.blocks[:2]):
            x = block(x, i, None, rotary)
        expected = target.lm_head(target.final_norm(x))
        torch.testing.assert_close(draft(ids), expected)
        assert not torch.allclose(draft(ids), target(ids))


def test_self_draft_loads_with_the_targets_weights():
    pair = speculative_run.load_run_pair("tiny", "self:1", device="cpu", dtype=torch.float32)
    assert pair.draft_name == "self:1" and pair.vocab_size == 1024
    assert pair.draft.lm_head.weight is pair.target.lm_head.weight
    assert "first 1 of 2 layers" in pair.draft_note


@pytest.mark.parametrize("draft", ["self:0", "self:2", "self:x", "self:", "self:-1"])
def test_self_draft_needs_fewer_layers_than_the_target(draft):
    with pytest.raises(InvalidInput, match=r"1 <= N < 2") as err:
        speculative_run.load_run_pair("tiny", draft, device="cpu", dtype=torch.float32)
    assert err.value.option == "draft"


def test_a_draft_with_another_vocabulary_is_refused(tmp_path):
    path = tmp_path / "mini.py"
    path.write_text(VOCAB_FACTORY)
    with pytest.raises(InvalidInput, match="share the target's vocabulary"):
        speculative_run.load_run_pair("tiny", f"{path}:make", device="cpu", dtype=torch.float32)


# ----------------------------------------------------------------------------- exactness


def _greedy_pair(draft_kind: str) -> ModelPair:
    target = small_model(layers=3)
    draft = {
        "early exit": lambda: speculative_run.EarlyExitLM(target, 1),
        "the target itself": lambda: target,
        "an unrelated model": lambda: small_model(layers=1, seed=7),
    }[draft_kind]()
    return ModelPair(target, draft, "target", draft_kind, 64)


@pytest.mark.parametrize("draft_kind", ["early exit", "the target itself", "an unrelated model"])
@settings(max_examples=15)
@given(
    k=st.integers(1, 6),
    new_tokens=st.integers(1, 24),
    prompt=st.lists(st.integers(0, 63), min_size=1, max_size=8),
)
def test_greedy_speculative_output_is_the_greedy_plain_output(draft_kind, k, new_tokens, prompt):
    pair = _greedy_pair(draft_kind)
    t_cache, d_cache = prefilled(pair, prompt)
    greedy = speculative_run.Decoding()
    plain = speculative_run.decode_plain(
        pair.target, t_cache, prompt, new_tokens, greedy, np.random.default_rng(0)
    )
    trace = speculative_run.decode_speculative(
        pair, t_cache, d_cache, prompt, new_tokens, k, greedy, np.random.default_rng(0)
    )
    assert trace.tokens == plain
    assert len(trace.tokens) == new_tokens
    if draft_kind == "the target itself" and new_tokens > k:
        assert trace.accepted_per_position == [trace.full_rounds] * k  # every draft accepted


def test_greedy_rounds_commit_accepted_drafts_plus_one():
    pair = _greedy_pair("early exit")
    prompt = [5, 9, 2]
    t_cache, d_cache = prefilled(pair, prompt)
    trace = speculative_run.decode_speculative(
        pair, t_cache, d_cache, prompt, 30, 3, speculative_run.Decoding(), np.random.default_rng(0)
    )
    accepted = sum(trace.accepted_per_position)
    assert 0 < accepted < 3 * trace.full_rounds  # this pair accepts some drafts, not all
    assert t_cache.length == len(prompt) + 30 - 1  # the cache holds every committed token but the last


def _target_sequence_distribution(model: models.DecoderLM, prompt: list[int], n: int) -> dict:
    def probs(prefix: tuple[int, ...]) -> np.ndarray:
        with torch.no_grad():
            logits = model(torch.tensor([prompt + list(prefix)]))[0, -1]
        return calc.softmax(logits.double().numpy())

    vocab = model.config.vocab_size
    out = {}
    for seq in itertools.product(range(vocab), repeat=n):
        out[seq] = math.prod(float(probs(seq[:i])[seq[i]]) for i in range(n))
    return out


def _sampled_sequences(
    pair: ModelPair, prompt: list[int], n: int, k: int, trials: int, rule: str
) -> np.ndarray:
    t_cache, d_cache = prefilled(pair, prompt)
    rng = np.random.default_rng(12345)
    sampling = speculative_run.Decoding(temperature=1.0)
    rows = [
        speculative_run.decode_speculative(
            pair, t_cache, d_cache, prompt, n, k, sampling, rng, rule=rule
        ).tokens
        for _ in range(trials)
    ]
    return np.asarray(rows)


@pytest.mark.slow
def test_sampled_speculative_output_is_distributed_as_the_target():
    """Seeded chi-square test (significance 1e-3) of 3-token outputs over a 5-token vocabulary
    against the target's exact autoregressive distribution; the wrong "resample from p" rule
    run through the same loop must be rejected, so the test can tell the two apart."""
    target = small_model(vocab=5, layers=2, std=0.3)
    pair = ModelPair(target, speculative_run.EarlyExitLM(target, 1), "target", "self:1", 5)
    prompt, n, k = [1, 3], 3, 2
    expected = speculative_sampler.sequence_codes(_target_sequence_distribution(target, prompt, n), 5)
    exact = _sampled_sequences(pair, prompt, n, k, 1500, "exact")
    wrong = _sampled_sequences(pair, prompt, n, k, 1000, "resample-p")
    p_exact, cells = speculative_sampler.chi_square_p_value(
        speculative_sampler.encode_sequences(exact, 5), expected
    )
    p_wrong, _ = speculative_sampler.chi_square_p_value(
        speculative_sampler.encode_sequences(wrong, 5), expected
    )
    assert cells > 20
    assert p_exact is not None and p_exact > speculative_sampler.SIGNIFICANCE
    assert p_wrong is not None and p_wrong < speculative_sampler.SIGNIFICANCE


# ----------------------------------------------------------------------------- analysis


def _summary(seconds: float) -> Summary:
    return Summary.from_samples([seconds])


def test_a_point_compares_the_measured_speedup_with_the_cost_model():
    trace = speculative_run.SpeculativeTrace(
        3, tokens=list(range(30)), rounds=12, full_rounds=10, accepted_per_position=[8, 6, 3]
    )
    costs = {"c_t": 10e-3, "c_d": 1e-3, "c_v(3)": 12e-3, "c_m": 1e-3}
    point = speculative_run.make_point(
        trace, _summary(0.5), _summary(1.0), costs, new_tokens=30, plain_tokens=list(range(30))
    )
    assert point.alpha_per_position == pytest.approx((0.8, 0.75, 0.5))
    assert point.expected_tokens_predicted == pytest.approx(1 + 0.8 + 0.6 + 0.3)
    assert point.round_time_predicted_s == pytest.approx(16e-3)
    assert point.predicted_speedup == pytest.approx(10e-3 * 2.7 / 16e-3)
    assert point.measured_speedup == pytest.approx(2.0)
    assert point.relative_error == pytest.approx((1.6875 - 2.0) / 2.0)
    assert point.expected_tokens_measured == pytest.approx(30 / 12)
    assert point.tokens_per_s == pytest.approx(60.0)
    assert point.tokens_identical is True and point.first_difference is None


def test_the_chapters_worked_speedup_from_counts():
    """k = 3, α = 0.8 at every position, c_t = 10 ms, c_d = 1 ms, c_v = 12 ms, c_m = 1 ms -> 1.845."""
    trace = speculative_run.SpeculativeTrace(
        3, tokens=[0] * 8, rounds=1000, full_rounds=1000, accepted_per_position=[800, 640, 512]
    )
    costs = {"c_t": 10e-3, "c_d": 1e-3, "c_v(3)": 12e-3, "c_m": 1e-3}
    point = speculative_run.make_point(
        trace, _summary(1.0), _summary(1.0), costs, new_tokens=8, plain_tokens=None
    )
    assert point.expected_tokens_predicted == pytest.approx(2.952)
    assert point.predicted_speedup == pytest.approx(1.845)
    assert point.tokens_identical is None


def test_a_point_after_a_never_accepted_position_predicts_one_token_per_round():
    trace = speculative_run.SpeculativeTrace(
        2, tokens=[1, 2, 3], rounds=3, full_rounds=2, accepted_per_position=[0, 0]
    )
    costs = {"c_t": 10e-3, "c_d": 1e-3, "c_v(2)": 11e-3, "c_m": 0.0}
    point = speculative_run.make_point(
        trace, _summary(1.0), _summary(1.0), costs, new_tokens=3, plain_tokens=[1, 9, 3]
    )
    assert point.alpha_per_position == (0.0, None)
    assert point.expected_tokens_predicted == 1.0
    assert point.predicted_speedup == pytest.approx(10 / 13)
    assert point.tokens_identical is False and point.first_difference == 1


# ----------------------------------------------------------------------------- the whole run


def fake_timer(seconds: dict[str, float], cost_s: float = 0.01):
    """Runs each decoding once and says it took ``seconds[job name]``; every cost takes ``cost_s``."""

    def timer(fn, *, device="cpu", warmup=0, reps=1, time_cold=True, **_):
        fn()
        t = seconds.get(fn.name, cost_s) if isinstance(fn, speculative_run.TimedJob) else cost_s
        samples = (t,) * reps
        return Measurement(samples, Summary.from_samples(samples), None, warmup, "fake", str(device), ())

    return timer


def test_a_run_reports_measured_and_predicted_speedups_with_the_json_keys():
    target = small_model(layers=3)
    pair = ModelPair(target, speculative_run.EarlyExitLM(target, 1), "small", "self:1", 64)
    seconds = {"plain decoding": 1.0, "speculative k = 1": 0.8, "speculative k = 2": 0.5}
    result = speculative_run.run_pair(
        pair,
        ks=[1, 2],
        new_tokens=12,
        prompt_len=4,
        reps=2,
        cost_reps=2,
        sweep=True,
        timer=fake_timer(seconds),
    )
    assert [p.k for p in result.points] == [1, 2]
    assert result.headline_k == 2  # the best measured speedup
    assert result.tokens_identical is True
    for point in result.points:
        e_n = point.expected_tokens_predicted
        assert point.predicted_speedup == pytest.approx(0.01 * e_n / (0.01 * point.k + 0.01 + 0.01))
        assert point.measured_speedup == pytest.approx(1.0 / seconds[f"speculative k = {point.k}"])
    data = json.loads(dumps(result))["result"]
    for key in (
        "tokens_identical",
        "plain_tokens_per_s",
        "speculative_tokens_per_s",
        "measured_speedup",
        "predicted_speedup",
        "expected_tokens_measured",
        "alpha_per_position",
        "k",
        "points",
    ):
        assert key in data, key
    assert data["measured_speedup"] == pytest.approx(2.0)
    assert data["plain_tokens_per_s"] == pytest.approx(12.0)
    assert parse_envelope(json.loads(dumps(result))).result == result


def test_a_run_with_the_real_timer_decodes_the_same_tokens_every_repetition():
    target = small_model(layers=2)
    pair = ModelPair(target, speculative_run.EarlyExitLM(target, 1), "small", "self:1", 64)
    result = speculative_run.run_pair(
        pair, ks=[2], new_tokens=8, prompt_len=3, reps=2, cost_reps=2, temperature=1.0
    )
    assert result.tokens_identical is None  # sampling: nothing to compare token for token
    assert not any(n.code == "spec_run_nondeterministic" for n in result.warnings)
    point = result.points[0]
    assert len(point.tokens) == 8 and point.time.n == 2
    assert {c.name for c in result.costs} == {"c_t", "c_d", "c_v(1)", "c_v(2)", "c_m"}


@pytest.mark.parametrize(
    ("options", "param"),
    [
        ({"ks": [4], "new_tokens": 4}, "new_tokens"),
        ({"new_tokens": 120}, "new_tokens"),  # 32 + 120 + 4 + 1 > 128 positions
    ],
)
def test_bad_run_options_are_refused_naming_the_parameter(options, param):
    target = small_model()
    pair = ModelPair(target, speculative_run.EarlyExitLM(target, 1), "small", "self:1", 64)
    with pytest.raises(InvalidInput) as err:
        speculative_run.run_pair(pair, timer=fake_timer({}), **options)
    assert err.value.option == param


@pytest.mark.parametrize(
    ("prompt_len", "new_tokens", "blamed"), [(100_000, 64, "prompt_len"), (16, 5_000, "new_tokens")]
)
def test_a_run_longer_than_the_models_positions_blames_the_length_that_pushed_it_over(
    prompt_len, new_tokens, blamed
):
    class Config:
        max_seq_len = 1024

    class Model:
        config = Config()

    pair = ModelPair(Model(), Model(), "target", "draft", 10, None)
    with pytest.raises(InvalidInput) as exc:
        speculative_run._check_positions(pair, prompt_len, new_tokens, 4)
    assert exc.value.option == blamed and "1024 positions of target" in str(exc.value)
    assert speculative_run._check_positions(pair, 16, 64, 4) == 16 + 64 + 4 + 1
