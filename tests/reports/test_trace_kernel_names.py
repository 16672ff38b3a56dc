"""The trace view's kernel names: cut to fit, yet told apart where a plain cut would show two
alike (ROCm's Tensile GEMMs share their first 40 characters, mangled ``aiter`` names 30)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from infer_opt.reports.trace import KERNEL_WIDTH, _kernel_label, _kernel_labels

TENSILE = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT{}_MI16x16x1_SN_LDSB1_AFC1_AFEM1"


def test_names_a_plain_cut_shows_alike_are_cut_where_they_part():
    names = [TENSILE.format(t) for t in ("128x256x32", "320x224x64", "256x192x64")]
    assert len({_kernel_label(n) for n in names}) == 1  # the plain cut: three alike rows
    labels = _kernel_labels([*names, "void at::native::elementwise_kernel<128, 4>", "short"])
    assert [labels[n] for n in names] == ["Cijk_Alik_Bl…s_MT128x256x32…", "Cijk_Alik_Bl…s_MT320x224x64…",
                                          "Cijk_Alik_Bl…s_MT256x192x64…"]  # fmt: skip
    assert labels["void at::native::elementwise_kernel<128, 4>"] == "at::native::elementwise_ker…"
    assert labels["short"] == "short"


@given(st.lists(st.text(alphabet="ab_xyz01", min_size=1, max_size=80), min_size=1, max_size=6, unique=True))
def test_a_label_fits_its_width_and_a_short_name_is_itself(names):
    labels = _kernel_labels(names)
    assert set(labels) == set(names)
    for n, label in labels.items():
        assert len(label) <= KERNEL_WIDTH
        assert (label == n.removeprefix("void ")) == (len(n.removeprefix("void ")) <= KERNEL_WIDTH)
