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
}


def test_the_table_holds_exactly_these_gpus():
    assert set(GPUS) == set(DATASHEETS)


@pytest.mark.parametrize("name", sorted(DATASHEETS))
def test_each_gpu_against_its_datasheet(name):
    label, cuda_gib, bw, bf16, fp8 = DATASHEETS[name]
    gpu = GPUS[name]
    assert gpu.name == name and gpu.source
    assert gpu.memory_bytes == label
    assert abs(gpu.cuda_memory_bytes - cuda_gib * GiB) <= 0.5 and type(gpu.cuda_memory_bytes) is int
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
])
def test_aliases(alias, name):
    assert get_gpu(alias).name == name


def test_unknown_gpu_lists_the_known_ones():
    with pytest.raises(GPUError, match=r"unknown GPU 'v100' \(known: H100-SXM, H100-PCIe, H200, "):
        get_gpu("v100")
