#!/usr/bin/env python3
"""PyTorch's device-to-device copy on the first CUDA GPU, the reference the memory roofline of
bench/vulkan/gauge.h is held against. Prints one line:

    torch_copy_gbs <GB/s> <device name>

GB/s = 1e9 bytes a second, counting every byte read and every byte written (a copy of N bytes
moves 2N). The best of 1 and 2 GiB copies, each the fastest of 20 timed with CUDA events after 5
warm-ups. Exits 1 (printing nothing on stdout) where torch or a CUDA device is missing.
"""
import sys

try:
    import torch
except Exception:  # noqa: BLE001 - any failure to import means no figure
    sys.exit(1)
if not torch.cuda.is_available():
    sys.exit(1)

best = 0.0
for size in (1 << 30, 2 << 30):
    a = torch.randint(0, 255, (size,), dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(5):
        b.copy_(a)
    torch.cuda.synchronize()
    for _ in range(20):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        b.copy_(a)
        e1.record()
        e1.synchronize()
        best = max(best, 2.0 * size / (e0.elapsed_time(e1) * 1e-3) / 1e9)
    del a, b
    torch.cuda.empty_cache()
print("torch_copy_gbs %.1f %s" % (best, torch.cuda.get_device_name(0)))
