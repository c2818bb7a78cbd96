#!/usr/bin/env python3
"""Golden bytes for moepack's MXFP4 packers, produced by running the REAL upstream Python code.

Tooling, not part of the build. It needs PyTorch (2.x; float8 dtypes for the FlashInfer/Marlin
families) and, optionally, Triton, plus a folder of upstream sources that this repository does
NOT ship (licences, and "never commit upstream code"). Populate it like this (the paths are the
upstream repositories' own, at the pinned versions):

  VENDOR/triton_kernels/...   triton-lang/triton v3.5.1 python/triton_kernels/triton_kernels:
                              tensor.py, tensor_details/layout.py,
                              tensor_details/layout_details/{base,strided,hopper_value,hopper_scale,
                              blackwell_value,blackwell_scale,cdna4_scale}.py (package __init__ files
                              may be empty; the @triton.jit helpers are not needed)
  VENDOR/vllm/vllm/...        vllm-project/vllm @ e9d1398d9:
                              model_executor/layers/quantization/utils/{mxfp4_utils,flashinfer_utils,
                              marlin_utils,marlin_utils_fp4}.py,
                              model_executor/layers/fused_moe/oracle/mxfp4.py,
                              model_executor/layers/fused_moe/experts/cutlass_moe.py
  VENDOR/flashinfer/flashinfer/...  flashinfer-ai/flashinfer @ v0.6.17: utils.py, fused_moe/core.py,
                              fused_moe/cute_dsl/blackwell_sm12x/moe_w4a16_fp4_helpers.py

  python3 tests/golden/make_mxfp4_goldens.py --vendor VENDOR --out OUTDIR

How upstream code is run: vLLM's and FlashInfer's modules import half of their packages, so the
needed top-level definitions are parsed out of the pinned files with `ast` and executed
unchanged in a namespace that provides what they reference; the triton_kernels package is
imported as a package (its two hardware queries, `target_info`, answer for the simulated
device). Platform queries (vLLM's `current_platform`, triton_kernels' capability checks) answer
for a SIMULATED device, so the SM90, SM100 and gfx950 branches all run on whatever machine this
runs on; the layout code itself is plain torch and does not depend on the device.

Whole vLLM functions are run wherever possible: `_swizzle_mxfp4` and the two MXFP4 kernel-format
converters (`convert_gpt_oss_weight_to_mxfp4_moe_kernel_format`,
`convert_weight_to_mxfp4_moe_kernel_format`), so the transposes, paddings, row reorders and
casts are upstream's. Compiled ops that cannot run here are replaced by stand-ins, and outputs
that depend on a stand-in say so in their `note`:
  * flashinfer `block_scale_interleave` / `nvfp4_block_scale_interleave` (C++/CUDA): FlashInfer's
    own pure-torch 128x4 swizzle `swizzle_block_scale` (same library and version), flattened as
    the op returns.
  * flashinfer `interleave_moe_weights_for_sm90_mixed_gemm` (CUDA): identity; its output is NOT
    recorded.
  * vLLM `_repack_marlin_experts` (gptq_marlin_repack, CUDA): returns None and the Marlin
    weights are not recorded, unless `--marlin-ops BUILD_DIR` is given on a machine with CUDA:
    then vLLM's gptq_marlin_repack.cu is compiled unchanged (as make_wna16_goldens.py does; that
    script's vendor files are needed too) and `_repack_marlin_experts` runs for real, through
    `_custom_ops.gptq_marlin_repack`, for both activation dtypes.

Output: one safetensors file per layout family (inputs as [E, ...] tensors, every output as the
flat bytes of its STORAGE, i.e. in data_ptr order, which is what the kernels read), with the
case list as JSON in the metadata key "golden_cases", plus a JSON summary on stdout.
"""

import dataclasses
import json
import sys
import types
import typing
from enum import Enum
from pathlib import Path

import torch

import golden_common as common

SEED = 20250521

# ---------------------------------------------------------------------------------------------
# Running upstream definitions
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# The simulated device
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Device:
    name: str
    cuda_capability: tuple | None = None  # (major, minor) on CUDA
    rocm_arch: str | None = None  # "gfx950", ...
    rocm_tp_le_2: bool = True  # vLLM's should_use_cdna4_mx_scale_swizzle needs TP <= 2
    torch_at_least_2_8_1: bool = True  # vLLM's SM90 swizzle switch


class SimulatedPlatform:
    """vLLM `current_platform` for the device in `self.device` (only what the code paths ask)."""

    device: Device = None

    def is_cuda(self):
        return self.device.cuda_capability is not None

    def is_rocm(self):
        return self.device.rocm_arch is not None

    def is_xpu(self):
        return False

    def is_cpu(self):
        return False

    def _capability(self):
        major, minor = self.device.cuda_capability
        return major * 10 + minor

    def is_device_capability(self, capability):
        return self.is_cuda() and self._capability() == capability

    def is_device_capability_family(self, capability):
        return self.is_cuda() and self._capability() // 10 == capability // 10


PLATFORM = SimulatedPlatform()


def cuda_capability_geq(major, minor=0):
    # triton_kernels.target_info semantics: False on HIP, else compare the CUDA capability.
    if PLATFORM.device.cuda_capability is None:
        return False
    return PLATFORM.device.cuda_capability >= (major, minor)


def is_hip_cdna4():
    return PLATFORM.device.rocm_arch == "gfx950"


# ---------------------------------------------------------------------------------------------
# Loading triton_kernels, vLLM and FlashInfer pieces
# ---------------------------------------------------------------------------------------------


class Recorder:
    """Stand-in for objects whose construction arguments are all that matters here."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def load_triton_kernels(vendor: Path):
    try:
        import triton  # noqa: F401  (real Triton when present: the modules import it)
        import triton.language  # noqa: F401
    except ImportError:
        common.stub_module("triton", jit=lambda f=None, **k: f if f else (lambda g: g), cdiv=lambda a, b: -(-a // b))
        common.stub_module("triton.language", constexpr=lambda x: x)
    for name, attr in (("triton.tools.tensor_descriptor", "TensorDescriptor"),
                       ("triton.tools.ragged_tma", "create_ragged_descriptor")):
        try:
            __import__(name)
        except ImportError:
            common.stub_module(name, **{attr: Recorder})

    pkg = types.ModuleType("triton_kernels")
    pkg.__path__ = [str(vendor / "triton_kernels")]
    sys.modules["triton_kernels"] = pkg
    common.stub_module("triton_kernels.target_info", cuda_capability_geq=cuda_capability_geq, is_hip_cdna4=is_hip_cdna4)
    common.stub_module("triton_kernels.reduction_details.reduce_bitmatrix", clear_sums=None, sum_bitmatrix_rows=None)
    common.stub_module("triton_kernels.matmul_ogs_details.opt_flags", update_opt_flags_constraints=lambda c: None)
    common.stub_module("triton_kernels.numerics", InFlexData=Recorder)
    common.stub_module("triton_kernels.matmul_ogs", FlexCtx=Recorder, PrecisionConfig=Recorder)
    import triton_kernels.tensor as tk_tensor
    import triton_kernels.tensor_details.layout  # noqa: F401

    compat = []
    if not hasattr(torch.uint8, "itemsize"):
        # torch < 2.1 (local dry runs only): torch.dtype has no itemsize; the device has torch 2.x.
        original = tk_tensor.bitwidth

        def bitwidth(t):
            if isinstance(t, torch.dtype):
                return torch.empty(0, dtype=t).element_size() * 8
            return original(t)

        tk_tensor.bitwidth = bitwidth
        compat.append("torch<2.1: triton_kernels.tensor.bitwidth shimmed")
    if not hasattr(torch, "float8_e4m3fn"):
        # torch < 2.1 (local dry runs only): the TRT-LLM branch only re-views bytes as e4m3.
        torch.float8_e4m3fn = torch.uint8
        compat.append("torch<2.1: float8_e4m3fn aliased to uint8 (views only)")
    return compat


def flashinfer_namespace(vendor: Path) -> dict:
    fi = vendor / "flashinfer" / "flashinfer"
    ns = {"torch": torch, "Union": typing.Union, "Optional": typing.Optional, "flashinfer_api": lambda f: f}
    common.exec_definitions(fi / "utils.py", ["srcToDstBlk16RowMap", "srcToDstBlk32RowMap", "get_shuffle_block_size",
                                              "get_shuffle_matrix_a_row_indices", "get_shuffle_matrix_sf_a_row_indices"], ns)
    common.exec_definitions(fi / "fused_moe" / "core.py", ["_maybe_get_cached_w3_w1_permute_indices",
                                                           "get_w2_permute_indices_with_cache",
                                                           "get_reorder_rows_for_gated_act_gemm_row_indices",
                                                           "reorder_rows_for_gated_act_gemm",
                                                           "interleave_moe_scales_for_sm90_mixed_gemm"], ns)
    common.exec_definitions(fi / "fused_moe" / "cute_dsl" / "blackwell_sm12x" / "moe_w4a16_fp4_helpers.py",
                            ["align_up", "swizzle_block_scale"], ns)
    return ns


STAND_IN_128X4 = ("flashinfer block_scale_interleave (C++ op) stood in by FlashInfer's pure-torch "
                  "swizzle_block_scale of the same version")


def install_flashinfer_stubs(fi: dict):
    def block_scale_interleave(unswizzled_sf):
        assert unswizzled_sf.dtype in (torch.uint8, torch.bfloat16)
        return fi["swizzle_block_scale"](unswizzled_sf).reshape(-1)  # the op returns a flat buffer

    def interleave_weights_unavailable(weight, quant_type="fp4"):
        return weight  # CUDA op; outputs that depend on it are not recorded

    common.stub_module("flashinfer", block_scale_interleave=block_scale_interleave,
                       nvfp4_block_scale_interleave=block_scale_interleave)
    common.stub_module("flashinfer.fp4_quantization", nvfp4_block_scale_interleave=block_scale_interleave,
                       block_scale_interleave=block_scale_interleave)
    common.stub_module("flashinfer.fused_moe", interleave_moe_scales_for_sm90_mixed_gemm=fi["interleave_moe_scales_for_sm90_mixed_gemm"],
                       interleave_moe_weights_for_sm90_mixed_gemm=interleave_weights_unavailable)
    common.stub_module("flashinfer.fused_moe.core", get_w2_permute_indices_with_cache=fi["get_w2_permute_indices_with_cache"],
                       _maybe_get_cached_w3_w1_permute_indices=fi["_maybe_get_cached_w3_w1_permute_indices"])


class MarlinInput:
    dtype = None  # None: 16-bit activations; torch.float8_e4m3fn: FP8 activations


class MarlinOps:
    loaded = None  # what load_marlin_ops built (the provenance), when the real repack runs


def vllm_namespace(vendor: Path) -> dict:
    v = vendor / "vllm" / "vllm" / "model_executor" / "layers"
    ns = {"torch": torch, "Any": typing.Any, "Union": typing.Union, "Enum": Enum, "logger": common.QuietLogger(),
          "current_platform": PLATFORM, "has_triton_kernels": lambda: True,
          "should_use_cdna4_mx_scale_swizzle": lambda: is_hip_cdna4() and PLATFORM.device.rocm_tp_le_2}

    def is_torch_equal_or_newer(version):
        assert version == "2.8.1", version
        return PLATFORM.device.torch_at_least_2_8_1

    ns["is_torch_equal_or_newer"] = is_torch_equal_or_newer
    common.exec_definitions(v / "quantization" / "utils" / "mxfp4_utils.py", ["_swizzle_mxfp4"], ns)
    common.exec_definitions(v / "quantization" / "utils" / "flashinfer_utils.py", ["swap_w13_to_w31"], ns)
    common.exec_definitions(v / "fused_moe" / "experts" / "cutlass_moe.py", ["swizzle_mxfp4_scales"], ns)

    marlin = {"torch": torch}
    common.exec_definitions(v / "quantization" / "utils" / "marlin_utils.py",
                            ["get_scale_perms", "marlin_permute_scales", "marlin_permute_bias"], marlin)
    marlin["get_marlin_input_dtype"] = lambda *a, **k: MarlinInput.dtype
    if MarlinOps.loaded:
        # vLLM's own per-expert loop and its _custom_ops wrapper, over the compiled CUDA op.
        custom = common.exec_definitions(vendor / "vllm" / "vllm" / "_custom_ops.py", ["gptq_marlin_repack"], {"torch": torch})
        marlin["ops"] = types.SimpleNamespace(gptq_marlin_repack=custom["gptq_marlin_repack"])
        common.exec_definitions(v / "quantization" / "utils" / "marlin_utils_fp4.py", ["_repack_marlin_experts"], marlin)
    else:
        marlin["_repack_marlin_experts"] = lambda *a, **k: None  # gptq_marlin_repack is a CUDA op
    common.exec_definitions(v / "quantization" / "utils" / "marlin_utils_fp4.py",
                            ["mxfp4_marlin_process_scales", "prepare_moe_mxfp4_layer_for_marlin"], marlin)
    common.stub_module("vllm.model_executor.layers.quantization.utils.marlin_utils_fp4",
                       prepare_moe_mxfp4_layer_for_marlin=marlin["prepare_moe_mxfp4_layer_for_marlin"])

    ns["all_close_1d"] = lambda x: bool(torch.allclose(x, x[0].expand_as(x)))
    ns["_pack_deepgemm_mxfp4_scales"] = None
    ns["MoEActivation"] = Enum("MoEActivation", {"SILU": "silu", "SITU": "situ", "SWIGLUOAI": "swigluoai"})
    common.exec_definitions(v / "fused_moe" / "oracle" / "mxfp4.py",
                            ["Mxfp4MoeBackend", "TRTLLM_BACKENDS", "TRITON_BACKENDS", "B12X_BACKENDS",
                      "convert_gpt_oss_weight_to_mxfp4_moe_kernel_format",
                      "convert_weight_to_mxfp4_moe_kernel_format"], ns)
    return ns


# ---------------------------------------------------------------------------------------------
# Inputs, storage bytes, the golden file
# ---------------------------------------------------------------------------------------------


def storage_order(t: torch.Tensor) -> torch.Tensor:
    """`t`'s elements in memory order (what data_ptr() holds): dims sorted by stride, then
    flattened. Refuses tensors that are not a permutation of a dense buffer."""
    order = sorted(range(t.ndim), key=lambda d: (t.stride(d), t.shape[d]), reverse=True)
    dense = t.permute(*order)
    assert dense.is_contiguous(), f"not a dense permutation: shape {tuple(t.shape)} stride {t.stride()}"
    return dense.reshape(-1)


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    return storage_order(t).contiguous().view(torch.uint8).cpu()


class Family:
    def __init__(self, name: str):
        self.name, self.tensors, self.cases = name, {}, []

    def add_input(self, key: str, t: torch.Tensor):
        assert key not in self.tensors
        self.tensors[key] = t.detach().contiguous().cpu()

    def add_output(self, key: str, t: torch.Tensor, *, layout: str, input_key: str, note: str = ""):
        """Records one packed tensor: `layout` applied per expert to `input_key` must give these
        bytes (storage order); shape/stride/dtype are those of the tensor vLLM holds, for the record."""
        assert key not in self.tensors and input_key in self.tensors
        self.tensors[key] = as_bytes(t)
        self.cases.append({"output": key, "input": input_key, "layout": layout,
                           "shape": [int(s) for s in t.shape], "stride": [int(s) for s in t.stride()],
                           "dtype": str(t.dtype).replace("torch.", ""), "note": note})

    def save(self, out: Path, provenance: dict):
        path = out / f"golden_{self.name}_mxfp4.safetensors"
        meta = {"golden_cases": json.dumps(self.cases), "provenance": json.dumps(provenance)}
        try:
            from safetensors.torch import save_file
        except ImportError:  # local dry runs without the package: the same container, written by hand
            save_file = write_safetensors
        save_file(self.tensors, str(path), metadata=meta)
        return path


SAFETENSORS_DTYPES = {torch.uint8: "U8", torch.int32: "I32", torch.float32: "F32", torch.bfloat16: "BF16"}


def write_safetensors(tensors: dict, path: str, metadata: dict):
    Path(path).write_bytes(common.safetensors_bytes(tensors, metadata, SAFETENSORS_DTYPES))


def random_bytes(gen, shape, low=0, high=256):
    return torch.randint(low, high, shape, generator=gen, dtype=torch.int64).to(torch.uint8)


def random_bias(gen, shape):
    return (torch.randn(shape, generator=gen) * 4).to(torch.bfloat16)


def make_layer(**tensors):
    return types.SimpleNamespace(params_dtype=torch.bfloat16, **tensors)


# ---------------------------------------------------------------------------------------------
# Layout ids (packers/registry.cpp)
# ---------------------------------------------------------------------------------------------

TK = "v3.5.1"
ID_STRIDED = f"triton_kernels.Strided({TK})"
ID_STRIDED_PAD4 = f"triton_kernels.Strided(k_groups_pad=4,{TK})"
ID_HOPPER_VALUE = f"triton_kernels.HopperMXValue(mx_axis=1,{TK})"
ID_HOPPER_SCALE = "triton_kernels.HopperMXScale(mx_axis=1,num_warps={},k_groups_pad=4," + TK + ")"
ID_BW_VALUE = f"triton_kernels.BlackwellMXValue({TK})"
ID_BW_SCALE = f"triton_kernels.BlackwellMXScale({TK})"
ID_CDNA4_SCALE = f"triton_kernels.CDNA4MXScale({TK})"
ID_SHUFFLE = "vllm.mxfp4_triton_shuffle_weight(e9d1398d9)"
ID_BIAS_F32 = "vllm.bias_f32"
FI = common.FLASHINFER


def pipe(*ids):
    return " | ".join(ids)


def trtllm_id(tensor, rows):
    return {"weight": f"flashinfer.trtllm_shuffle_matrix_a(rows={rows},epilogue_tile_m=128,{FI})",
            "scale": f"flashinfer.trtllm_shuffle_matrix_sf_a(rows={rows},epilogue_tile_m=128,sf=128x4,{FI})",
            "bias": f"flashinfer.trtllm_shuffle_bias(rows={rows},epilogue_tile_m=128,f32,{FI})"}[tensor]


def fi_cutlass_id(tensor, rows):
    return {"weight": f"flashinfer.cutlass_mxfp4_weight(rows={rows},{FI})",
            "scale_128x4": f"flashinfer.block_scale_interleave(rows={rows},sf=128x4,{FI})",
            "scale_sm90": f"flashinfer.interleave_moe_scales_for_sm90_mixed_gemm(rows={rows},group_size=32,{FI})",
            "bias_bf16": f"flashinfer.cutlass_bias(rows={rows},bf16,{FI})"}[tensor]


# ---------------------------------------------------------------------------------------------
# The cases
# ---------------------------------------------------------------------------------------------

SM90 = Device("sm90", cuda_capability=(9, 0))
SM90_OLD_TORCH = Device("sm90_torch_lt_2_8_1", cuda_capability=(9, 0), torch_at_least_2_8_1=False)
SM100 = Device("sm100", cuda_capability=(10, 0))
GFX950 = Device("gfx950", rocm_arch="gfx950")
GFX942 = Device("gfx942", rocm_arch="gfx942")


def triton_family(ns, gen, dev) -> Family:
    fam = Family("triton")
    swizzle = ns["_swizzle_mxfp4"]
    E = 2

    def run(device, w, s, **kw):
        PLATFORM.device = device
        qw, _flex, qs = swizzle(w, s, **kw)
        return qw.storage.data, qs.storage.data

    # _swizzle_mxfp4 alone, per simulated device. Sizes: N, K with K % 32 == 0, awkward where the
    # layout pads (N not a multiple of 16/128/256, K/2 not of 32/128, K/32 not of 4/8).
    cuda_sizes = [(64, 64), (96, 160), (256, 64), (72, 96)]
    for n, k in cuda_sizes:
        tag = f"n{n}_k{k}"
        w, s = random_bytes(gen, (E, n, k // 2)).to(dev), random_bytes(gen, (E, n, k // 32)).to(dev)
        fam.add_input(f"{tag}/w", w)
        fam.add_input(f"{tag}/s", s)
        qw, qs = run(SM90, w, s)
        fam.add_output(f"{tag}/sm90/w", qw, layout=ID_HOPPER_VALUE, input_key=f"{tag}/w")
        fam.add_output(f"{tag}/sm90/s", qs, layout=ID_HOPPER_SCALE.format(8), input_key=f"{tag}/s")
        _, qs4 = run(SM90, w, s, num_warps=4)
        fam.add_output(f"{tag}/sm90_warps4/s", qs4, layout=ID_HOPPER_SCALE.format(4), input_key=f"{tag}/s")
        qw, qs = run(SM90_OLD_TORCH, w, s)
        fam.add_output(f"{tag}/sm90_torch_lt_2_8_1/s", qs, layout=ID_STRIDED_PAD4, input_key=f"{tag}/s")
        if (n, k) == (96, 160):  # identity weights: one size is enough
            fam.add_output(f"{tag}/sm90_torch_lt_2_8_1/w", qw, layout=ID_STRIDED, input_key=f"{tag}/w")
            qw, qs = run(GFX942, w, s)
            fam.add_output(f"{tag}/gfx942/w", qw, layout=ID_STRIDED, input_key=f"{tag}/w")
            fam.add_output(f"{tag}/gfx942/s", qs, layout=ID_STRIDED, input_key=f"{tag}/s")
        qw, qs = run(SM100, w, s)
        if n != 256:  # mostly the 128-byte row padding at this N; the smaller N show the same
            fam.add_output(f"{tag}/sm100/w", qw, layout=ID_BW_VALUE, input_key=f"{tag}/w")
        fam.add_output(f"{tag}/sm100/s", qs, layout=ID_BW_SCALE, input_key=f"{tag}/s")

    # gfx950: the CDNA4 scale layout needs N % 32 == 0 and (K/32) % 8 == 0 (vLLM pads I, H to 256).
    for n, k in [(64, 256), (96, 256), (32, 512)]:
        tag = f"n{n}_k{k}"
        w, s = random_bytes(gen, (E, n, k // 2)).to(dev), random_bytes(gen, (E, n, k // 32)).to(dev)
        fam.add_input(f"{tag}/w", w)
        fam.add_input(f"{tag}/s", s)
        qw, qs = run(GFX950, w, s)
        fam.add_output(f"{tag}/gfx950/s", qs, layout=ID_CDNA4_SCALE, input_key=f"{tag}/s")

    # The whole converters, TRITON backend, on SM90: gpt-oss (no reorder) and the generic converter
    # (shuffle_weight on w13 weight/scale/bias before the swizzle). I = 64, H = 192. (On SM100 they
    # call the same _swizzle_mxfp4 as the cases above; left out to keep the file small.)
    i_size, h_size = 64, 192
    inputs = {
        "w13_weight": random_bytes(gen, (E, 2 * i_size, h_size // 2)),
        "w13_weight_scale": random_bytes(gen, (E, 2 * i_size, h_size // 32)),
        "w13_bias": random_bias(gen, (E, 2 * i_size)),
        "w2_weight": random_bytes(gen, (E, h_size, i_size // 2)),
        "w2_weight_scale": random_bytes(gen, (E, h_size, i_size // 32)),
        "w2_bias": random_bias(gen, (E, h_size)),
    }
    for key, t in inputs.items():
        fam.add_input(f"moe/{key}", t)
    backend = ns["Mxfp4MoeBackend"].TRITON
    for device in (SM90,):
        value_id, scale_id = ID_HOPPER_VALUE, ID_HOPPER_SCALE.format(8)
        for converter in ("gpt_oss", "generic"):
            PLATFORM.device = device
            t = {k: v.to(dev) for k, v in inputs.items()}
            layer = make_layer(**t)
            fn = ns[f"convert_{'gpt_oss_' if converter == 'gpt_oss' else ''}weight_to_mxfp4_moe_kernel_format"]
            w13, w2, pc13, pc2, b13, b2 = fn(backend, layer, t["w13_weight"], t["w2_weight"], t["w13_weight_scale"],
                                             t["w2_weight_scale"], t["w13_bias"], t["w2_bias"])
            shuffled = converter == "generic"
            pre = (lambda i: pipe(ID_SHUFFLE, i)) if shuffled else (lambda i: i)
            p = f"moe/{converter}_triton/{device.name}"
            fam.add_output(f"{p}/w13_weight", w13.storage.data, layout=pre(value_id), input_key="moe/w13_weight")
            fam.add_output(f"{p}/w13_weight_scale", pc13.kwargs["weight_scale"].storage.data, layout=pre(scale_id),
                           input_key="moe/w13_weight_scale")
            fam.add_output(f"{p}/w2_weight", w2.storage.data, layout=value_id, input_key="moe/w2_weight")
            fam.add_output(f"{p}/w2_weight_scale", pc2.kwargs["weight_scale"].storage.data, layout=scale_id,
                           input_key="moe/w2_weight_scale")
            fam.add_output(f"{p}/w13_bias", b13, layout=pipe(ID_BIAS_F32, ID_SHUFFLE) if shuffled else ID_BIAS_F32,
                           input_key="moe/w13_bias")
            fam.add_output(f"{p}/w2_bias", b2, layout=ID_BIAS_F32, input_key="moe/w2_bias")
    return fam


def flashinfer_family(ns, gen, dev) -> Family:
    fam = Family("flashinfer")
    # Row counts multiples of 128 and K/32 multiples of 4, as vLLM's padding guarantees (TRT-LLM:
    # I to 128 for gpt-oss, ERRATA 4; CUTLASS: I, H to 128).
    E, i_size, h_size = 2, 128, 128
    inputs = {
        "w13_weight": random_bytes(gen, (E, 2 * i_size, h_size // 2)),
        "w13_weight_scale": random_bytes(gen, (E, 2 * i_size, h_size // 32)),
        "w13_bias": random_bias(gen, (E, 2 * i_size)),
        "w2_weight": random_bytes(gen, (E, h_size, i_size // 2)),
        "w2_weight_scale": random_bytes(gen, (E, h_size, i_size // 32)),
        "w2_bias": random_bias(gen, (E, h_size)),
    }
    for key, t in inputs.items():
        fam.add_input(f"moe/{key}", t)
    B = ns["Mxfp4MoeBackend"]
    # w13 row order per converter: gpt-oss checkpoints are interleaved [g0,u0,...], the generic
    # converter's parameters stacked [w1; w3].
    trtllm_rows = {"gpt_oss": "swap_pairs", "generic": "w3w1_interleave"}
    cutlass_rows = {"gpt_oss": "deinterleave_up_first", "generic": "swap_halves"}

    def convert(converter, backend, device):
        PLATFORM.device = device
        t = {k: v.to(dev) for k, v in inputs.items()}
        layer = make_layer(**t)
        if converter == "gpt_oss":
            return ns["convert_gpt_oss_weight_to_mxfp4_moe_kernel_format"](
                backend, layer, t["w13_weight"], t["w2_weight"], t["w13_weight_scale"], t["w2_weight_scale"],
                t["w13_bias"], t["w2_bias"], _cache_permute_indices={})
        return ns["convert_weight_to_mxfp4_moe_kernel_format"](
            backend, layer, t["w13_weight"], t["w2_weight"], t["w13_weight_scale"], t["w2_weight_scale"],
            t["w13_bias"], t["w2_bias"], _cache_permute_indices={})

    for converter in ("gpt_oss", "generic"):
        # TRT-LLM-gen (both activation variants share the weight format).
        w13, w2, s13, s2, b13, b2 = convert(converter, B.FLASHINFER_TRTLLM_MXFP4_BF16, SM100)
        p, rows = f"moe/{converter}_trtllm", trtllm_rows[converter]
        fam.add_output(f"{p}/w13_weight", w13, layout=trtllm_id("weight", rows), input_key="moe/w13_weight")
        fam.add_output(f"{p}/w13_weight_scale", s13, layout=trtllm_id("scale", rows), input_key="moe/w13_weight_scale",
                       note=STAND_IN_128X4)
        fam.add_output(f"{p}/w13_bias", b13, layout=trtllm_id("bias", rows), input_key="moe/w13_bias")
        if converter == "gpt_oss":  # w2 bytes do not depend on the converter; record them once
            fam.add_output(f"{p}/w2_weight", w2, layout=trtllm_id("weight", "identity"), input_key="moe/w2_weight")
        fam.add_output(f"{p}/w2_weight_scale", s2, layout=trtllm_id("scale", "identity"),
                       input_key="moe/w2_weight_scale", note=STAND_IN_128X4)
        fam.add_output(f"{p}/w2_bias", b2, layout=trtllm_id("bias", "identity"), input_key="moe/w2_bias")

        # FlashInfer CUTLASS, MXFP8 activations (SM100): rows reordered, scales 128x4.
        w13, w2, s13, s2, b13, b2 = convert(converter, B.FLASHINFER_CUTLASS_MXFP4_MXFP8, SM100)
        p, rows = f"moe/{converter}_fi_cutlass_mxfp8", cutlass_rows[converter]
        fam.add_output(f"{p}/w13_weight", w13, layout=fi_cutlass_id("weight", rows), input_key="moe/w13_weight")
        fam.add_output(f"{p}/w13_weight_scale", s13, layout=fi_cutlass_id("scale_128x4", rows),
                       input_key="moe/w13_weight_scale", note=STAND_IN_128X4)
        fam.add_output(f"{p}/w13_bias", b13, layout=fi_cutlass_id("bias_bf16", rows), input_key="moe/w13_bias")
        if converter == "gpt_oss":
            fam.add_output(f"{p}/w2_weight", w2, layout=fi_cutlass_id("weight", "identity"), input_key="moe/w2_weight")
        fam.add_output(f"{p}/w2_weight_scale", s2, layout=fi_cutlass_id("scale_128x4", "identity"),
                       input_key="moe/w2_weight_scale", note=STAND_IN_128X4)
        fam.add_output(f"{p}/w2_bias", b2, layout=fi_cutlass_id("bias_bf16", "identity"), input_key="moe/w2_bias")

        # FlashInfer CUTLASS, BF16 activations (SM90): weights go through a CUDA op (not
        # recorded); the scale interleave is FlashInfer's pure-torch function.
        _w13, _w2, s13, s2, b13, b2 = convert(converter, B.FLASHINFER_CUTLASS_MXFP4_BF16, SM90)
        p = f"moe/{converter}_fi_cutlass_bf16"
        fam.add_output(f"{p}/w13_weight_scale", s13, layout=fi_cutlass_id("scale_sm90", rows),
                       input_key="moe/w13_weight_scale")
        fam.add_output(f"{p}/w2_weight_scale", s2, layout=fi_cutlass_id("scale_sm90", "identity"),
                       input_key="moe/w2_weight_scale")
        fam.add_output(f"{p}/w13_bias", b13, layout=fi_cutlass_id("bias_bf16", rows), input_key="moe/w13_bias")
        fam.add_output(f"{p}/w2_bias", b2, layout=fi_cutlass_id("bias_bf16", "identity"), input_key="moe/w2_bias")

    # vLLM CUTLASS W4A4 (compressed-tensors / INC MXFP4): `swizzle_mxfp4_scales(s, N, K)` per
    # expert, reshaped back to [N, K/32] and stacked, as those methods' process_weights_after_loading do.
    # Besides the converter's scales (K/32 = 4, one K tile), wider ones span several 128x4 K tiles.
    cutlass_inputs = {f"moe/{key}": inputs[key] for key in ("w13_weight_scale", "w2_weight_scale")}
    for n, ks in ((256, 12), (128, 8)):
        cutlass_inputs[f"sf/n{n}_ks{ks}"] = random_bytes(gen, (E, n, ks))
        fam.add_input(f"sf/n{n}_ks{ks}", cutlass_inputs[f"sf/n{n}_ks{ks}"])
    for key, s in cutlass_inputs.items():
        s = s.to(dev)
        n, ks = s.shape[1], s.shape[2]
        out = torch.stack([ns["swizzle_mxfp4_scales"](s[e], n, ks * 32).reshape(n, ks) for e in range(E)])
        fam.add_output(f"vllm_cutlass_w4a4/{key}", out, input_key=key,
                       layout="vllm.cutlass_moe.swizzle_mxfp4_scales(sf=128x4,e9d1398d9)")
    return fam


def marlin_family(ns, gen, dev) -> Family:
    fam = Family("marlin")
    E, i_size, h_size = 2, 128, 256  # Marlin pads I to 128, H to 256
    # E8M0 scale codes 1..249: vLLM asserts <= 249 for FP8 activations (the +6 bias must fit).
    inputs = {
        "w13_weight": random_bytes(gen, (E, 2 * i_size, h_size // 2)),
        "w13_weight_scale": random_bytes(gen, (E, 2 * i_size, h_size // 32), 1, 250),
        "w13_bias": random_bias(gen, (E, 2 * i_size)),
        "w2_weight": random_bytes(gen, (E, h_size, i_size // 2)),
        "w2_weight_scale": random_bytes(gen, (E, h_size, i_size // 32), 1, 250),
        "w2_bias": random_bias(gen, (E, h_size)),
    }
    for key in ("w13_weight_scale", "w13_bias", "w2_weight_scale", "w2_bias"):
        fam.add_input(f"moe/{key}", inputs[key])
    if MarlinOps.loaded:
        for key in ("w13_weight", "w2_weight"):
            fam.add_input(f"moe/{key}", inputs[key])
    for act, dtype in (("16bit", None), ("fp8", torch.float8_e4m3fn)):
        MarlinInput.dtype = dtype
        PLATFORM.device = SM90
        t = {k: v.to(dev) for k, v in inputs.items()}
        layer = make_layer(**t)
        w13, w2, s13, s2, b13, b2 = ns["convert_gpt_oss_weight_to_mxfp4_moe_kernel_format"](
            ns["Mxfp4MoeBackend"].MARLIN, layer, t["w13_weight"], t["w2_weight"], t["w13_weight_scale"],
            t["w2_weight_scale"], t["w13_bias"], t["w2_bias"])
        if MarlinOps.loaded:
            wid = f"vllm.gptq_marlin_repack(num_bits=4,fp4_codes,is_a_8bit={1 if dtype is not None else 0},e9d1398d9)"
            note = "vLLM's gptq_marlin_repack.cu compiled unchanged, run on " + torch.cuda.get_device_name()
            fam.add_output(f"moe/marlin_{act}/w13_weight", w13, layout=wid, input_key="moe/w13_weight", note=note)
            fam.add_output(f"moe/marlin_{act}/w2_weight", w2, layout=wid, input_key="moe/w2_weight", note=note)
        sid = f"vllm.mxfp4_marlin_process_scales(group_size=32,params_dtype=bf16,act={act},e9d1398d9)"
        fam.add_output(f"moe/marlin_{act}/w13_weight_scale", s13, layout=sid, input_key="moe/w13_weight_scale")
        fam.add_output(f"moe/marlin_{act}/w2_weight_scale", s2, layout=sid, input_key="moe/w2_weight_scale")
        if act == "16bit":
            bid = "vllm.marlin_permute_bias(params_dtype=bf16,e9d1398d9)"
            fam.add_output("moe/marlin/w13_bias", b13, layout=bid, input_key="moe/w13_bias")
            fam.add_output("moe/marlin/w2_bias", b2, layout=bid, input_key="moe/w2_bias")
    MarlinInput.dtype = None
    return fam


def main():
    ap = common.argument_parser(__doc__, samples=False)
    ap.add_argument("--out", type=Path, help="where the golden safetensors files go (omit for a dry run)")
    ap.add_argument("--families", default="triton,flashinfer,marlin")
    ap.add_argument("--marlin-ops", type=Path, help="build vLLM's gptq_marlin_repack.cu here and record the Marlin weights (CUDA)")
    args = ap.parse_args()
    if args.marlin_ops:
        if not torch.cuda.is_available():
            raise SystemExit("--marlin-ops needs CUDA: the repack is a CUDA kernel")
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import make_wna16_goldens  # its vendor files: the Marlin .cu sources and _custom_ops.py

        MarlinOps.loaded = make_wna16_goldens.load_marlin_ops(args.vendor, args.marlin_ops)

    families = args.families.split(",")
    # The Marlin family runs vLLM code only: a vendor folder without triton_kernels and
    # FlashInfer does for `--families marlin`.
    compat = load_triton_kernels(args.vendor) if families != ["marlin"] else []
    ns = vllm_namespace(args.vendor)
    if families != ["marlin"]:
        install_flashinfer_stubs(flashinfer_namespace(args.vendor))
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    provenance = {"triton_kernels": "v3.5.1", "vllm": common.VLLM, "flashinfer": common.FLASHINFER, "seed": SEED,
                  "torch": torch.__version__, "device": dev, "compat": compat}
    if families == ["marlin"]:
        provenance["loaded"] = "vLLM only (--families marlin: triton_kernels and FlashInfer are not loaded)"
    if MarlinOps.loaded:
        provenance["marlin_ops"] = MarlinOps.loaded
    builders = {"triton": triton_family, "flashinfer": flashinfer_family, "marlin": marlin_family}
    summary = {"provenance": provenance, "families": {}}
    failed = False
    for name in families:
        gen = torch.Generator().manual_seed(SEED)
        try:
            fam = builders[name](ns, gen, dev)
        except Exception as exc:  # keep the other families; report this one
            import traceback

            traceback.print_exc()
            summary["families"][name] = {"error": f"{type(exc).__name__}: {exc}"}
            failed = True
            continue
        entry = {"cases": fam.cases, "bytes": sum(t.numel() * t.element_size() for t in fam.tensors.values())}
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            entry["file"] = str(fam.save(args.out, provenance))
        summary["families"][name] = entry
    json.dump(summary, sys.stdout, indent=1)
    print()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
