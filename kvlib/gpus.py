"""Accelerators: memory on the label and as CUDA reports it, bandwidth, FLOP/s.

``memory_bytes`` is the label (decimal GB for most, GiB where the vendor
means GiB); ``cuda_memory_bytes`` is what ``torch.cuda.mem_get_info``
reports as total, which is what vLLM multiplies by its utilization. Where no
public log gives the CUDA figure, it is the label less the usual ECC/driver
reservation and the source says so. FLOP/s are dense (no 2:4 sparsity):
vendors print the sparse figure first, twice the dense one, from Blackwell
on. ``fp4_flop_per_s`` is the dense FP4 (NVFP4 / MXFP4) tensor peak where the
chip has one; ``interconnect_bytes_per_s`` is the GPU-to-GPU link per GPU as
the vendor states it (NVLink / Infinity Fabric, both directions together:
NVLink 5 is 1.8 TB/s, 900 GB/s each way). ``gpus`` is 1 for a GPU; a row
for a whole NVLink domain (``GB200-NVL72``) sums its 72 GPUs' memory,
bandwidth and FLOP/s and gives the domain's NVLink total, for domain-level
arithmetic only (a model split over it, one KV pool); the per-GPU row is
``GB200``.

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
    fp4_flop_per_s: int | None = None            # dense; None where the chip has no fp4 tensor cores
    interconnect_bytes_per_s: int | None = None  # GPU-to-GPU link per GPU, both directions; None: PCIe only
    gpus: int = 1                                # GPUs the row stands for (72 for an NVL72 domain)
    memory_label: str = ""                       # the memory as the vendor's label writes it

    @property
    def ridge_flop_per_byte(self) -> float:
        """Arithmetic intensity where bf16 compute and bandwidth balance."""
        return self.bf16_flop_per_s / self.bandwidth_bytes_per_s

    @property
    def label(self) -> str:
        """The memory as the vendor writes it: "80 GB" for 80 x 10^9 B, and "24 GB" for the RTX 3090's
        24 GiB too (its 24 chips of 8 Gbit); dividing 24 GiB by 10^9 would print "26 GB".

        >>> get_gpu("RTX-3090").label, get_gpu("H100-SXM").label, get_gpu("GB200-NVL72").label
        ('24 GB', '80 GB', '13.4 TB')
        """
        if self.memory_label:
            return self.memory_label
        for unit in (GB, GiB):
            if self.memory_bytes % unit == 0:
                return f"{self.memory_bytes // unit} GB"
        return f"{self.memory_bytes / GB:.1f} GB"

    def peak_flop_per_s(self, dtype: str = "bf16") -> int:
        """Dense tensor peak [FLOP/s] for ``dtype`` ('bf16', 'fp8', 'fp4'); GPUError where the chip has none.

        >>> get_gpu("B300").peak_flop_per_s("fp4") / 10**15
        13.125
        """
        value = {"bf16": self.bf16_flop_per_s, "fp8": self.fp8_flop_per_s, "fp4": self.fp4_flop_per_s}.get(dtype, 0)
        if value == 0:
            raise GPUError(f"dtype must be one of bf16, fp8, fp4, got {dtype!r}")
        if value is None:
            raise GPUError(f"{self.name} has no dense {dtype} tensor peak")
        return value


def _gib(x: float) -> int:
    return round(x * GiB)


_T = 10**12
GPUS = {
    "H100-SXM": GPU("H100-SXM", 80 * GB, _gib(79.18), int(3.35 * TB), 989 * _T, 1979 * _T,
                    "NVIDIA H100 datasheet (SXM5 80GB: 3.35 TB/s, 989 TFLOP/s bf16 dense, NVLink 900 GB/s); "
                    "CUDA total 79.18 GiB as vLLM startup logs report it (79.19 GiB in one of them)",
                    interconnect_bytes_per_s=900 * GB),
    "H100-PCIe": GPU("H100-PCIe", 80 * GB, _gib(79.18), int(2.0 * TB), 756 * _T, 1513 * _T,
                     "NVIDIA H100 datasheet (PCIe 80GB: 2.0 TB/s, 756 TFLOP/s bf16, NVLink bridge 600 GB/s); "
                     "CUDA total as SXM", interconnect_bytes_per_s=600 * GB),
    "H200": GPU("H200", 141 * GB, _gib(139.8), int(4.8 * TB), 989 * _T, 1979 * _T,
                "NVIDIA H200 datasheet (141 GB HBM3e, 4.8 TB/s, NVLink 900 GB/s); CUDA reports about 139.8 GiB",
                interconnect_bytes_per_s=900 * GB),
    "B200": GPU("B200", 192 * GB, _gib(178.4), 8 * TB, 2250 * _T, 4500 * _T,
                "NVIDIA DGX B200 datasheet per GPU (8 TB/s, 2.25 PFLOP/s bf16 dense); HGX B200 datasheet "
                "(FP4 144 | 72 PFLOP/s sparse | dense for 8 GPUs: 9 PFLOP/s dense each; NVLink 1.8 TB/s per GPU); "
                "CUDA reports about 178.4 GiB (HGX B200 180 GB usable)",
                fp4_flop_per_s=9000 * _T, interconnect_bytes_per_s=1800 * GB),
    "B300": GPU("B300", 288 * GB, _gib(267.7), 8 * TB, 2250 * _T, 4500 * _T,
                "NVIDIA HGX B300 datasheet, per GPU of 8 (Blackwell Ultra: 288 GB HBM3e, 8 TB/s; FP16/BF16 36 and "
                "FP8 72 PFLOP/s sparse for 8 GPUs: 2.25 and 4.5 PFLOP/s dense each; FP4 105 PFLOP/s dense for 8: "
                "13.125 each; NVLink 5 1.8 TB/s per GPU); no public CUDA log: the label less about 0.5 GiB, "
                "as on B200", fp4_flop_per_s=13125 * _T, interconnect_bytes_per_s=1800 * GB),
    "GB200": GPU("GB200", 186 * GB, _gib(172.7), 8 * TB, 2500 * _T, 5000 * _T,
                 "NVIDIA GB200 NVL72 datasheet, one GPU of a GB200 superchip (the superchip: 372 GB HBM3e, 16 TB/s, "
                 "FP16/BF16 10, FP8 20, FP4 40 PFLOP/s sparse for its 2 GPUs: 2.5, 5 and 10 PFLOP/s dense each; "
                 "NVLink 3.6 TB/s, 1.8 TB/s per GPU); no public CUDA log: the label less about 0.5 GiB",
                 fp4_flop_per_s=10000 * _T, interconnect_bytes_per_s=1800 * GB),
    "GB200-NVL72": GPU("GB200-NVL72", 72 * 186 * GB, 72 * _gib(172.7), 72 * 8 * TB, 72 * 2500 * _T, 72 * 5000 * _T,
                       "NVIDIA GB200 NVL72 datasheet, the whole rack (72 GPUs: up to 13.4 TB HBM3e, 576 TB/s; "
                       "FP16/BF16 360, FP8 720, FP4 1,440 PFLOP/s sparse, half that dense; NVLink Switch 130 TB/s); "
                       "72 x the GB200 row", fp4_flop_per_s=72 * 10000 * _T, interconnect_bytes_per_s=130 * TB,
                       gpus=72, memory_label="13.4 TB"),
    "A100-80GB": GPU("A100-80GB", 80 * GB, _gib(79.15), int(2.039 * TB), 312 * _T, None,
                     "NVIDIA A100 datasheet (SXM 80GB: 2,039 GB/s, 312 TFLOP/s bf16, NVLink 600 GB/s); "
                     "CUDA ~79.15 GiB", interconnect_bytes_per_s=600 * GB),
    "A100-40GB": GPU("A100-40GB", 40 * GB, _gib(39.39), int(1.555 * TB), 312 * _T, None,
                     "NVIDIA A100 datasheet (40GB: 1,555 GB/s, 312 TFLOP/s bf16, NVLink 600 GB/s); CUDA ~39.39 GiB",
                     interconnect_bytes_per_s=600 * GB),
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
                  "AMD Instinct MI300X datasheet (192 GB HBM3, 5.3 TB/s, 1,307 TFLOP/s bf16 dense, Infinity Fabric "
                  "896 GB/s); ROCm ~191.98 GiB", interconnect_bytes_per_s=896 * GB),
    "MI325X": GPU("MI325X", 256 * GB, _gib(255.98), 6 * TB, 1307 * _T, 2615 * _T,
                  "AMD Instinct MI325X datasheet (256 GB HBM3E, 6 TB/s, 1,307.4 TFLOP/s bf16 and 2,614.9 fp8 dense, "
                  "Infinity Fabric 896 GB/s); ROCm total taken as the label less what MI300X loses",
                  interconnect_bytes_per_s=896 * GB),
    "MI355X": GPU("MI355X", 288 * GB, _gib(287.98), 8 * TB, 2500 * _T, 5000 * _T,
                  "AMD Instinct MI355X datasheet (288 GB HBM3E, 8 TB/s; FP16/BF16 2.5, FP8 5, MXFP4 10 PFLOP/s dense; "
                  "Infinity Fabric 1,075 GB/s); ROCm total taken as the label less what MI300X loses",
                  fp4_flop_per_s=10000 * _T, interconnect_bytes_per_s=1075 * GB),
}

_ALIASES = {
    "h100": "H100-SXM", "h100-sxm5": "H100-SXM", "h100-80gb": "H100-SXM", "h100sxm": "H100-SXM",
    "h100-pcie": "H100-PCIe", "h200": "H200", "b200": "B200",
    "a100": "A100-80GB", "a100-80g": "A100-80GB", "a100-80gb": "A100-80GB",
    "a100-40g": "A100-40GB", "a100-40gb": "A100-40GB", "4090": "RTX-4090", "rtx4090": "RTX-4090",
    "3090": "RTX-3090", "rtx3090": "RTX-3090", "mi300": "MI300X", "mi300x": "MI300X",
    "b300": "B300", "gb200": "GB200", "gb200-nvl72": "GB200-NVL72", "nvl72": "GB200-NVL72",
    "mi325x": "MI325X", "mi355x": "MI355X",
}


def single_gpus() -> tuple:
    """Names of the rows that are one GPU (``gpus == 1``): what a per-GPU choice (a dropdown, a drawn card)
    offers; an NVLink domain row stands for many.

    >>> "GB200" in single_gpus(), "GB200-NVL72" in single_gpus()
    (True, False)
    """
    return tuple(name for name, g in GPUS.items() if g.gpus == 1)


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
