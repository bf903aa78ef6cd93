"""kvlib.gpus: the GPU table against the vendors' datasheets (each entry's source string names its sheet).

CUDA-reported totals: H100 79.18 GiB ([chains] and vLLM logs), RTX 3090 23.58 GiB (vLLM logs 07 and 14).
"""

import pytest

from kvlib.gpus import GPUS, GPUError, _gib, get_gpu

GB, T = 10**9, 10**12
GiB = 2**30

# name: (label bytes, CUDA GiB, bandwidth B/s, bf16 dense FLOP/s, fp8 dense FLOP/s or None)
DATASHEETS = {
    "H100-SXM": (80 * GB, 79.18, 3.35 * T, 989 * T, 1979 * T),
    "H100-PCIe": (80 * GB, 79.18, 2.0 * T, 756 * T, 1513 * T),
    "H200": (141 * GB, 139.8, 4.8 * T, 989 * T, 1979 * T),
    "B200": (192 * GB, 178.4, 8 * T, 2250 * T, 4500 * T),
    "A100-80GB": (80 * GB, 79.15, 2.039 * T, 312 * T, None),
    "A100-40GB": (40 * GB, 39.39, 1.555 * T, 312 * T, None),
    "L40S": (48 * GB, 44.4, 864 * GB, 362 * T, 733 * T),
    "L4": (24 * GB, 22.03, 300 * GB, 121 * T, 242 * T),
    "A10G": (24 * GB, 22.3, 600 * GB, 70 * T, None),
    "A10": (24 * GB, 22.06, 600 * GB, 125 * T, None),
    "RTX-4090": (24 * GB, 23.65, 1.008 * T, 165 * T, 330 * T),
    "RTX-3090": (24 * GiB, 23.58, 936 * GB, 71 * T, None),   # 24 chips of 8 Gbit: the label's "24 GB" is GiB
    "T4": (16 * GB, 14.75, 320 * GB, 65 * T, None),
    "MI300X": (192 * GB, 191.98, 5.3 * T, 1307 * T, 2615 * T),
    # HGX B300 (8 GPUs): 2.3 TB, BF16 36 and FP8 72 PFLOP/s sparse -> 2.25 and 4.5 PF dense per GPU
    "B300": (288 * GB, 267.7, 8 * T, 2250 * T, 4500 * T),
    # GB200 superchip (2 GPUs): 372 GB, 16 TB/s, BF16 10 and FP8 20 PFLOP/s sparse -> 2.5 and 5 PF dense per GPU
    "GB200": (186 * GB, 172.7, 8 * T, 2500 * T, 5000 * T),
    # GB200 NVL72: 72 of those: 13,392 GB, 576 TB/s, BF16 360 and FP8 720 PFLOP/s sparse -> 180 and 360 PF dense
    "GB200-NVL72": (13_392 * GB, 72 * 172.7, 576 * T, 180_000 * T, 360_000 * T),
    "MI325X": (256 * GB, 255.98, 6 * T, 1307 * T, 2615 * T),
    "MI355X": (288 * GB, 287.98, 8 * T, 2500 * T, 5000 * T),
}

# name: (dense fp4 FLOP/s or None, GPU-to-GPU link per GPU in B/s, both directions, or None for PCIe only)
FP4_AND_LINK = {
    "H100-SXM": (None, 900 * GB), "H200": (None, 900 * GB), "A100-80GB": (None, 600 * GB),
    "B200": (9000 * T, 1800 * GB),        # HGX B200: FP4 72 PFLOP/s dense over 8 GPUs; NVLink 5 1.8 TB/s
    "B300": (13_125 * T, 1800 * GB),      # HGX B300: FP4 105 PFLOP/s dense over 8 GPUs
    "GB200": (10_000 * T, 1800 * GB),     # GB200 superchip: FP4 40 PFLOP/s sparse over 2 GPUs, halved
    "GB200-NVL72": (720_000 * T, 130 * T),  # FP4 1,440 PFLOP/s sparse; NVLink Switch 130 TB/s
    "MI300X": (None, 896 * GB), "MI355X": (10_000 * T, 1075 * GB), "L40S": (None, None), "RTX-3090": (None, None),
}


def test_the_table_holds_exactly_these_gpus():
    assert set(GPUS) == set(DATASHEETS)


@pytest.mark.parametrize("name", sorted(DATASHEETS))
def test_each_gpu_against_its_datasheet(name):
    label, cuda_gib, bw, bf16, fp8 = DATASHEETS[name]
    gpu = GPUS[name]
    assert gpu.name == name and gpu.source
    assert gpu.memory_bytes == label
    assert abs(gpu.cuda_memory_bytes - cuda_gib * GiB) <= 36 and type(gpu.cuda_memory_bytes) is int
    assert gpu.bandwidth_bytes_per_s == round(bw) and gpu.bf16_flop_per_s == bf16 and gpu.fp8_flop_per_s == fp8


def test_gib_to_whole_bytes():
    # the helper the table is built with, called directly (it runs at import, before a mutation test can
    # switch a mutant on): 1.5 x 2^30 = 1,610,612,736 B exactly; 79.18 x 1,073,741,824 = 85,018,877,624.32
    # rounds to 85,018,877,624 B ([chains]'s 85.02 GB); 0.0000000005 GiB = 0.54 B rounds to 1
    assert _gib(1.5) == 1_610_612_736 and type(_gib(1.5)) is int
    assert _gib(79.18) == 85_018_877_624
    assert _gib(5e-10) == 1


def test_h100_cuda_total_and_ridge():
    # [chains]: CUDA reports 85.02 GB on an 80 GB H100; round(79.18 x 2^30) = 85,018,877,624
    assert get_gpu("h100").cuda_memory_bytes == 85_018_877_624
    # 989e12 / 3.35e12 = 295.2 FLOP/byte ([kv-math])
    assert round(get_gpu("H100-SXM").ridge_flop_per_byte, 1) == 295.2


@pytest.mark.parametrize("alias,name", [
    ("h100", "H100-SXM"), ("H100 SXM5", "H100-SXM"), ("h100-80gb", "H100-SXM"), ("h100sxm", "H100-SXM"),
    ("h100-pcie", "H100-PCIe"), ("h200", "H200"), ("b200", "B200"), ("a100", "A100-80GB"),
    ("a100-80g", "A100-80GB"), ("a100-80gb", "A100-80GB"), ("a100-40g", "A100-40GB"), ("a100-40gb", "A100-40GB"),
    ("4090", "RTX-4090"), ("rtx4090", "RTX-4090"), ("3090", "RTX-3090"), ("rtx3090", "RTX-3090"),
    ("mi300", "MI300X"), ("mi300x", "MI300X"), (" l40s ", "L40S"), ("T4", "T4"), ("a10g", "A10G"),
    ("b300", "B300"), ("gb200", "GB200"), ("nvl72", "GB200-NVL72"), ("mi355x", "MI355X"),
])
def test_aliases(alias, name):
    assert get_gpu(alias).name == name


def test_unknown_gpu_lists_the_known_ones():
    with pytest.raises(GPUError, match=r"unknown GPU 'v100' \(known: H100-SXM, H100-PCIe, H200, "):
        get_gpu("v100")


@pytest.mark.parametrize("name", sorted(FP4_AND_LINK))
def test_fp4_and_interconnect(name):
    fp4, link = FP4_AND_LINK[name]
    gpu = GPUS[name]
    assert (gpu.fp4_flop_per_s, gpu.interconnect_bytes_per_s) == (fp4, link)
    if link is not None:         # the figure cites its link
        assert "NVLink" in gpu.source or "Infinity Fabric" in gpu.source
    if fp4 is not None:
        assert "FP4" in gpu.source


def test_peak_by_dtype():
    b300 = get_gpu("b300")
    assert (b300.peak_flop_per_s(), b300.peak_flop_per_s("fp8"), b300.peak_flop_per_s("fp4")) == (
        2250 * T, 4500 * T, 13_125 * T)
    with pytest.raises(GPUError, match="H100-SXM has no dense fp4"):
        get_gpu("H100-SXM").peak_flop_per_s("fp4")
    with pytest.raises(GPUError, match="dtype"):
        b300.peak_flop_per_s("int3")


def test_labels_as_the_vendor_writes_them():
    # the RTX 3090's 24 GiB (24 chips of 8 Gbit) is sold as "24 GB": dividing by 10^9 would print 26 GB
    assert GPUS["RTX-3090"].memory_bytes / GB == pytest.approx(25.77, abs=0.01)
    assert GPUS["RTX-3090"].label == "24 GB"
    assert [GPUS[n].label for n in ("H100-SXM", "H200", "B300", "GB200", "T4")] == [
        "80 GB", "141 GB", "288 GB", "186 GB", "16 GB"]
    assert GPUS["GB200-NVL72"].label == "13.4 TB"     # NVIDIA: "up to 13.4 TB" (72 x 186 GB = 13,392 GB)


def test_a_domain_row_is_not_a_gpu():
    from kvlib.gpus import single_gpus
    assert GPUS["GB200-NVL72"].gpus == 72 and GPUS["GB200"].gpus == 1
    assert "GB200-NVL72" not in single_gpus() and set(single_gpus()) == set(GPUS) - {"GB200-NVL72"}
    # the domain is 72 of its GPUs
    one, rack = GPUS["GB200"], GPUS["GB200-NVL72"]
    assert (rack.memory_bytes, rack.bandwidth_bytes_per_s, rack.bf16_flop_per_s) == (
        72 * one.memory_bytes, 72 * one.bandwidth_bytes_per_s, 72 * one.bf16_flop_per_s)


def test_cli_prints_the_label(capsys):
    from kvlib.cli import main
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith("RTX-3090"))
    assert " 24 GB " in line and "26 GB" not in line.split("(")[0].replace("25.32 GB", "")
    assert main(["gpus", "--json"]) == 0
    rows = {r["name"]: r for r in __import__("json").loads(capsys.readouterr().out)}
    assert rows["RTX-3090"]["label"] == "24 GB" and rows["B300"]["fp4_flop_per_s"] == 13_125 * T
