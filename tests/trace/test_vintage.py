"""Traces of any vintage and GPU (issue 41 item 4): the Trace Event Format's array form, older
spellings of categories, ids and device tables, a host's whole device table, the datasheet rows."""

from __future__ import annotations

import json

import pytest

from infer_opt.errors import InvalidInput
from infer_opt.trace import devices as dv
from infer_opt.trace.events import KERNEL, MEMCPY, MEMSET
from infer_opt.trace.reader import read_trace

#: one op launching a kernel, a copy and a memset, in the capitalised categories older Kineto wrote
OLD_EVENTS = [
    {"ph": "X", "cat": "Operator", "name": "aten::add", "pid": 1, "tid": 1, "ts": 100, "dur": 20,
     "args": {"external id": 7, "Input Dims": [[4, 4], [4, 4]], "Input type": ["float", "float"]}},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 105, "dur": 3,
     "args": {"correlation": 11, "external id": 7}},
    {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 110, "dur": 3,
     "args": {"correlation": 12, "external id": 7}},
    {"ph": "X", "cat": "Runtime", "name": "cudaMemsetAsync", "pid": 1, "tid": 1, "ts": 114, "dur": 3,
     "args": {"correlation": 13, "external id": 7}},
    {"ph": "X", "cat": "Kernel", "name": "add_kernel", "pid": 1, "tid": 7, "ts": 130, "dur": 5,
     "args": {"correlation": 11, "device": 1, "stream": 7}},
    {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 1, "tid": 7,
     "ts": 140, "dur": 4, "args": {"correlation": 12, "device": 1, "stream": 7}},
    {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 1, "tid": 7, "ts": 150, "dur": 1,
     "args": {"correlation": 13, "device": 1, "stream": 7}},
]  # fmt: skip
#: a host with a T4 (device 0) and an A10G (device 1), in the older field names
HOST_TABLE = [
    {"id": 0, "name": "", "major": 7, "minor": 5, "multiProcessorCount": 40, "totalGlobalMem": 15843721216},
    {"id": 1, "name": "", "major": 8, "minor": 6, "multiProcessorCount": 80, "totalGlobalMem": 23609475072},
]


def _check_old_events(t):
    assert t.gpu.kind.tolist() == [KERNEL, MEMCPY, MEMSET]
    assert t.gpu.op.tolist() == [0, 0, 0]  # each linked to aten::add through its launch
    assert t.ops.external_id.tolist() == [7]
    assert t.ops.args[0]["Input Dims"] == [[4, 4], [4, 4]]


@pytest.mark.parametrize("gz", [False, True])
def test_a_bare_array_of_events_is_read_as_the_object_form(tmp_path, gz):
    import gzip

    path = tmp_path / ("old.json.gz" if gz else "old.json")
    data = json.dumps(OLD_EVENTS).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    t = read_trace(path)
    _check_old_events(t)
    assert t.device_properties == () and t.world_size is None


def test_the_object_form_without_metadata_and_its_capitalised_categories(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"traceEvents": OLD_EVENTS}))
    _check_old_events(read_trace(path))


def test_a_bare_array_cut_midway_keeps_its_complete_events(tmp_path):
    path = tmp_path / "cut.json"
    text = json.dumps(OLD_EVENTS)
    path.write_text(text[: text.rfind('{"ph"') + 20])  # the last event cut mid-way
    t = read_trace(path)
    assert len(t.gpu) == 2 and any(n.code == "trace_truncated" for n in t.warnings)


def test_a_list_of_things_that_are_not_events_is_refused(tmp_path):
    path = tmp_path / "numbers.json"
    path.write_text("[1, 2, 3]")
    with pytest.raises(InvalidInput, match="not trace events"):
        read_trace(path)


def test_a_compute_properties_table_is_the_device_table(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"traceEvents": OLD_EVENTS, "computeProperties": HOST_TABLE}))
    t = read_trace(path)
    assert [p["id"] for p in t.device_properties] == [0, 1]


def test_older_field_names_identify_the_device():
    spec, source, _ = dv.identify([HOST_TABLE[0]])
    assert (spec.name, source) == ("T4", "inferred")
    assert dv.normalized_properties({"major": 8, "computeMajor": 9})["computeMajor"] == 9  # Kineto's wins


def test_a_host_table_picks_the_gpu_the_kernels_ran_on():
    assert dv.ran_on(HOST_TABLE, [1, 1, 0])[0]["id"] == 1
    assert dv.ran_on(HOST_TABLE, [0])[0]["id"] == 0
    assert dv.ran_on(HOST_TABLE, [5]) == tuple(HOST_TABLE)  # no entry for it: the table as it is
    assert dv.identify(dv.ran_on(HOST_TABLE, [1, 1]))[0].name == "A10G"
    assert dv.identify(dv.ran_on(HOST_TABLE, [0]))[0].name == "T4"


def test_the_trace_facade_picks_the_kernels_device(tmp_path):
    from infer_opt.trace.analyze import analyze

    path = tmp_path / "host.json"
    path.write_text(json.dumps({"traceEvents": OLD_EVENTS, "deviceProperties": HOST_TABLE}))
    result = analyze([str(path)]).result
    assert result.device_name == "A10G"  # the kernels ran on device 1


NEW = ["T4", "A10G", "L4", "L40S", "RTX A6000", "RTX 4090", "RTX 3090", "RTX 2080 Ti", "H20", "H100 NVL"]
NEW += ["GH200 96GB", "GH200 144GB", "B300", "MI325X"]


def test_the_serving_gpus_are_in_the_table_with_sources_and_links():
    names = {d.name for d in dv.DEVICES}
    assert set(NEW) <= names
    assert len(names) == len(dv.DEVICES)  # one row per device
    for name in NEW:
        d = dv.by_name(name)
        assert "datasheet" in d.source or "whitepaper" in d.source or "brief" in d.source or "AWS" in d.source
        assert d.peak("bf16") > 0 and d.bytes_per_s > 0 and dv.host_link_bytes_per_s(d) > 0


@pytest.mark.parametrize(
    ("name", "device"),
    [
        ("Tesla T4", "T4"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA RTX A6000", "RTX A6000"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 3090", "RTX 3090"),
        ("NVIDIA GeForce RTX 2080 Ti", "RTX 2080 Ti"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA B300 SXM6 AC", "B300"),
        ("AMD Instinct MI325X", "MI325X"),
        ("NVIDIA L40S", "L40S"),
    ],
)
def test_device_names_as_drivers_spell_them(name, device):
    spec, source, _ = dv.identify([{"name": name}])
    assert (spec.name, source) == (device, "deviceProperties")


def test_gh200_by_its_memory_and_its_c2c_link():
    small = dv.identify([{"name": "NVIDIA GH200 480GB", "totalGlobalMem": 101468602368}])[0]
    large = dv.identify([{"name": "NVIDIA GH200 144G HBM3e", "totalGlobalMem": 153931627520}])[0]
    assert (small.name, large.name) == ("GH200 96GB", "GH200 144GB")
    assert dv.host_link_bytes_per_s(small) == 450e9  # NVLink-C2C, not PCIe
    assert dv.host_link_bytes_per_s(dv.by_name("T4")) == dv.PCIE_X16_BYTES_PER_S[3]


def test_worked_datasheet_figures_of_the_new_rows():
    assert dv.by_name("h20").peak("bf16") == pytest.approx(148e12)
    assert dv.by_name("b300").peak("fp8") == pytest.approx(4500e12)
    assert dv.by_name("b300").peak("fp64") == pytest.approx(1.25e12)
    assert dv.by_name("mi325x").bytes_per_s == pytest.approx(6.0e12)
    assert dv.by_name("t4").peak("bf16") == dv.by_name("t4").peak("fp32")  # Turing: no bf16
    assert dv.by_name("4090").peak("fp16") == pytest.approx(165.2e12)
