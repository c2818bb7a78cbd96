#!/usr/bin/env python3
"""Golden bytes for FlashInfer's SM90 mixed-GEMM FP4 weight interleave, made by its own CUDA kernel.

Tooling, not part of the build. It needs PyTorch with CUDA and nvcc (torch.utils.cpp_extension),
and the two FlashInfer v0.6.17 files that define the kernel, which this repository does not ship:

  VENDOR/flashinfer/csrc/nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/
      moe_gemm_mixed_utils.cu   (interleave_fp4_weights_for_sm90_mixed_gemm and its kernel)
      moe_gemm_mixed_utils.h

  python3 tests/golden/make_fi_sm90_interleave_golden.py --vendor VENDOR --build BUILD --out OUTDIR [--vllm-pipeline]

The .cu file is compiled unchanged. What FlashInfer's `interleave_moe_weights_for_sm90_mixed_gemm`
adds around it (csrc/fused_moe/cutlass_backend/flashinfer_cutlass_fused_moe_binding.cu @ v0.6.17)
is a loop over the experts of a contiguous [E, n, k/2] uint8 tensor calling the kernel's launcher
with rows = n and cols = k = 2 * size(2), quant_type 1 (FP4), into an empty_like output: the small
binding below does the same. vLLM e9d1398d9 calls it with "fp4" on both MXFP4 weights of the
FlashInfer CUTLASS BF16 path on SM90 (fused_moe/oracle/mxfp4.py); moepack's layout id for the w2
weight (rows kept in checkpoint order) is recorded.

With `--vllm-pipeline` the whole of vLLM's conversion runs too: make_mxfp4_goldens.py's namespace
(its vendor files: vLLM's oracle/mxfp4.py and helpers, FlashInfer's Python) executes
`convert_gpt_oss_weight_to_mxfp4_moe_kernel_format` unchanged for FLASHINFER_CUTLASS_MXFP4_BF16 on
a simulated SM90, with this compiled kernel behind `flashinfer.fused_moe.
interleave_moe_weights_for_sm90_mixed_gemm` instead of that script's identity stand-in. So the w13
weight (vLLM's gate/up de-interleave and w1/w3 swap, then the kernel: moepack's
rows=deinterleave_up_first), the w2 weight and both scale interleaves are recorded as vLLM leaves
them, from checkpoint-order inputs.

Output: golden_fi_sm90_interleave.safetensors with the inputs ([E, n, k/2] uint8), each output
as the flat bytes of its storage, and the case list in the metadata key "golden_cases" (the
schema of make_mxfp4_goldens.py, read by tests/packers/golden_test.cpp).
"""
import argparse
import json
import sys
from pathlib import Path

import torch

import golden_common as common

SEED = 20251128
FI = common.FLASHINFER
LAYOUT = f"flashinfer.interleave_moe_weights_for_sm90_mixed_gemm(rows=identity,fp4,{FI})"
KERNEL_DIR = Path("csrc/nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm")

BINDING = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include "moe_gemm_mixed_utils.h"

// As FlashInfer's interleave_moe_weights_for_sm90_mixed_gemm binding (quant_type 1): one launch
// per expert, rows = n, cols = k.
torch::Tensor interleave_fp4(torch::Tensor weight) {
  TORCH_CHECK(weight.is_cuda() && weight.dtype() == torch::kUInt8 && weight.dim() == 3);
  weight = weight.contiguous();
  auto out = torch::empty_like(weight);
  const int64_t experts = weight.size(0), n = weight.size(1), k = weight.size(2) * 2, per_expert = n * (k / 2);
  auto stream = at::cuda::getCurrentCUDAStream();
  for (int64_t e = 0; e < experts; ++e)
    tensorrt_llm::kernels::cutlass_kernels::interleave_fp4_weights_for_sm90_mixed_gemm(
        weight.data_ptr<uint8_t>() + e * per_expert, out.data_ptr<uint8_t>() + e * per_expert, static_cast<int>(n),
        static_cast<int>(k), stream);
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("interleave_fp4", &interleave_fp4); }
"""


def build(vendor: Path, build_dir: Path):
    from torch.utils.cpp_extension import load

    src = vendor / "flashinfer" / KERNEL_DIR
    build_dir.mkdir(parents=True, exist_ok=True)
    binding = build_dir / "binding.cu"
    binding.write_text(BINDING)
    module = load(name="fi_sm90_interleave", sources=[str(binding), str(src / "moe_gemm_mixed_utils.cu")],
                  extra_include_paths=[str(src)], build_directory=str(build_dir), verbose=False)
    return module, {"sources": [str(KERNEL_DIR / "moe_gemm_mixed_utils.cu"), str(KERNEL_DIR / "moe_gemm_mixed_utils.h")],
                    "flashinfer": FI, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}


def fi_id(kind, rows):
    if kind == "weight":
        return f"flashinfer.interleave_moe_weights_for_sm90_mixed_gemm(rows={rows},fp4,{FI})"
    return f"flashinfer.interleave_moe_scales_for_sm90_mixed_gemm(rows={rows},group_size=32,{FI})"


def vllm_pipeline_cases(vendor: Path, module, tensors: dict, cases: list):
    """vLLM's FLASHINFER_CUTLASS_MXFP4_BF16 conversion of gpt-oss-ordered MXFP4 experts, run whole
    on a simulated SM90 with the compiled interleave kernel."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import make_mxfp4_goldens as mx

    ns = mx.vllm_namespace(vendor)
    mx.install_flashinfer_stubs(mx.flashinfer_namespace(vendor))

    def interleave_weights(weight, quant_type="fp4"):
        assert quant_type == "fp4" and weight.is_contiguous()
        return module.interleave_fp4(weight)

    sys.modules["flashinfer.fused_moe"].interleave_moe_weights_for_sm90_mixed_gemm = interleave_weights
    mx.PLATFORM.device = mx.SM90
    gen = torch.Generator().manual_seed(SEED + 1)
    note = "vLLM's convert_gpt_oss_weight_to_mxfp4_moe_kernel_format run whole, FlashInfer's compiled kernel for the weight interleave"
    # The scale interleave needs K % 128 == 0 (w13: K = H, w2: K = I); the kernel n % 16, k % 64.
    for experts, i_size, h_size in [(2, 128, 128), (2, 128, 384)]:
        tag = f"vllm_e{experts}_i{i_size}_h{h_size}"
        inputs = {
            "w13_weight": mx.random_bytes(gen, (experts, 2 * i_size, h_size // 2)),
            "w13_weight_scale": mx.random_bytes(gen, (experts, 2 * i_size, h_size // 32)),
            "w13_bias": mx.random_bias(gen, (experts, 2 * i_size)),
            "w2_weight": mx.random_bytes(gen, (experts, h_size, i_size // 2)),
            "w2_weight_scale": mx.random_bytes(gen, (experts, h_size, i_size // 32)),
            "w2_bias": mx.random_bias(gen, (experts, h_size)),
        }
        t = {k: v.cuda() for k, v in inputs.items()}
        w13, w2, s13, s2, _b13, _b2 = ns["convert_gpt_oss_weight_to_mxfp4_moe_kernel_format"](
            ns["Mxfp4MoeBackend"].FLASHINFER_CUTLASS_MXFP4_BF16, mx.make_layer(**t), t["w13_weight"], t["w2_weight"],
            t["w13_weight_scale"], t["w2_weight_scale"], t["w13_bias"], t["w2_bias"], _cache_permute_indices={})
        torch.cuda.synchronize()
        for key in ("w13_weight", "w13_weight_scale", "w2_weight", "w2_weight_scale"):
            tensors[f"{tag}/{key}"] = inputs[key].contiguous()
        outputs = {"w13_weight": (w13, fi_id("weight", "deinterleave_up_first")),
                   "w2_weight": (w2, fi_id("weight", "identity")),
                   "w13_weight_scale": (s13, fi_id("scale", "deinterleave_up_first")),
                   "w2_weight_scale": (s2, fi_id("scale", "identity"))}
        for key, (out, layout) in outputs.items():
            tensors[f"{tag}/sm90/{key}"] = mx.as_bytes(out.cpu())
            cases.append({"output": f"{tag}/sm90/{key}", "input": f"{tag}/{key}", "layout": layout,
                          "shape": [int(s) for s in out.shape], "stride": [int(s) for s in out.stride()],
                          "dtype": str(out.dtype).replace("torch.", ""), "note": note})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vendor", type=Path, required=True)
    ap.add_argument("--build", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--vllm-pipeline", action="store_true",
                    help="also run vLLM's whole SM90 conversion with the kernel (make_mxfp4_goldens.py's vendor files)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs CUDA: the interleave is a CUDA kernel")
    module, ops = build(args.vendor, args.build)
    gen = torch.Generator().manual_seed(SEED)
    tensors, cases = {}, []
    # n % 16 == 0 and k % 64 == 0 (the kernel's rows in groups of 16, columns in runs of 64
    # values); k = 2880 is gpt-oss-20b's intermediate size.
    for experts, n, k in [(2, 16, 64), (2, 32, 128), (3, 48, 192), (1, 64, 320), (1, 128, 2880)]:
        tag = f"e{experts}_n{n}_k{k}"
        w = torch.randint(0, 256, (experts, n, k // 2), generator=gen, dtype=torch.int64).to(torch.uint8)
        out = module.interleave_fp4(w.cuda())
        torch.cuda.synchronize()
        tensors[f"{tag}/w"] = w.contiguous()
        tensors[f"{tag}/sm90_interleaved"] = out.cpu().reshape(-1).contiguous()
        cases.append({"output": f"{tag}/sm90_interleaved", "input": f"{tag}/w", "layout": LAYOUT,
                      "shape": [int(s) for s in out.shape], "stride": [int(s) for s in out.stride()], "dtype": "uint8",
                      "note": "FlashInfer's compiled kernel, one launch per expert as its binding does"})
    if args.vllm_pipeline:
        vllm_pipeline_cases(args.vendor, module, tensors, cases)
    provenance = {"flashinfer": FI, "vllm": common.VLLM, "seed": SEED, "torch": torch.__version__, "device": "cuda",
                  "compat": [], "ops": ops}
    args.out.mkdir(parents=True, exist_ok=True)
    from safetensors.torch import save_file

    path = args.out / "golden_fi_sm90_interleave.safetensors"
    save_file(tensors, str(path), metadata={"golden_cases": json.dumps(cases), "provenance": json.dumps(provenance)})
    json.dump({"file": str(path), "cases": len(cases), "ops": ops}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
