"""Accelerators: memory on the label and as CUDA reports it, bandwidth, FLOP/s.

``memory_bytes`` is the label (decimal GB for most, GiB where the vendor
means GiB); ``cuda_memory_bytes`` is what ``torch.cuda.mem_get_info``
reports as total, which is what vLLM multiplies by its utilization. Where no
public log gives the CUDA figure, it is the label less the usual ECC/driver
reservation and the source says so. FLOP/s are dense (no 2:4 sparsity).

Taught in ch04_pool_paging (memory as CUDA reports it) and ch06_crossover (bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass

from .units import GB, GiB, TB


class GPUError(ValueError):
    """Unknown GPU name; the message lists the known ones."""


@dataclass(frozen=True)
class GPU:
    name: str
    memory_bytes: int            # on the label
    cuda_memory_bytes: int       # total as CUDA reports it
    bandwidth_bytes_per_s: int   # HBM/GDDR peak
    bf16_flop_per_s: int         # dense
    fp8_flop_per_s: int | None   # dense; None where the chip has no fp8 tensor cores
    source: str

    @property
    def ridge_flop_per_byte(self) -> float:
        """Arithmetic intensity where bf16 compute and bandwidth balance."""
        return self.bf16_flop_per_s / self.bandwidth_bytes_per_s


def _gib(x: float) -> int:
    return round(x * GiB)


_T = 10**12
GPUS = {
    "H100-SXM": GPU("H100-SXM", 80 * GB, _gib(79.18), int(3.35 * TB), 989 * _T, 1979 * _T,
                    "NVIDIA H100 datasheet (SXM5 80GB: 3.35 TB/s, 989 TFLOP/s bf16 dense); "
                    "CUDA total 79.18 GiB as in seed 000 and vLLM logs (79.19 GiB in log 12)"),
    "H100-PCIe": GPU("H100-PCIe", 80 * GB, _gib(79.18), int(2.0 * TB), 756 * _T, 1513 * _T,
                     "NVIDIA H100 datasheet (PCIe 80GB: 2.0 TB/s, 756 TFLOP/s bf16); CUDA total as SXM"),
    "H200": GPU("H200", 141 * GB, _gib(139.8), int(4.8 * TB), 989 * _T, 1979 * _T,
                "NVIDIA H200 datasheet (141 GB HBM3e, 4.8 TB/s); CUDA reports about 139.8 GiB"),
    "B200": GPU("B200", 192 * GB, _gib(178.4), 8 * TB, 2250 * _T, 4500 * _T,
                "NVIDIA DGX B200 datasheet per GPU (8 TB/s, 2.25 PFLOP/s bf16 dense); "
                "CUDA reports about 178.4 GiB (HGX B200 180 GB usable)"),
    "A100-80GB": GPU("A100-80GB", 80 * GB, _gib(79.15), int(2.039 * TB), 312 * _T, None,
                     "NVIDIA A100 datasheet (SXM 80GB: 2,039 GB/s, 312 TFLOP/s bf16); CUDA ~79.15 GiB"),
    "A100-40GB": GPU("A100-40GB", 40 * GB, _gib(39.39), int(1.555 * TB), 312 * _T, None,
                     "NVIDIA A100 datasheet (40GB: 1,555 GB/s, 312 TFLOP/s bf16); CUDA ~39.39 GiB"),
    "L40S": GPU("L40S", 48 * GB, _gib(44.4), 864 * GB, 362 * _T, 733 * _T,
                "NVIDIA L40S datasheet (48 GB GDDR6 ECC, 864 GB/s, 362 TFLOP/s bf16 dense); CUDA ~44.4 GiB"),
    "L4": GPU("L4", 24 * GB, _gib(22.03), 300 * GB, 121 * _T, 242 * _T,
              "NVIDIA L4 datasheet (24 GB, 300 GB/s, 121 TFLOP/s bf16 dense); CUDA ~22.03 GiB"),
    "A10G": GPU("A10G", 24 * GB, _gib(22.3), 600 * GB, 70 * _T, None,
                "AWS G5 / NVIDIA A10G (24 GB GDDR6, 600 GB/s, ~70 TFLOP/s bf16 dense); CUDA ~22.3 GiB"),
    "A10": GPU("A10", 24 * GB, _gib(22.06), 600 * GB, 125 * _T, None,
               "NVIDIA A10 datasheet (24 GB GDDR6, 600 GB/s, 125 TFLOP/s bf16 dense); CUDA ~22.06 GiB"),
    "RTX-4090": GPU("RTX-4090", 24 * GB, _gib(23.65), int(1.008 * TB), 165 * _T, 330 * _T,
                    "NVIDIA Ada whitepaper (24 GB GDDR6X, 1,008 GB/s, 165 TFLOP/s bf16 with fp32 acc.); CUDA ~23.65 GiB"),
    "RTX-3090": GPU("RTX-3090", 24 * GiB, _gib(23.58), 936 * GB, 71 * _T, None,
                    "NVIDIA Ampere GA102 whitepaper (24 GB GDDR6X: 24 x 8 Gb chips, i.e. 24 GiB; 936 GB/s, 71 TFLOP/s "
                    "bf16); CUDA 23.58 GiB in vLLM logs 07 and 14"),
    "T4": GPU("T4", 16 * GB, _gib(14.75), 320 * GB, 65 * _T, None,
              "NVIDIA T4 datasheet (16 GB, 320 GB/s, 65 TFLOP/s fp16; no bf16, fp16 figure given); CUDA ~14.75 GiB"),
    "MI300X": GPU("MI300X", 192 * GB, _gib(191.98), int(5.3 * TB), 1307 * _T, 2615 * _T,
                  "AMD Instinct MI300X datasheet (192 GB HBM3, 5.3 TB/s, 1,307 TFLOP/s bf16 dense); ROCm ~191.98 GiB"),
}

_ALIASES = {
    "h100": "H100-SXM", "h100-sxm5": "H100-SXM", "h100-80gb": "H100-SXM", "h100sxm": "H100-SXM",
    "h100-pcie": "H100-PCIe", "h200": "H200", "b200": "B200",
    "a100": "A100-80GB", "a100-80g": "A100-80GB", "a100-80gb": "A100-80GB",
    "a100-40g": "A100-40GB", "a100-40gb": "A100-40GB", "4090": "RTX-4090", "rtx4090": "RTX-4090",
    "3090": "RTX-3090", "rtx3090": "RTX-3090", "mi300": "MI300X", "mi300x": "MI300X",
}


def get_gpu(name: str) -> GPU:
    """Look up a GPU by name or alias, case-insensitively.

    >>> get_gpu("h100").cuda_memory_bytes / 10**9
    85.018877624
    """
    key = str(name).strip()
    for gpu_name in GPUS:
        if gpu_name.lower() == key.lower():
            return GPUS[gpu_name]
    alias = _ALIASES.get(key.lower().replace(" ", "-"))
    if alias:
        return GPUS[alias]
    raise GPUError(f"unknown GPU {name!r} (known: {', '.join(GPUS)})")
