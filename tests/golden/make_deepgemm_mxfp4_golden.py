#!/usr/bin/env python3
"""Golden bytes for the DeepGEMM MXFP4 weight-scale packing (vLLM backend DEEPGEMM_MXFP4).

Tooling, not part of the build. It needs PyTorch 2.x with CUDA, nvcc, and the upstream sources
make_fp8_goldens.py's DeepGEMM stand-in reads (this repository does not ship them):

  VENDOR/vllm/vllm/...       vllm-project/vllm @ e9d1398d9: utils/deep_gemm.py,
                             model_executor/layers/quantization/utils/fp8_utils.py,
                             model_executor/layers/fused_moe/oracle/mxfp4.py
  VENDOR/deep_gemm/include/  DeepGEMM's headers, as make_fp8_goldens.py's docstring lists them

  python3 tests/golden/make_deepgemm_mxfp4_golden.py --vendor VENDOR --out OUTDIR

What runs: vLLM's `_pack_deepgemm_mxfp4_scales` (oracle/mxfp4.py), unchanged, over E8M0 weight
scales of gpt-oss-style experts ([E, 2I, H/32] and [E, H, I/32] uint8). It calls fp8_utils.py's
`deepgemm_post_process_weight_scale_block` (the `byte << 23` upcast) and utils/deep_gemm.py's
`transform_sf_into_required_layout` wrapper, both unchanged, with `is_deep_gemm_e8m0_used()` true
as on every CUDA device vLLM's `support_deep_gemm` admits (SM90, SM100 family, SM120 family) with
the default VLLM_USE_DEEP_GEMM_E8M0. Behind the wrapper is make_fp8_goldens.py's DeepGEMM
stand-in: the host dispatch of csrc/apis/layout.hpp transliterated, and the packing kernel
`transpose_and_pack_fp32_into_ue8m0` compiled with nvcc from DeepGEMM's own headers, cross-checked
against DeepGEMM's torch fallback on every call. Both a simulated SM100 and a simulated SM120 run
(the SM120 branch: see DeepGemm.transform_sf_into_required_layout).

Output: golden_deepgemm_scales.safetensors, the layout-case schema of make_mxfp4_goldens.py (read
by tests/packers/golden_test.cpp): inputs [E, MN, K/32] uint8, each output the flat bytes of the
int32 tensor vLLM holds, in storage order.
"""
import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as common  # noqa: E402
import make_fp8_goldens as fp8  # noqa: E402  (the DeepGEMM stand-in and the simulated platform)
import make_mxfp4_goldens as mx  # noqa: E402  (random inputs, storage-order bytes)

SEED = 20261205
LAYOUT = "deep_gemm.transform_sf_into_required_layout(recipe=1x1x32,sm100,packed_ue8m0,mn_major,8b1392b9)"


def vllm_namespace(vendor: Path, deepgemm) -> dict:
    v = vendor / "vllm" / "vllm"
    ns = {"torch": torch, "logger": common.QuietLogger(), "current_platform": fp8.PLATFORM}
    ns["_lazy_init"] = lambda: None
    ns["_transform_sf_into_required_layout_impl"] = deepgemm.transform_sf_into_required_layout
    ns["_missing"] = None
    ns["is_deep_gemm_e8m0_used"] = lambda: fp8.PLATFORM.is_cuda() and fp8.PLATFORM.arch_major() in (9, 10, 12)
    common.exec_top_level(v / "utils" / "deep_gemm.py", ["transform_sf_into_required_layout"], ns)
    common.exec_top_level(v / "model_executor" / "layers" / "quantization" / "utils" / "fp8_utils.py",
                          ["_upcast_e8m0_to_fp32", "deepgemm_post_process_weight_scale_block"], ns)
    common.stub_module("vllm.model_executor.layers.quantization.utils.fp8_utils",
                       deepgemm_post_process_weight_scale_block=ns["deepgemm_post_process_weight_scale_block"])
    common.exec_top_level(v / "model_executor" / "layers" / "fused_moe" / "oracle" / "mxfp4.py",
                          ["_pack_deepgemm_mxfp4_scales"], ns)
    return ns


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vendor", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs CUDA: DeepGEMM's packing is a CUDA kernel")
    deepgemm = fp8.DeepGemm(args.vendor)
    if deepgemm.pack.lib is None:
        raise SystemExit(f"DeepGEMM's kernel did not build: {deepgemm.pack.error}")
    ns = vllm_namespace(args.vendor, deepgemm)
    gen = torch.Generator().manual_seed(SEED)
    tensors, cases = {}, []
    # MN a multiple of 4 (vLLM's MXFP4 sizes are multiples of 128; a view over padded rows is not
    # a dense buffer), K/32 among the launcher's instantiations: 8, 4, 5, 6 columns of scales.
    for experts, i_size, h_size in [(2, 128, 256), (3, 192, 160)]:
        tag = f"e{experts}_i{i_size}_h{h_size}"
        inputs = {"w13_weight_scale": mx.random_bytes(gen, (experts, 2 * i_size, h_size // 32)),
                  "w2_weight_scale": mx.random_bytes(gen, (experts, h_size, i_size // 32))}
        # Only the weights' shapes are read (E, 2I, H/2 and H, I/2): no values needed.
        w13 = torch.empty((experts, 2 * i_size, h_size // 2), dtype=torch.uint8, device="cuda")
        w2 = torch.empty((experts, h_size, i_size // 2), dtype=torch.uint8, device="cuda")
        for key, t in inputs.items():
            tensors[f"{tag}/{key}"] = t.contiguous()
        for target in ("sm100", "sm120"):
            fp8.PLATFORM.target = target
            s13, s2 = ns["_pack_deepgemm_mxfp4_scales"](w13, w2, inputs["w13_weight_scale"].cuda(),
                                                        inputs["w2_weight_scale"].cuda())
            torch.cuda.synchronize()
            for key, out in (("w13_weight_scale", s13), ("w2_weight_scale", s2)):
                tensors[f"{tag}/{target}/{key}"] = mx.as_bytes(out)
                cases.append({"output": f"{tag}/{target}/{key}", "input": f"{tag}/{key}", "layout": LAYOUT,
                              "shape": [int(s) for s in out.shape], "stride": [int(s) for s in out.stride()],
                              "dtype": str(out.dtype).replace("torch.", ""),
                              "note": f"vLLM's _pack_deepgemm_mxfp4_scales on a simulated {target}; " + fp8.STAND_IN_DEEPGEMM})
    provenance = {"vllm": common.VLLM, "deep_gemm": fp8.DEEPGEMM, "seed": SEED, "torch": torch.__version__,
                  "device": "cuda", "gpu": torch.cuda.get_device_name(), "kernel_cross_checks": deepgemm.cross_checks,
                  "compat": []}
    args.out.mkdir(parents=True, exist_ok=True)
    from safetensors.torch import save_file

    path = args.out / "golden_deepgemm_scales.safetensors"
    save_file(tensors, str(path), metadata={"golden_cases": json.dumps(cases), "provenance": json.dumps(provenance)})
    json.dump({"file": str(path), "cases": len(cases), "cross_checks": deepgemm.cross_checks}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
