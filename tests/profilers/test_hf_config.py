"""``--hf-config`` refused up front when it cannot be meant (issue 33, class 4): unknown keys
with the close ones, a key twice, values of the wrong type, counts and sizes out of range, a
head split that does not divide, weights that cannot fit; and an ``hf:`` model that cannot be
recorded on fake tensors is never recorded by a real run with real weights."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_opt.errors import InvalidInput, RunFailure
from infer_opt.profilers import hf_config, models

transformers = pytest.importorskip("transformers")

SMALL_GPT2 = {"n_layer": 1, "n_embd": 64, "n_head": 2, "vocab_size": 256}


def _refused(model_type: str, overrides: dict, *needles: str) -> str:
    with pytest.raises(InvalidInput) as info:
        models.load_model(f"hf:{model_type}", seq_len=8, hf_overrides=overrides, device="meta")
    assert info.value.option == "hf_config", str(info.value)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))
    return str(info.value)


@pytest.mark.parametrize(
    ("model_type", "key", "close"),
    [
        ("gpt2", "n_layers", "n_layer"),
        ("gpt2", "nhead", "n_head"),
        ("llama", "num_layers", "num_hidden_layers"),
    ],
)
def test_an_unknown_key_is_refused_with_the_close_ones(model_type, key, close):
    line = _refused(model_type, {key: 2}, f"has no key {key!r}", "did you mean", close)
    assert f"got '{key}=2'" in line


def test_a_key_far_from_any_is_refused_without_a_guess():
    line = _refused("gpt2", {"zzzzzz": 1}, "has no key 'zzzzzz'")
    assert "did you mean" not in line


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("n_layer", -1, "must be in [1, 1024]"),
        ("n_layer", 0, "must be in [1, 1024]"),
        ("n_layer", 100_000, "must be in [1, 1024]"),
        ("vocab_size", 0, "must be in [1, 16777216]"),
        ("n_embd", 10**9, "must be in [1, 262144]"),
        ("n_embd", 1e9, "must be a whole number"),
        ("n_head", 2.5, "must be a whole number"),
        ("n_layer", "two", "must be a whole number"),
        ("n_positions", -5, "must be in [1,"),
        ("layer_norm_epsilon", "small", "must be a number"),
        ("scale_attn_weights", 3, "must be true or false"),
    ],
)
def test_an_impossible_value_is_refused(key, value, allowed):
    _refused("gpt2", {**SMALL_GPT2, key: value}, f"{key} {allowed}")


@settings(max_examples=25, deadline=None)
@given(
    key=st.sampled_from(["n_layer", "n_head", "n_embd", "vocab_size", "n_positions"]),
    value=st.integers(-(10**6), 0),
)
def test_no_count_or_size_below_one_passes(key, value):
    defaults = transformers.AutoConfig.for_model("gpt2")
    with pytest.raises(InvalidInput, match=rf"{key} must be in \[1, "):
        hf_config.check_keys("gpt2", {key: value}, defaults)


def test_a_key_given_twice_is_refused_naming_both():
    with pytest.raises(InvalidInput, match="n_layer is given twice") as info:
        models.parse_hf_overrides(["n_layer=2", "n_embd=64", "n_layer=3"])
    assert info.value.option == "--hf-config" and "n_layer=2 n_layer=3" in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"hidden_size": 96, "num_attention_heads": 5, "num_hidden_layers": 1}, "multiple of"),
        (
            {"hidden_size": 96, "num_attention_heads": 4, "num_key_value_heads": 3, "num_hidden_layers": 1},
            "num_attention_heads (4) must be a multiple of num_key_value_heads (3)",
        ),
    ],
)
def test_a_head_split_that_does_not_divide_is_refused(overrides, needle):
    _refused("llama", overrides, needle)


def test_the_sizes_a_real_model_has_pass():
    defaults = transformers.AutoConfig.for_model("llama")
    hf_config.check_keys(
        "llama",
        {"hidden_size": 8192, "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
         "intermediate_size": 28672, "vocab_size": 128256, "max_position_embeddings": 131072},
        defaults,
    )  # fmt: skip


def test_weights_that_cannot_fit_are_refused_before_any_is_allocated():
    fits = r"7 B parameters need 26.1 GiB of weights; this machine has 1 GiB"
    with pytest.raises(InvalidInput, match=fits):
        hf_config.check_weights_fit(7_000_000_000, 4, "cpu", "hidden_size=4096", 2**30)
    hf_config.check_weights_fit(7_000_000_000, 4, "cpu", "", None)  # memory unknown: not checked
    hf_config.check_weights_fit(7_000_000_000, 4, "meta", "", 2**30)  # no weights on meta


def test_a_real_build_that_cannot_fit_names_hf_config(monkeypatch):
    monkeypatch.setattr("infer_opt.profilers.distributed.available_memory", lambda: 1 << 16)
    with pytest.raises(InvalidInput, match="of weights; this machine has 64 KiB") as info:
        models.load_model("hf:gpt2", seq_len=8, hf_overrides=SMALL_GPT2)
    assert info.value.option == "hf_config"


def test_an_hf_model_that_fails_on_fake_tensors_is_never_run_for_real(monkeypatch):
    import torch

    from infer_opt.profilers import meta_record

    def fails(*_args, **_kwargs):
        raise RuntimeError("The size of tensor a (4) must match the size of tensor b (3)")

    def real(*_args, **_kwargs):
        raise AssertionError("a real run was started")

    monkeypatch.setattr(meta_record, "record_fake", fails)
    monkeypatch.setattr(meta_record, "record_real", real)
    step = meta_record.StepSpec("hf:llama", "prefill", 1, 8, 8, 1, torch.float32, {"hidden_size": 96})
    with pytest.raises(InvalidInput, match="hf:llama cannot run with this config") as info:
        meta_record.record_step(step)
    assert info.value.option == "hf_config" and "hidden_size=96" in str(info.value)
    with pytest.raises(RunFailure, match="could not be recorded on fake tensors"):
        meta_record.record_step(meta_record.StepSpec("hf:llama", "prefill", 1, 8, 8, 1, torch.float32))
