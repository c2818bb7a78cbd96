#!/usr/bin/env python3
"""Why moepack refuses the W4A8 FP8 group scales that vLLM computes under torch.compile.

Tooling, not part of the build; needs a CUDA GPU with PyTorch and Triton. vLLM e9d1398d9's
convert_bf16_scales_to_fp8 (quantization/utils/quant_utils.py) quantizes each row of bf16 group
scales with QuantFP8(static=False, group_shape=PER_TOKEN). With the custom op disabled (the
default under torch.compile) vLLM runs QuantFP8.forward_native compiled by Inductor; otherwise the
CUDA kernel dynamic_per_token_scaled_fp8_quant. This script compiles the per-token branch of
forward_native the way CustomOp.maybe_compile does (torch.compile(dynamic=True,
backend="inductor")) and compares it, for every pair (row maximum a, value x) of finite bf16
numbers with |x| <= a, with two IEEE formulas:

  reciprocal:  scale = fl(a * fl(1/448)), q = e4m3(fl(x * fl(1/scale)))   (eager forward_native)
  division:    scale = fl(a / 448),       q = e4m3(fl(x / scale))         (the CUDA kernel,
                                                                           lib/convert/w4a8_cutlass.h)

It also compiles `reciprocal` alone and prints the PTX divisions Triton emits (for it and for the
fused QuantFP8 kernel).

Seen on an H100 (torch 2.11.0+cu130, Triton 3.6), 532,701,119 pairs: the compiled scales equal
the reciprocal formula's, but 4103 codes differ from it (Triton's reciprocal, in the fused
QuantFP8 kernel too, is div.full.f32, an approximation: 17569 of the 32639 row maxima get a
reciprocal other than the correctly rounded one); the eager forward_native matches the reciprocal formula exactly; the CUDA kernel's
division gives other scales for 232,222,124 pairs and other codes for 36,853. The compiled bytes
follow the GPU's approximate division, so moepack converts W4A8 only where vLLM runs the CUDA
kernel (lib/oracle/family_int8.cpp), whose arithmetic is IEEE.

  python3 tests/golden/check_w4a8_quant_fp8.py
"""
import glob
import os
import re
import tempfile

import torch

FP8_MAX = 448.0
MIN_SCALE = 1.0 / (FP8_MAX * 512.0)


def forward_native_per_token(x):
    # QuantFP8.forward_native, dynamic per-token branch (vLLM e9d1398d9, input_quant_fp8.py).
    x_max, _ = x.abs().max(dim=-1)
    x_max = x_max.unsqueeze(-1).to(torch.float32)
    scale = (x_max / FP8_MAX).clamp(min=MIN_SCALE)
    out = x.to(torch.float32) * scale.to(torch.float32).reciprocal()
    return out.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def ieee(a, x, divide):
    # float64 then one rounding to float32: exact for these products and quotients.
    a = a.double()
    if divide:
        scale = (a / 448.0).float().clamp(min=MIN_SCALE)
        q = (x.double() / scale.double()).float()
    else:
        scale = (a * torch.tensor(1.0 / 448.0, dtype=torch.float32).double()).float().clamp(min=MIN_SCALE)
        q = (x.double() * (1.0 / scale.double()).float().double()).float()
    return q.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def codes(t):
    return t.view(torch.uint8)


def main():
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp())
    dev = "cuda"
    compiled = torch.compile(forward_native_per_token, dynamic=True, backend="inductor")
    a_bits = torch.arange(1, 0x7F80, dtype=torch.int32, device=dev)  # positive finite bf16
    counts = dict(rows=0, compiled_scale=0, compiled_code=0, eager_scale=0, eager_code=0, division_scale=0, division_code=0)
    for lo in range(0, a_bits.numel(), 512):
        a = a_bits[lo:lo + 512]
        n = a + 1  # x runs over the bf16 bit patterns 0..a
        owner = torch.repeat_interleave(torch.arange(a.numel(), device=dev), n)
        start = torch.cumsum(n, 0) - n
        x = torch.arange(owner.numel(), device=dev, dtype=torch.int32) - start[owner].int()
        sign = torch.where(x % 3 == 0, 0x8000, 0).int()  # every third value negative
        rows = torch.stack([a[owner], x | sign], 1).short().view(torch.bfloat16)
        q_ref, s_ref = ieee(rows[:, :1], rows[:, 1:], divide=False)
        q_div, s_div = ieee(rows[:, :1], rows[:, 1:], divide=True)
        for name, fn in (("compiled", compiled), ("eager", forward_native_per_token)):
            q, s = fn(rows)
            counts[name + "_scale"] += (s != s_ref).sum().item()
            counts[name + "_code"] += (codes(q[:, 1:]) != codes(q_ref)).sum().item()
        counts["division_scale"] += (s_div != s_ref).sum().item()
        counts["division_code"] += (codes(q_div) != codes(q_ref)).sum().item()
        counts["rows"] += rows.shape[0]
    print(counts)

    scales = (a_bits.short().view(torch.bfloat16).double() * torch.tensor(1.0 / 448.0, dtype=torch.float32).double()).float().clamp(min=MIN_SCALE)
    recip = torch.compile(lambda s: s.reciprocal(), dynamic=True, backend="inductor")(scales)
    print("row maxima whose compiled reciprocal is not the correctly rounded one:",
          (recip != (1.0 / scales.double()).float()).sum().item(), "of", scales.numel())
    for path in glob.glob(os.path.join(os.environ["TRITON_CACHE_DIR"], "**", "*.ptx"), recursive=True):
        for line in open(path):
            if re.search(r"\b(div|rcp)\.", line):
                print(os.path.basename(path), line.strip())


if __name__ == "__main__":
    main()
