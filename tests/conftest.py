from __future__ import annotations

import os

import pytest

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the GPU machine may lack it; the GPU-marked tests do not need it
    pass
else:
    settings.register_profile(
        "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.register_profile("dev", max_examples=100, deadline=None)
    settings.load_profile("ci" if os.environ.get("CI") else "dev")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if gpu_items and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory):
    """No test reads or writes the user's ~/.cache/infer-opt (a saved roofline fit there
    would make results depend on the machine's history)."""
    old = os.environ.get("INFER_OPT_CACHE")
    os.environ["INFER_OPT_CACHE"] = str(tmp_path_factory.mktemp("infer-opt-cache"))
    yield
    if old is None:
        os.environ.pop("INFER_OPT_CACHE", None)
    else:
        os.environ["INFER_OPT_CACHE"] = old


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op torch thread for a test module (``pytestmark =
    pytest.mark.usefixtures("one_thread")``): on a shared 2-core machine two OpenMP threads
    stall each other. torch is imported here, not at the top, so calculator tests never load it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


#: a factory file with a small DecoderLM of vocabulary 2048 (``make``) and one of 1024
#: (``make_1024``): two models whose vocabularies differ, for the speculative pair checks
MINI_FACTORY = """
import torch
from infer_opt.profilers import models


def make(vocab=2048):
    config = models.TransformerConfig("mini", vocab, 64, 1, 2, 2, 128, 256)
    torch.manual_seed(0)
    return models.DecoderLM(config).eval(), torch.zeros(1, 4, dtype=torch.long)


def make_1024():
    return make(1024)
"""


@pytest.fixture
def mini_factory(tmp_path):
    """The path of a file holding :data:`MINI_FACTORY` (``f"{path}:make"``, ``f"{path}:make_1024"``)."""
    path = tmp_path / "mini.py"
    path.write_text(MINI_FACTORY)
    return path
