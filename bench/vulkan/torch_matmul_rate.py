"""Tensor-core roofline for bench/vulkan: the f16 matmul rate PyTorch (cuBLAS) reaches on this GPU.

Prints one number, TFLOP/s, the best of several timed runs of an N^3 f16 matmul (N = 8192).
"""
import sys

import torch


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device for PyTorch", file=sys.stderr)
        return 1
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    best = float("inf")
    reps = 10
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            torch.matmul(a, b)
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / reps)
    print(f"{2.0 * n ** 3 / best / 1e12:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
