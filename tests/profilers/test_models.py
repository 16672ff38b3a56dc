from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from infer_opt.errors import InvalidInput, RunFailure
from infer_opt.profilers import models

pytestmark = pytest.mark.usefixtures("one_thread")


def _tokens(model: models.DecoderLM, batch: int, length: int) -> torch.Tensor:
    return models.random_tokens(batch, length, model.config.vocab_size, seed=3)


@pytest.fixture(scope="module", params=["tiny", "llama-tiny"])
def model64(request):
    return models.build_builtin(request.param, dtype=torch.float64)


def test_builtin_parameter_counts_match_the_config():
    for name in ("tiny", "llama-tiny"):
        model = models.build_builtin(name)
        assert sum(p.numel() for p in model.parameters()) == models.param_count_analytic(model.config)
    # GPT-2 small with the LM head tied to the embedding: the well-known 124,439,808
    assert models.param_count_analytic(models.BUILTIN_CONFIGS["gpt2-small"]) == 124_439_808


def test_weights_are_seeded():
    a, b = models.build_builtin("tiny"), models.build_builtin("tiny")
    assert torch.equal(a.blocks[0].attn.q_proj.weight, b.blocks[0].attn.q_proj.weight)
    assert a.lm_head.weight is a.embed.weight


def test_llama_style_uses_grouped_query_attention_and_no_learned_positions():
    model = models.build_builtin("llama-tiny")
    c = model.config
    assert c.n_kv_heads < c.n_heads
    assert model.blocks[0].attn.k_proj.out_features == c.n_kv_heads * c.head_dim
    assert not hasattr(model, "pos_embed") and isinstance(model.blocks[0].attn_norm, models.RMSNorm)


def test_decode_one_token_at_a_time_equals_the_full_forward(model64):
    ids = _tokens(model64, 2, 12)
    with torch.no_grad():
        full = model64(ids)
        cache = model64.new_cache(2, 16)
        steps = torch.cat([model64(ids[:, i : i + 1], cache) for i in range(ids.shape[1])], dim=1)
    assert cache.length == 12
    torch.testing.assert_close(steps, full, rtol=0, atol=1e-10)


def test_several_tokens_over_a_cache_equal_the_full_forward(model64):
    ids = _tokens(model64, 2, 12)
    with torch.no_grad():
        full = model64(ids)
        cache = model64.new_cache(2, 16)
        chunks = [model64(ids[:, a:b], cache) for a, b in ((0, 5), (5, 8), (8, 12))]
    torch.testing.assert_close(torch.cat(chunks, dim=1), full, rtol=0, atol=1e-10)


def test_float32_cached_decode_matches_within_a_tight_tolerance():
    model = models.build_builtin("llama-tiny")
    ids = _tokens(model, 1, 9)
    with torch.no_grad():
        full = model(ids)
        cache = model.new_cache(1, 9)
        out = torch.cat(
            [model(ids[:, :4], cache), model(ids[:, 4:5], cache), model(ids[:, 5:], cache)], dim=1
        )
    torch.testing.assert_close(out, full, rtol=1e-4, atol=1e-5)


def test_top_left_is_causal_over_a_cache_would_be_caught(monkeypatch, model64):
    """The test above can fail: SDPA's is_causal=True over a cache (Tq < Tk) aligns top-left."""

    def top_left(q, k, v, *, gqa):
        kwargs = {"enable_gqa": True} if gqa else {}
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=q.shape[2] > 1, **kwargs)

    ids = _tokens(model64, 1, 10)
    with torch.no_grad():
        full = model64(ids)
        monkeypatch.setattr(models, "attention", top_left)
        cache = model64.new_cache(1, 10)
        out = torch.cat([model64(ids[:, :6], cache), model64(ids[:, 6:], cache)], dim=1)
    assert (out[:, 6:] - full[:, 6:]).abs().max() > 1e-3
    torch.testing.assert_close(out[:, :6], full[:, :6], rtol=0, atol=1e-10)


def test_mask_rule():
    mask = models.causal_mask_lower_right(2, 5)
    assert mask.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_model_attention_passes_the_mask_alignment_check():
    mask_alignment = pytest.importorskip("infer_opt.checks.mask_alignment")
    result = mask_alignment.check_attention_fn(
        lambda q, k, v, offset: models.attention(q, k, v, gqa=False), name="models.attention", tq=3, tk=17
    )
    assert result.passed, [c for c in result.cases if not c.passed]


def test_cache_reset_repeats_the_same_step():
    model = models.build_builtin("tiny")
    ctx, token = _tokens(model, 1, 8), _tokens(model, 1, 1)
    cache = model.new_cache(1, 9)
    with torch.no_grad():
        model(ctx, cache)
        first = model(token, cache)
        cache.reset(8)
        again = model(token, cache)
    assert cache.length == 9
    assert torch.equal(first, again)


def test_too_long_for_the_cache_or_positions_is_bad_input():
    model = models.build_builtin("tiny")
    cache = model.new_cache(1, 4)
    with pytest.raises(InvalidInput, match="at most 4"), torch.no_grad():
        model(_tokens(model, 1, 5), cache)
    with pytest.raises(InvalidInput, match="seq_len"):
        models.load_model("tiny", seq_len=5000)


def test_unknown_builtin_lists_the_known_ones():
    with pytest.raises(InvalidInput) as info:
        models.load_model("nope")
    assert "tiny, gpt2-small, llama-tiny, llama-small" in str(info.value)


def test_aliases():
    assert models.load_model("llama", seq_len=4).name == "llama-tiny"


def test_load_builtin_gives_the_token_batch():
    loaded = models.load_model("tiny", batch_size=3, seq_len=7)
    assert loaded.args[0].shape == (3, 7) and loaded.tokens == 21 and loaded.supports_decode
    assert loaded.inputs() == "arg0 3×7 int64"


# ---------------------------------------------------------------------------- user factories


FACTORY = """
import torch

def make(batch_size, seq_len):
    return torch.nn.Linear(8, 4), torch.ones(batch_size, seq_len, 8, dtype=torch.float64)

def make_dict(**kwargs):
    make_dict.seen = kwargs
    return torch.nn.Linear(8, 4), {"input": torch.ones(2, 8)}

def make_tuple():
    return torch.nn.Bilinear(3, 3, 2), (torch.ones(1, 3), torch.ones(1, 3))

def wrong():
    return torch.nn.Linear(2, 2)

def not_callable():
    return 3, torch.ones(1)

def bad_inputs():
    return torch.nn.Linear(2, 2), 7

def raises(seq_len):
    raise ValueError(f"no weights for {seq_len}")
"""


@pytest.fixture
def factory_file(tmp_path):
    path = tmp_path / "user_model.py"
    path.write_text(FACTORY)
    return path


def test_factory_gets_only_the_arguments_it_names_and_inputs_are_cast(factory_file):
    loaded = models.load_factory(
        f"{factory_file}:make", batch_size=2, seq_len=5, device="cpu", dtype=torch.float32
    )
    assert loaded.source == "factory" and loaded.name == "user_model.py:make"
    (x,) = loaded.args
    assert x.shape == (2, 5, 8) and x.dtype == torch.float32  # no dtype argument: cast by infer-opt
    assert loaded.prefill().shape == (2, 5, 4)


def test_factory_with_kwargs_gets_everything_and_dict_inputs(factory_file):
    loaded = models.load_factory(
        f"{factory_file}:make_dict", batch_size=2, seq_len=5, device="cpu", dtype=torch.float32
    )
    assert loaded.kwargs["input"].shape == (2, 8) and loaded.args == ()
    module = __import__("sys").modules[type(loaded.model).__module__]
    assert module is torch.nn.modules.linear


def test_factory_tuple_inputs(factory_file):
    loaded = models.load_factory(
        f"{factory_file}:make_tuple", batch_size=1, seq_len=1, device="cpu", dtype=torch.float32
    )
    assert loaded.prefill().shape == (1, 2)


@pytest.mark.parametrize(
    ("attr", "needle"),
    [
        ("wrong", "(model, example_inputs)"),
        ("not_callable", "not callable"),
        ("bad_inputs", "example_inputs must be"),
        ("missing", "no attribute 'missing'"),
    ],
)
def test_bad_factories_are_bad_input(factory_file, attr, needle):
    with pytest.raises(InvalidInput, match=None) as info:
        models.load_factory(
            f"{factory_file}:{attr}", batch_size=1, seq_len=1, device="cpu", dtype=torch.float32
        )
    assert needle in str(info.value)


def test_factory_that_raises_is_a_run_failure(factory_file):
    with pytest.raises(RunFailure, match=r"raised ValueError: no weights for 3"):
        models.load_factory(
            f"{factory_file}:raises", batch_size=1, seq_len=3, device="cpu", dtype=torch.float32
        )


def test_a_factory_that_exits_is_a_run_failure_naming_it(tmp_path):
    path = tmp_path / "quits.py"
    path.write_text("def make(**kwargs):\n    import sys\n    sys.exit(3)\n")
    with pytest.raises(RunFailure) as info:
        models.load_model(f"{path}:make")
    assert f"the model factory {path}:make called sys.exit(3)" in str(info.value)


@pytest.mark.parametrize("where", ["in the factory", "on import"])
def test_ctrl_c_inside_a_factory_is_an_interrupt_not_its_failure(tmp_path, where):
    """Ctrl-C while the factory builds the model is the user stopping the run (exit 130), never
    "the model factory raised KeyboardInterrupt" (exit 1)."""
    path = tmp_path / "slow.py"
    body = "raise KeyboardInterrupt\n"
    path.write_text(f"def make(**kwargs):\n    {body}" if where == "in the factory" else body)
    with pytest.raises(KeyboardInterrupt):
        models.load_model(f"{path}:make")


def test_a_factory_module_that_exits_on_import_is_a_run_failure(tmp_path):
    path = tmp_path / "exits_on_import.py"
    path.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(RunFailure, match=r"called sys.exit\(3\)"):
        models.load_model(f"{path}:make")


def test_a_batch_that_cannot_fit_in_memory_is_refused_before_allocating(monkeypatch):
    from infer_opt.profilers import device

    model = models.build_builtin("tiny")
    monkeypatch.setattr(device, "free_memory_bytes", lambda _device: 64 * 2**20)
    with pytest.raises(RunFailure) as info:
        model.new_cache(4096, 2048)
    message = str(info.value)
    assert message.startswith("out of memory: a batch of 4096 × 2048 tokens") and "64 MiB free" in message
    assert model.new_cache(1, 16).max_len == 16  # a small one still fits


def test_the_working_set_counts_the_kv_cache_and_activations():
    config = models.build_builtin("tiny").config
    one = models.working_set_bytes(config, 1, 128, 4)
    assert models.working_set_bytes(config, 2, 128, 4) == 2 * one
    kv = 2 * config.n_layers * config.n_kv_heads * 128 * config.head_dim * 4
    assert one > kv


def test_unimportable_factories(tmp_path):
    with pytest.raises(InvalidInput, match="does not exist"):
        models.load_model(f"{tmp_path}/none.py:make")
    with pytest.raises(InvalidInput, match="cannot import module"):
        models.load_model("no_such_package_xyz.models:make")
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_module_xyz\n")
    with pytest.raises(InvalidInput, match=r"importing .* failed: ModuleNotFoundError"):
        models.load_model(f"{broken}:make")
    with pytest.raises(InvalidInput, match="module:factory"):
        models.load_model("pkg.mod:")


def test_worked_example_factory():
    example = Path(__file__).resolve().parents[2] / "examples" / "my_model.py"
    loaded = models.load_model(f"{example}:make_model", batch_size=2, seq_len=16)
    assert loaded.tokens == 32
    assert loaded.prefill().shape == (2, 10)


# ---------------------------------------------------------------------------- hf:


def test_hf_overrides_are_parsed():
    assert models.parse_hf_overrides(["n_layer=2", "scale_attn_weights=false", "act=gelu", "eps=1e-5"]) == {
        "n_layer": 2,
        "scale_attn_weights": False,
        "act": "gelu",
        "eps": 1e-5,
    }
    with pytest.raises(InvalidInput, match="KEY=VALUE"):
        models.parse_hf_overrides(["n_layer"])


@pytest.mark.skipif(importlib.util.find_spec("transformers") is not None, reason="transformers is installed")
def test_hf_without_transformers_says_how_to_install():
    with pytest.raises(InvalidInput) as info:
        models.load_model("hf:gpt2")
    assert models.HF_EXTRA_MESSAGE in str(info.value)


def test_hf_builds_from_config_without_download():
    pytest.importorskip("transformers")
    loaded = models.load_model(
        "hf:gpt2", seq_len=8, hf_overrides={"n_layer": 1, "n_embd": 64, "n_head": 2, "vocab_size": 256}
    )
    assert loaded.source == "hf" and loaded.tokens == 8
    with torch.no_grad():
        assert loaded.prefill().logits.shape == (1, 8, 256)
    with pytest.raises(InvalidInput):
        models.load_model("hf:no-such-model-type")


def test_a_config_transformers_refuses_is_bad_input_naming_the_overrides():
    """Whatever the config's validation raises (a ValueError, or huggingface_hub's strict
    dataclass errors in newer transformers), the values given are what was wrong: exit 2."""
    pytest.importorskip("transformers")
    bad = {"hidden_size": 100, "num_attention_heads": 3, "num_hidden_layers": 1, "vocab_size": 64}
    with pytest.raises(InvalidInput) as info:
        models.load_model("hf:llama", seq_len=8, hf_overrides=bad)
    assert info.value.option == "hf_config" and "num_attention_heads=3" in str(info.value)


#: a tiny Llama through transformers: GQA (4 query heads, 2 key/value heads of 16), untied head
HF_LLAMA = {
    "num_hidden_layers": 1,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
}


def test_hf_llama_builds_from_small_overrides_with_analytic_flops():
    pytest.importorskip("transformers")
    loaded = models.load_model("hf:llama", seq_len=16, hf_overrides=HF_LLAMA)
    assert loaded.kwargs["use_cache"] is False  # every call the same prefill, no cache to return
    with torch.no_grad():
        assert loaded.prefill().logits.shape == (1, 16, 256)
    d, f, kv, vocab, t = 64, 128, 2 * 16, 256, 16
    p_matmul = (d * d + 2 * d * kv + d * d + 3 * d * f) + d * vocab  # q, k, v, o, SwiGLU, LM head
    assert models.matmul_weight_count(loaded.model) == p_matmul
    # 2·P·T + 4·B·H·T²·d_head·L
    assert loaded.flops_analytic == 2 * p_matmul * t + 4 * 4 * t * t * 16 * 1 // 2  # causal: half


def test_hf_base_is_the_model_without_its_head():
    """``hf:<type>:base`` builds ``AutoModel``: the hidden states, no LM head over every token
    (its matmul weights and FLOPs lose exactly the head's ``d × vocab``)."""
    pytest.importorskip("transformers")
    lm = models.load_model("hf:llama", seq_len=16, hf_overrides=HF_LLAMA)
    base = models.load_model("hf:llama:base", seq_len=16, hf_overrides=HF_LLAMA)
    assert base.name == "hf:llama:base" and lm.name == "hf:llama"
    assert not hasattr(base.model, "lm_head")
    with torch.no_grad():
        assert base.prefill().last_hidden_state.shape == (1, 16, 64)
    head = 64 * 256
    assert models.matmul_weight_count(lm.model) - models.matmul_weight_count(base.model) == head
    assert lm.flops_analytic - base.flops_analytic == 2 * head * 16
    encoder = {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64,
               "vocab_size": 128}  # fmt: skip
    bert = models.load_model("hf:bert:base", seq_len=8, hf_overrides=encoder)
    with torch.no_grad():  # an encoder has no causal LM; its base model is what its traces run
        assert bert.prefill()[0].shape == (1, 8, 32)


def test_an_encoders_analytic_flops_count_its_attention_whole_and_its_pooler_once_a_sequence():
    """bert attends both ways (its attention modules say is_causal=False): the T×T term whole; its
    pooler reads the first token of each sequence. A decoder's attention stays halved."""
    pytest.importorskip("transformers")
    d, f, heads, t, b = 32, 64, 2, 8, 3
    encoder = {"num_hidden_layers": 1, "hidden_size": d, "num_attention_heads": heads, "intermediate_size": f,
               "vocab_size": 128}  # fmt: skip
    bert = models.load_model("hf:bert:base", batch_size=b, seq_len=t, hf_overrides=encoder)
    layer = 4 * d * d + 2 * d * f  # q, k, v, o and the MLP
    assert models.matmul_weight_count(bert.model, pooler=True) == d * d
    assert models.matmul_weight_count(bert.model, pooler=False) == layer
    assert bert.flops_analytic == 2 * layer * b * t + 2 * d * d * b + 4 * b * heads * t * t * (d // heads)
    llama = models.load_model("hf:llama:base", seq_len=16, hf_overrides=HF_LLAMA)
    attention = 4 * 1 * 4 * 16 * 16 * 16
    assert llama.flops_analytic == 2 * models.matmul_weight_count(llama.model) * 16 + attention // 2


def test_an_hf_image_or_video_model_takes_random_pixels_at_its_configs_size():
    pytest.importorskip("transformers")
    small = {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64,
             "image_size": 32, "patch_size": 16}  # fmt: skip
    vit = models.load_model("hf:vit:base", batch_size=3, seq_len=999, hf_overrides=small)
    assert tuple(vit.kwargs["pixel_values"].shape) == (3, 3, 32, 32) and vit.seq_len is None
    assert vit.tokens is None and vit.batch == 3 and "pixel_values 3×3×32×32" in vit.inputs()
    with torch.no_grad():  # (32 / 16)² patches and the class token
        assert vit.prefill().last_hidden_state.shape == (3, 5, 32)
    video = models.load_model("hf:timesformer:base", batch_size=1, hf_overrides={**small, "num_frames": 2})
    assert tuple(video.kwargs["pixel_values"].shape) == (1, 2, 3, 32, 32)
    with pytest.raises(InvalidInput, match=r"its input is input_values: hf: models take input_ids"):
        models.load_model("hf:wav2vec2:base", hf_overrides={"num_hidden_layers": 1})


def test_a_model_type_with_no_causal_lm_points_to_its_base_model():
    pytest.importorskip("transformers")
    with pytest.raises(InvalidInput, match=r"built no causal LM from this config \(hf:vit:base builds"):
        models.load_model("hf:vit", hf_overrides={"num_hidden_layers": 1})


@pytest.mark.parametrize("spec", ["hf:llama:head", "hf:llama:", "hf::base", "hf:"])
def test_a_bad_hf_spec_says_what_is_allowed(spec):
    with pytest.raises(InvalidInput) as info:
        models.load_model(spec)
    assert info.value.option == "MODEL" and "hf:<model_type>:base" in str(info.value)


def test_hf_tied_lm_head_counts_once_and_embeddings_not_at_all():
    pytest.importorskip("transformers")
    loaded = models.load_model(
        "hf:gpt2", seq_len=8, hf_overrides={"n_layer": 1, "n_embd": 64, "n_head": 2, "vocab_size": 256}
    )
    d, vocab = 64, 256
    # Conv1D c_attn, attn c_proj, c_fc, mlp c_proj; the LM head shares the token embedding
    assert models.matmul_weight_count(loaded.model) == d * 3 * d + d * d + 2 * d * 4 * d + d * vocab
    assert loaded.model.lm_head.weight is loaded.model.transformer.wte.weight


def test_hf_analytic_flops_are_left_out_for_a_mixture_of_experts():
    from types import SimpleNamespace

    config = SimpleNamespace(num_attention_heads=2, num_hidden_layers=1, hidden_size=8, num_local_experts=4)
    assert models.hf_prefill_flops(torch.nn.Linear(8, 8), config, 1, 4) is None
    dense = SimpleNamespace(num_attention_heads=2, num_hidden_layers=1, hidden_size=8)
    assert models.hf_prefill_flops(torch.nn.Linear(8, 8), dense, 1, 4) == 2 * 64 * 4 + 4 * 2 * 16 * 4 // 2


def test_a_factory_that_sets_its_own_threads_does_not_override_the_runs(tmp_path):
    """``--threads 1`` and a factory calling torch.set_num_threads(2): the run's count stands."""
    path = tmp_path / "threads.py"
    path.write_text(
        "import torch\n\ndef make():\n    torch.set_num_threads(2)\n"
        "    return torch.nn.Linear(4, 4), torch.randn(1, 4)\n"
    )
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        models.load_model(f"{path}:make")
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_the_shapes_a_factory_cannot_take_are_named(tmp_path):
    path = tmp_path / "shapes.py"
    path.write_text(
        "def fixed():\n    pass\n\ndef sized(seq_len=4):\n    pass\n\ndef any_(**kw):\n    pass\n"
    )
    assert models.factory_ignores(f"{path}:fixed", ["batch", "seq_len"]) == [
        ("batch", "batch_size"),
        ("seq_len", "seq_len"),
    ]
    assert models.factory_ignores(f"{path}:sized", ["batch", "seq_len"]) == [("batch", "batch_size")]
    assert models.factory_ignores(f"{path}:any_", ["batch", "seq_len"]) == []
    assert models.factory_ignores("tiny", ["batch"]) == []
    assert models.factory_ignores("hf:gpt2", ["batch"]) == []
