#!/usr/bin/env python3
"""Golden bytes for moepack's FP8 and unquantized conversions, produced by running the REAL upstream code.

Tooling, not part of the build; the companion of make_nvfp4_goldens.py and make_mxfp4_goldens.py
(whose helpers it imports) and run the same way. It needs PyTorch 2.x with float8 dtypes, a CUDA
device (vLLM's `per_block_cast_to_fp8` is torch.compile'd and Inductor compiles it for the GPU;
DeepGEMM's scale packing is a CUDA kernel), nvcc, and a folder of upstream sources that this
repository does NOT ship. Populate it with the upstream repositories' own files, at their own paths:

  VENDOR/vllm/vllm/...        vllm-project/vllm @ e9d1398d9:
      _aiter_ops.py
      utils/math_utils.py, utils/deep_gemm.py
      model_executor/utils.py
      model_executor/layers/fused_moe/{activation,unquantized_fused_moe_method}.py
      model_executor/layers/fused_moe/oracle/{fp8,unquantized}.py
      model_executor/layers/fused_moe/experts/xpu_moe.py
      model_executor/layers/quantization/{fp8,modelopt,base_config}.py
      model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/
          compressed_tensors_moe_w8a8_fp8.py
      model_executor/layers/quantization/utils/{fp8_utils,flashinfer_utils,quant_utils,w8a8_utils}.py
  VENDOR/flashinfer/flashinfer/...  flashinfer-ai/flashinfer @ v0.6.17: utils.py, fused_moe/core.py,
      quantization/fp4_quantization.py, fused_moe/cute_dsl/blackwell_sm12x/moe_w4a16_fp4_helpers.py
  VENDOR/aiter/aiter/ops/shuffle.py   ROCm/aiter @ v0.1.19 (vLLM's docker/Dockerfile.rocm_base pin)
  VENDOR/deep_gemm/include/...        deepseek-ai/DeepGEMM (vLLM pins 8b1392b9, which the mirror
      lacks; its head 54e2261 was read): deep_gemm/include/deep_gemm/{common/{compile,exception,
      math,utils}.cuh, ptx/{ld_st,utils}.cuh, impls/smxx_layout.cuh}, and NVIDIA/cutlass's
      include/cutlass/detail/helper_macros.hpp (DeepGEMM's third-party/cutlass) as
      VENDOR/deep_gemm/include/cutlass/detail/helper_macros.hpp

  python3 tests/golden/make_fp8_goldens.py --vendor VENDOR --samples samples --out OUTDIR

The file golden_fp8_bf16.safetensors holds layer cases (metadata "golden_layer_cases", the schema
of golden_nvfp4.safetensors' layer cases, checked end to end by
tests/convert/upstream_goldens_test.cpp): one of the repository's FP8 or BF16 sample checkpoints,
some with seeded adversarial scales patched in ("golden_patch_sets"), loaded into one layer per
rank (TP 1 or 2, or EP 2) as vLLM allocates and loads it, then the quantization method's own
process_weights_after_loading, run whole:
  * Fp8MoEMethod (quantization/fp8.py; with _setup_kernel and get_fused_moe_quant_config),
    on MARLIN too: marlin_utils_fp8.py's prepare_fp8_moe_layer_for_marlin /
    prepare_mxfp8_moe_layer_for_marlin over vLLM's compiled gptq_marlin_repack, built as
    make_wna16_goldens.py builds it (its docstring's Marlin sources are needed too),
  * CompressedTensorsW8A8Fp8MoEMethod, ModelOptFp8MoEMethod, ModelOptMxFp8FusedMoE,
  * UnquantizedFusedMoEMethod (the class itself, executed with stub bases),
which run the per-tensor requantization of w13 to the larger scale and the input-scale maximum
(`process_fp8_weight_tensor_strategy_moe`, `process_fp8_input_tensor_strategy_moe`),
`convert_to_fp8_moe_kernel_format` / `convert_to_unquantized_kernel_format` whole (DeepGEMM's
UE8M0 requantization through the torch.compile'd `per_block_cast_to_fp8`, FlashInfer's w13->w31
swaps, BlockMajorK shuffles, per-tensor rotations and MXFP8 shuffles, the BF16 block layout,
XPU transposes, AITER's `shuffle_weight`) and `make_fp8_moe_quant_config` (which registers
FlashInfer CUTLASS's per-tensor g1_alphas / g2_alphas on the layer). Every parameter the layer
then holds is recorded by role and rank: whole when at most FULL_BYTES bytes (scalars, per-tensor
and block scales), as the SHA-256 of its storage bytes otherwise.

How upstream code is run: as in the two other scripts, the needed top-level definitions (and
single methods of classes whose bases are vLLM's class hierarchy) are parsed out of the pinned
files with `ast` and executed unchanged in a namespace that provides what they reference. The
device is simulated (vLLM's `current_platform` answers for the deployment's target), so every
device branch runs; tensors live on the CUDA device as vLLM holds them. Stand-ins, named in the
`note` of each output that depends on one:
  * vLLM `ops.scaled_fp8_quant` with a static per-tensor scale (CUDA op,
    csrc/libtorch_stable/quantization/w8a8/fp8/common.cu + csrc/quantization/w8a8/fp8/common.cuh
    `scaled_fp8_conversion<true>`, compiled without fast-math): x * (1.0f / scale) in fp32, clamped
    to +-448, rounded to nearest even E4M3 -- as torch ops on the GPU (IEEE fp32 division and
    multiply, torch's round-to-nearest-even cast). They differ only for NaN input (the kernel's
    fminf turns NaN into 448), which the checkpoints here do not hold. AITER (ROCm) cases use the
    same rounding (common.cuh's cvt_c10 on ROCm is assumed to round the same way).
  * DeepGEMM `transform_sf_into_required_layout`: its host dispatch (csrc/apis/layout.hpp: SM90 fp32
    128x128 scales returned after the shape checks; SM100 fp32 scales broadcast to rows with
    index_select(arange(mn) // gran_mn) and packed) is transliterated; the packing kernel itself,
    `transpose_and_pack_fp32_into_ue8m0` (deep_gemm/include/deep_gemm/impls/smxx_layout.cuh), is
    compiled with nvcc from DeepGEMM's headers and launched with the host code's parameters
    (csrc/jit_kernels/impls/smxx_layout.hpp: block_mn 48, 512 threads, 48 * sf_k * 4 bytes of
    shared memory, grid (ceil(mn / 48), groups), int32 output [G, mn, ceil(sf_k/4)] with strides
    (ceil(sf_k/4) * align(mn, 4), 1, align(mn, 4))); DeepGEMM's own torch fallback
    (`get_mn_major_tma_aligned_packed_ue8m0_tensor_torch`, transliterated) cross-checks it.
  * FlashInfer `block_scale_interleave` (C++ op, reached by `shuffle_matrix_sf_a` for MXFP8):
    FlashInfer's own pure-torch 128x4 `swizzle_block_scale` of the same version, as in the MXFP4
    goldens.
  * vLLM's weight loaders: per-expert checkpoints are stacked as RoutedExperts.weight_loader does
    (w13 rows [w1; w3], each the rank's TP slice of the intermediate extent; block scales sliced
    in blocks; per-channel w13 scales sliced by rows, w2's whole; per-tensor scales at [e][0] (w1),
    [e][1] (w3) and [e]; input scales at [e], the last one loaded (up_proj) winning, which the
    patches keep equal to the gate's); Llama-4's fused input-major tensors are transposed and
    chunked as llama4.py `load_moe_expert_weights` does, its scalar scales broadcast to every
    expert (ERRATA 16); gpt-oss BF16's fused tensors as gpt_oss.py `_load_weights_other` slices
    and permutes them (w2's bias on TP rank 0 only). EP ranks own linear blocks of experts.
  * `make_fp8_moe_kernel` / `make_unquantized_moe_kernel` (the experts objects, whose FP8 and BF16
    classes hold no weights of their own) and the quant-config records (`fp8_w8a8_moe_quant_config`
    and friends: records of the same references); `replace_parameter` is vLLM's own.
"""

import ctypes
import json
import subprocess
import sys
import tempfile
import types
import typing
from enum import Enum
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as common  # noqa: E402
import make_mxfp4_goldens as mx  # noqa: E402
import make_nvfp4_goldens as nv  # noqa: E402
import make_wna16_goldens as w16  # noqa: E402  (vLLM's compiled Marlin repack and marlin_utils_fp8)

SEED = 20250711
FULL_BYTES = 1024
VLLM = common.VLLM
FI = common.FLASHINFER
AITER = "v0.1.19"
DEEPGEMM = "54e2261 (vLLM pins 8b1392b9)"

STAND_IN_SCALED_FP8_QUANT = ("vLLM ops.scaled_fp8_quant (CUDA op) stood in by torch: fp32 x * (1.0f / scale), "
                             "clamp +-448, round-to-nearest-even E4M3")
STAND_IN_DEEPGEMM = ("DeepGEMM transform_sf_into_required_layout: host dispatch transliterated, the "
                     "transpose_and_pack_fp32_into_ue8m0 kernel compiled from DeepGEMM's headers")

# ---------------------------------------------------------------------------------------------
# The simulated device
# ---------------------------------------------------------------------------------------------

TARGETS = {  # target -> (platform kind, CUDA capability or ROCm arch)
    "sm80": ("cuda", 80), "sm86": ("cuda", 86), "sm89": ("cuda", 89), "sm90": ("cuda", 90), "sm100": ("cuda", 100), "sm110": ("cuda", 110),
    "sm120": ("cuda", 120), "gfx942": ("rocm", "gfx942"), "gfx950": ("rocm", "gfx950"), "xpu": ("xpu", None),
}


class Platform:
    """vLLM `current_platform` for the deployment's target (only what the code paths ask)."""

    simple_compile_backend = "inductor"
    target = "sm90"

    def _kind(self):
        return TARGETS[self.target][0]

    def is_cuda(self):
        return self._kind() == "cuda"

    def is_rocm(self):
        return self._kind() == "rocm"

    def is_xpu(self):
        return self._kind() == "xpu"

    def is_cpu(self):
        return False

    def is_fp8_fnuz(self):
        return self.target == "gfx942"  # never reached: moepack refuses gfx942 FP8 by name

    def fp8_dtype(self):
        return torch.float8_e4m3fn

    def is_device_capability(self, capability):
        return self.is_cuda() and TARGETS[self.target][1] == capability

    def is_device_capability_family(self, capability):
        return self.is_cuda() and TARGETS[self.target][1] // 10 == capability // 10

    def arch_major(self):
        return TARGETS[self.target][1] // 10


PLATFORM = Platform()


class Envs(types.SimpleNamespace):
    """vllm.envs with the defaults of the reference (envs.py)."""

    def is_set(self, name):
        return False


ENVS = Envs(VLLM_ROCM_MOE_PADDING=True, VLLM_ROCM_FP8_PADDING=True, VLLM_MXFP8_EMULATION_DEQUANT_AT_LOAD=True,
            VLLM_USE_DEEP_GEMM=True, VLLM_USE_DEEP_GEMM_E8M0=True, VLLM_MOE_USE_DEEP_GEMM=True)


# ---------------------------------------------------------------------------------------------
# Stand-ins for compiled ops
# ---------------------------------------------------------------------------------------------


def scaled_fp8_quant(input, scale=None, num_token_padding=None, scale_ub=None, use_per_token_if_dynamic=False,
                     output=None, group_shape=None):
    """ops.scaled_fp8_quant with a static per-tensor scale (the only use here)."""
    assert scale is not None and scale.numel() == 1 and input.ndim == 2 and num_token_padding is None
    inverse = 1.0 / scale.to(torch.float32).reshape(())
    x = (input.to(torch.float32) * inverse).clamp(-448.0, 448.0)
    return x.to(torch.float8_e4m3fn), scale


class DeepGemmPack:
    """DeepGEMM's transpose_and_pack_fp32_into_ue8m0, compiled with nvcc from DeepGEMM's headers."""

    # The kernel's own text is cut out of smxx_layout.cuh (as the Python is cut out with `ast`):
    # the header as a whole does not compile in one nvcc translation unit (its kernels declare the
    # same extern shared array with different types; DeepGEMM's JIT builds one kernel at a time).
    PROLOGUE = r"""
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <deep_gemm/common/math.cuh>
#include <deep_gemm/common/utils.cuh>
#include <deep_gemm/ptx/ld_st.cuh>
#include <deep_gemm/ptx/utils.cuh>

namespace deep_gemm {
"""
    LAUNCHER = r"""
}  // namespace deep_gemm

template <uint32_t SF_K>
static int launch(const float* sf, uint32_t* out, int groups, int mn) {
    constexpr uint32_t block_mn = 48, num_threads = 512;
    const int smem = block_mn * SF_K * 4;
    auto kernel = deep_gemm::transpose_and_pack_fp32_into_ue8m0<num_threads, block_mn, SF_K, 1, false>;
    if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    dim3 grid((mn + block_mn - 1) / block_mn, groups);
    kernel<<<grid, num_threads, smem>>>(const_cast<float*>(sf), out, static_cast<uint32_t>(mn), nullptr, 0u);
    return static_cast<int>(cudaDeviceSynchronize());
}

extern "C" int dg_pack(const float* sf, uint32_t* out, int groups, int mn, int sf_k) {
    switch (sf_k) {
        case 1: return launch<1>(sf, out, groups, mn);
        case 2: return launch<2>(sf, out, groups, mn);
        case 3: return launch<3>(sf, out, groups, mn);
        case 4: return launch<4>(sf, out, groups, mn);
        case 5: return launch<5>(sf, out, groups, mn);
        case 6: return launch<6>(sf, out, groups, mn);
        case 8: return launch<8>(sf, out, groups, mn);
        default: return -1;
    }
}
"""

    @staticmethod
    def kernel_text(header: str, name: str = "transpose_and_pack_fp32_into_ue8m0") -> str:
        """The template definition of kernel `name` in `header`, unchanged."""
        at = header.index("CUTLASS_GLOBAL void " + name)
        start = header.rindex("template <", 0, at)
        depth, i = 0, header.index("{", at)
        while True:
            depth += {"{": 1, "}": -1}.get(header[i], 0)
            i += 1
            if depth == 0:
                return header[start:i] + "\n"

    def __init__(self, vendor: Path):
        self.lib, self.error = None, None
        include = vendor / "deep_gemm" / "include"
        if not torch.cuda.is_available():
            self.error = "no CUDA device"
            return
        work = Path(tempfile.mkdtemp(prefix="dg_pack_"))
        header = (include / "deep_gemm" / "impls" / "smxx_layout.cuh").read_text()
        (work / "pack.cu").write_text(self.PROLOGUE + self.kernel_text(header) + self.LAUNCHER)
        cmd = ["nvcc", "-std=c++20", "-O2", "--expt-relaxed-constexpr", "-shared", "-Xcompiler", "-fPIC", "-gencode=arch=compute_90a,code=sm_90a",
               f"-I{include}", str(work / "pack.cu"), "-o", str(work / "pack.so")]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            self.error = "nvcc failed: " + run.stderr[-2000:]
            return
        self.lib = ctypes.CDLL(str(work / "pack.so"))

    def __call__(self, sf: torch.Tensor) -> torch.Tensor:
        batched = sf.unsqueeze(0) if sf.dim() == 2 else sf
        assert batched.dtype == torch.float32 and batched.is_contiguous() and batched.is_cuda
        groups, mn, sf_k = batched.shape
        assert (mn * sf_k) % 4 == 0 or groups == 1  # else DeepGEMM takes its torch path
        aligned = -(-mn // 4) * 4
        packed = -(-sf_k // 4)
        out = torch.empty_strided((groups, mn, packed), (packed * aligned, 1, aligned), dtype=torch.int32,
                                  device=sf.device)
        rc = self.lib.dg_pack(ctypes.c_void_p(batched.data_ptr()), ctypes.c_void_p(out.data_ptr()), groups, mn, sf_k)
        assert rc == 0, f"dg_pack failed: {rc}"
        return out.squeeze(0) if sf.dim() == 2 else out


def deepgemm_torch_pack(sf: torch.Tensor) -> torch.Tensor:
    """DeepGEMM get_mn_major_tma_aligned_packed_ue8m0_tensor_torch (smxx_layout.hpp), transliterated."""
    shaped = sf.unsqueeze(0) if sf.dim() == 2 else sf
    ue8m0 = shaped.view(torch.int32).bitwise_right_shift(23).to(torch.uint8)
    groups, mn, k = shaped.shape
    aligned_mn, aligned_k = -(-mn // 4) * 4, -(-k // 4) * 4
    padded = torch.zeros((groups, aligned_mn, aligned_k), dtype=torch.uint8, device=sf.device)
    padded[:, :mn, :k] = ue8m0
    padded = padded.view(-1).view(torch.int32).view(groups, aligned_mn, aligned_k // 4)
    out = torch.empty_strided((groups, aligned_mn, aligned_k // 4), (aligned_mn * (aligned_k // 4), 1, aligned_mn),
                              dtype=torch.int32, device=sf.device)
    out = out.copy_(padded)[:, :mn]
    return out.squeeze(0) if sf.dim() == 2 else out


class DeepGemm:
    """deep_gemm.transform_sf_into_required_layout (csrc/apis/layout.hpp) for the weight scales."""

    def __init__(self, vendor: Path):
        self.pack = DeepGemmPack(vendor)
        self.cross_checks = 0

    def transform_sf_into_required_layout(self, sf, mn, k, recipe, num_groups=None, is_sfa=None,
                                          disable_ue8m0_cast=False):
        arch = PLATFORM.arch_major()
        if len(recipe) == 3:
            assert is_sfa is not None
            gran_mn, gran_k = (recipe[0] if is_sfa else recipe[1]), recipe[2]
        else:
            assert is_sfa is None
            gran_mn, gran_k = recipe
        # check_sf_layout's shape checks
        assert sf.dtype in (torch.float32, torch.int32) and sf.dim() == (num_groups is not None) + 2
        assert sf.shape[-2] == -(-mn // gran_mn) and sf.shape[-1] == -(-k // (gran_k * (1 if sf.dtype == torch.float32 else 4)))
        if sf.dtype == torch.float32 and gran_mn == 1 and gran_k == 128 and (arch == 9 or disable_ue8m0_cast):
            raise NotImplementedError("get_mn_major_tma_aligned_tensor (activation scales) is not reached here")
        if sf.dtype == torch.float32 and gran_mn == 128 and gran_k == 128 and (arch == 9 or disable_ue8m0_cast):
            assert sf.is_contiguous()  # the SM90 SFB check
            return sf
        # SM100 and SM120 share this branch: vLLM's pin 8b1392b9 (the nv_dev branch, "SM120
        # support") is in no stored mirror; vllm-project/DeepGEMM's layout.hpp (92bda0c) reads
        # `arch_major == 10 or arch_major == 12` here, where the mirror's head has SM100 only.
        if sf.dtype == torch.float32 and gran_k in (32, 128) and arch in (10, 12):
            assert not disable_ue8m0_cast
            broadcast = sf if gran_mn == 1 else sf.index_select(
                -2, torch.arange(mn, device=sf.device).floor_divide_(gran_mn))
            reference = deepgemm_torch_pack(broadcast)
            if self.pack.lib is None:
                return reference  # local dry runs only (recorded in provenance.compat)
            out = self.pack(broadcast.contiguous())
            assert torch.equal(out, reference), "DeepGEMM's kernel and its torch fallback disagree"
            self.cross_checks += 1
            return out
        raise RuntimeError("DG_HOST_UNREACHABLE: Unknown SF transformation")


# ---------------------------------------------------------------------------------------------
# Quant-config and kernel records
# ---------------------------------------------------------------------------------------------


class QuantConfigRecord(types.SimpleNamespace):
    """FusedMoEQuantConfig as the FP8 / BF16 paths build it: the references it was given."""

    @classmethod
    def make(cls, quant_dtype=None, **kw):
        return cls(quant_dtype=quant_dtype, **kw)


def fp8_w8a8_moe_quant_config(**kw):
    return QuantConfigRecord(quant_dtype=torch.float8_e4m3fn, **kw)


def fp8_w8a16_moe_quant_config(**kw):
    return QuantConfigRecord(quant_dtype=None, **kw)


def biased_moe_quant_config(w13_bias, w2_bias, **kw):
    return QuantConfigRecord(w1_bias=w13_bias, w2_bias=w2_bias, **kw)


def make_kernel(*args, **kwargs):
    return types.SimpleNamespace(fused_experts=None, kwargs=kwargs)


class CustomOp:
    """vllm.model_executor.custom_op.CustomOp: only its class decorator is used at class creation."""

    @classmethod
    def register(cls, name):
        return lambda op_cls: op_cls


class QuantizationStrategy(str, Enum):  # compressed_tensors.quantization.QuantizationStrategy
    TENSOR = "tensor"
    CHANNEL = "channel"
    GROUP = "group"
    BLOCK = "block"
    TOKEN = "token"


# ---------------------------------------------------------------------------------------------
# Running upstream definitions
# ---------------------------------------------------------------------------------------------


def flashinfer(vendor: Path) -> dict:
    fi = mx.flashinfer_namespace(vendor)
    root = vendor / "flashinfer" / "flashinfer"
    common.exec_top_level(root / "fused_moe" / "core.py", ["convert_to_block_layout"], fi)

    def block_scale_interleave(unswizzled_sf):
        assert unswizzled_sf.dtype in (torch.uint8, torch.bfloat16)
        return fi["swizzle_block_scale"](unswizzled_sf).reshape(-1)  # the op returns a flat buffer

    fi["block_scale_interleave"] = block_scale_interleave
    common.exec_top_level(root / "quantization" / "fp4_quantization.py", ["shuffle_matrix_a", "shuffle_matrix_sf_a"], fi)
    mx.install_flashinfer_stubs(fi)
    common.stub_module("flashinfer", shuffle_matrix_a=fi["shuffle_matrix_a"], shuffle_matrix_sf_a=fi["shuffle_matrix_sf_a"],
                       reorder_rows_for_gated_act_gemm=fi["reorder_rows_for_gated_act_gemm"])
    common.stub_module("flashinfer.fused_moe", convert_to_block_layout=fi["convert_to_block_layout"])
    return fi


def method_class(name, path: Path, class_name: str, methods, ns: dict, static=()):
    """A class whose methods are `class_name`'s own, compiled unchanged from `path`."""
    body = {m: common.exec_method(path, class_name, m, ns) for m in methods}
    for m in static:
        body[m] = staticmethod(common.exec_method(path, class_name, m, ns))
    return type(name, (), body)


def vllm_namespace(vendor: Path, deepgemm: DeepGemm) -> dict:
    v = vendor / "vllm" / "vllm"
    layers = v / "model_executor" / "layers"
    quant = layers / "quantization"
    utils = quant / "utils"
    moe = layers / "fused_moe"
    ns = {"torch": torch, "F": torch.nn.functional, "Enum": Enum, "logger": common.QuietLogger(), "mk": nv.AnyAttr(),
          "TYPE_CHECKING": False, "current_platform": PLATFORM, "envs": ENVS,
          "ops": types.SimpleNamespace(scaled_fp8_quant=scaled_fp8_quant), "Sequence": typing.Sequence,
          "Any": typing.Any, "nn": torch.nn}
    common.exec_top_level(v / "utils" / "math_utils.py", ["cdiv", "round_up"], ns)
    common.exec_top_level(moe / "activation.py", ["MoEActivation"], ns)
    common.exec_top_level(v / "model_executor" / "utils.py", ["set_weight_attrs", "replace_parameter"], ns)
    common.exec_top_level(utils / "quant_utils.py", ["get_fp8_min_max", "amax_for_moe_activation_quant"], ns)
    common.exec_top_level(utils / "w8a8_utils.py", ["per_tensor_dequantize", "all_close_1d"], ns)

    # DeepGEMM: vLLM's wrappers (utils/deep_gemm.py) over the DeepGEMM stand-in above.
    ns["_lazy_init"] = lambda: None
    ns["_transform_sf_into_required_layout_impl"] = deepgemm.transform_sf_into_required_layout
    ns["_missing"] = None
    ns["is_deep_gemm_e8m0_used"] = lambda: PLATFORM.is_cuda() and PLATFORM.arch_major() in (9, 10)
    common.exec_top_level(v / "utils" / "deep_gemm.py", ["_ceil_to_ue8m0", "_align", "DEFAULT_BLOCK_SIZE",
                                                         "per_block_cast_to_fp8", "transform_sf_into_required_layout"], ns)
    common.stub_module("vllm.utils.deep_gemm", per_block_cast_to_fp8=ns["per_block_cast_to_fp8"])
    common.exec_top_level(utils / "fp8_utils.py", [
        "requant_weight_ue8m0_inplace", "_upcast_e8m0_to_fp32", "deepgemm_post_process_weight_scale_block",
        "deepgemm_post_process_fp8_weight_block", "prepare_fp8_moe_layer_for_deepgemm",
        "process_fp8_weight_tensor_strategy_moe", "process_fp8_input_tensor_strategy_moe"], ns)

    # FlashInfer layouts (flashinfer_utils.py over FlashInfer's own functions).
    common.exec_top_level(utils / "flashinfer_utils.py", [
        "swap_w13_to_w31", "rotate_weights_for_fi_trtllm_fp8_per_tensor_moe",
        "convert_moe_weights_to_flashinfer_trtllm_block_layout", "align_moe_weights_for_fi",
        "_shuffle_deepseek_fp8_moe_weights", "_shuffle_mxfp8_moe_weights", "prepare_fp8_moe_layer_for_fi"], ns)

    # AITER: vLLM's rocm_aiter_ops.shuffle_weights over aiter's shuffle_weight.
    aiter = {"torch": torch, "F": torch.nn.functional}
    common.exec_top_level(vendor / "aiter" / "aiter" / "ops" / "shuffle.py", ["shuffle_weight"], aiter)
    common.stub_module("aiter.ops.shuffle", shuffle_weight=aiter["shuffle_weight"])
    ns["rocm_aiter_ops"] = types.SimpleNamespace(
        shuffle_weights=common.exec_method(v / "_aiter_ops.py", "rocm_aiter_ops", "shuffle_weights", ns),
        is_rdna_aiter_enabled=lambda: False)

    # XPU transposes.
    xpu = {"torch": torch}
    common.exec_top_level(moe / "experts" / "xpu_moe.py", ["prepare_fp8_moe_layer_for_xpu"], xpu)
    common.stub_module("vllm.model_executor.layers.fused_moe.experts.xpu_moe",
                       prepare_fp8_moe_layer_for_xpu=xpu["prepare_fp8_moe_layer_for_xpu"])

    # The FP8 oracle's conversion and quant config, the unquantized oracle's conversion.
    # Marlin: marlin_utils_fp8.py's preparations over vLLM's compiled gptq_marlin_repack (the
    # namespace of make_wna16_goldens.py, which runs the same file's FP8 helpers).
    marlin = w16.vllm_namespace(vendor)
    common.exec_top_level(utils / "marlin_utils_fp8.py", ["mxfp8_marlin_process_scales", "prepare_mxfp8_moe_layer_for_marlin"],
                          marlin)
    common.stub_module("vllm.model_executor.layers.quantization.utils.marlin_utils_fp8",
                       prepare_mxfp8_moe_layer_for_marlin=marlin["prepare_mxfp8_moe_layer_for_marlin"])
    ns.update(fp8_w8a8_moe_quant_config=fp8_w8a8_moe_quant_config, fp8_w8a16_moe_quant_config=fp8_w8a16_moe_quant_config,
              FusedMoEQuantConfig=QuantConfigRecord, biased_moe_quant_config=biased_moe_quant_config,
              make_fp8_moe_kernel=make_kernel, make_unquantized_moe_kernel=make_kernel,
              prepare_fp8_moe_layer_for_marlin=marlin["prepare_fp8_moe_layer_for_marlin"], normalize_e4m3fn_to_e4m3fnuz=None)
    common.exec_top_level(moe / "oracle" / "fp8.py", ["Fp8MoeBackend", "convert_to_fp8_moe_kernel_format",
                                                      "make_fp8_moe_quant_config"], ns)
    common.exec_top_level(moe / "oracle" / "unquantized.py", ["UnquantizedMoeBackend", "convert_to_unquantized_kernel_format"],
                          ns)

    # The quantization methods.
    ns["QuantizationStrategy"] = QuantizationStrategy
    ns["MXFP8_VALUE_DTYPE"], ns["MXFP8_SCALE_DTYPE"], ns["MXFP8_BLOCK_SIZE"] = torch.float8_e4m3fn, torch.uint8, 32
    ct = quant / "compressed_tensors" / "compressed_tensors_moe" / "compressed_tensors_moe_w8a8_fp8.py"
    methods = {
        "fp8": method_class("Fp8MoEMethod", quant / "fp8.py", "Fp8MoEMethod",
                            ["process_weights_after_loading", "_setup_kernel", "get_fused_moe_quant_config"], ns),
        "compressed-tensors": method_class("CompressedTensorsW8A8Fp8MoEMethod", ct, "CompressedTensorsW8A8Fp8MoEMethod",
                                           ["process_weights_after_loading", "get_fused_moe_quant_config"], ns),
        "modelopt": method_class("ModelOptFp8MoEMethod", quant / "modelopt.py", "ModelOptFp8MoEMethod",
                                 ["process_weights_after_loading", "_setup_kernel", "get_fused_moe_quant_config"], ns),
        "modelopt-mxfp8": method_class("ModelOptMxFp8FusedMoE", quant / "modelopt.py", "ModelOptMxFp8FusedMoE",
                                       ["process_weights_after_loading", "get_fused_moe_quant_config"], ns,
                                       static=["_check_weight_dtypes"]),
    }
    # UnquantizedFusedMoEMethod calls super().process_weights_after_loading(): run the class itself,
    # over stand-in bases (FusedMoEMethodBase inherits QuantizeMethodBase's, which is vLLM's own).
    base = type("FusedMoEMethodBase", (), {
        "process_weights_after_loading": common.exec_method(quant / "base_config.py", "QuantizeMethodBase",
                                                            "process_weights_after_loading", ns)})
    ns["FusedMoEMethodBase"], ns["CustomOp"] = base, CustomOp
    common.exec_top_level(moe / "unquantized_fused_moe_method.py", ["UnquantizedFusedMoEMethod"], ns)
    methods["unquantized"] = ns["UnquantizedFusedMoEMethod"]
    ns["methods"] = methods
    return ns


# ---------------------------------------------------------------------------------------------
# Samples and their loading (stand-ins for vLLM's weight loaders)
# ---------------------------------------------------------------------------------------------

# sample -> (expert prefix, gate/up/down projection names or "fused", method, weight-scale suffix)
SAMPLES = {
    "deepseek-v3-fp8": ("model.layers.1.mlp.experts.{e}.", ("gate_proj", "up_proj", "down_proj"), "fp8"),
    "deepseek-v4-fp8": ("layers.0.ffn.experts.{e}.", ("w1", "w3", "w2"), "fp8"),
    "ct-fp8-block": ("model.layers.0.mlp.experts.{e}.", ("gate_proj", "up_proj", "down_proj"), "compressed-tensors"),
    "ct-fp8-channel": ("model.layers.0.mlp.experts.{e}.", ("gate_proj", "up_proj", "down_proj"), "compressed-tensors"),
    "ct-fp8-tensor": ("model.layers.0.mlp.experts.{e}.", ("gate_proj", "up_proj", "down_proj"), "compressed-tensors"),
    "modelopt-fp8": ("model.layers.0.mlp.experts.{e}.", ("gate_proj", "up_proj", "down_proj"), "modelopt"),
    "modelopt-mxfp8": ("model.layers.0.mlp.experts.{e}.", ("gate_proj", "up_proj", "down_proj"), "modelopt-mxfp8"),
    "llama4-fp8": ("language_model.model.layers.0.feed_forward.experts.", "fused-llama4", "modelopt"),
    "mixtral-bf16": ("model.layers.0.block_sparse_moe.experts.{e}.", ("w1", "w3", "w2"), "unquantized"),
    "qwen3-moe-bf16": ("model.layers.0.mlp.experts.{e}.", ("gate_proj", "up_proj", "down_proj"), "unquantized"),
    "gpt-oss-bf16": ("model.layers.0.mlp.experts.", "fused-gpt-oss", "unquantized"),
}


# Checkpoint names of the block scales where they differ from the parameter's (DeepSeek-V4's
# "w1.scale" loads into w13_weight_scale_inv, deepseek_v4.py's expert mapping).
CKPT_SCALE_NAME = {"deepseek-v4-fp8": "scale"}


def sample_files(samples: Path, sample: str):
    return sorted((samples / sample).glob("*.safetensors"))


def read_sample(samples: Path, sample: str):
    ckpt, hashes = {}, {}
    for f in sample_files(samples, sample):
        data = f.read_bytes()
        ckpt.update(common.parse_safetensors(data, nv.ST_DTYPES))
        hashes[f.name] = common.sha256_hex(data)
    config = json.loads((samples / sample / "config.json").read_text())
    return ckpt, config, hashes


def quant_scheme(sample: str, config: dict) -> dict:
    """What the method's __init__ derives from the config: block size, strategies, static inputs."""
    q = config.get("quantization_config", {})
    method = SAMPLES[sample][2]
    if method == "fp8":
        return {"block": q.get("weight_block_size"), "static_inputs": q.get("activation_scheme") == "static"}
    if method == "compressed-tensors":
        group = next(iter(q["config_groups"].values()))
        w, a = group["weights"], group["input_activations"]
        return {"block": w.get("block_structure") if w["strategy"] == "block" else None, "weight": w["strategy"],
                "input": a["strategy"], "static_inputs": not a["dynamic"]}
    if method == "modelopt":
        return {"block": None, "static_inputs": True}
    if method == "modelopt-mxfp8":
        return {"block": [1, 32], "static_inputs": False}
    return {"block": None, "static_inputs": False}


def model_sizes(sample: str, ckpt: dict, config: dict):
    prefix, projs, _ = SAMPLES[sample]
    text = config.get("text_config", config)
    experts = (text.get("num_experts") or text.get("n_routed_experts") or text.get("num_local_experts"))
    if projs == "fused-llama4":
        e, h, two_i = ckpt[prefix + "gate_up_proj"].shape
        return e, h, two_i // 2
    if projs == "fused-gpt-oss":
        e, h, two_i = ckpt[prefix + "gate_up_proj"].shape
        return e, h, two_i // 2
    i, h = ckpt[prefix.format(e=0) + projs[0] + ".weight"].shape
    return experts, h, i


def load_rank(ckpt: dict, sample: str, config: dict, scheme: dict, experts, tp_rank: int, tp_size: int,
              params_dtype) -> dict:
    """One rank's layer params, allocated as the method's create_weights does and filled as the
    weight loader fills them (see the docstring's stand-ins)."""
    prefix, projs, method = SAMPLES[sample]
    n_exp, hidden, inter = model_sizes(sample, ckpt, config)
    p_inter = inter // tp_size
    f8 = torch.float8_e4m3fn
    E = len(experts)

    def rows(t):  # the rank's slice of the intermediate extent along dim -2
        n = t.shape[-2] // tp_size
        return t[..., tp_rank * n:(tp_rank + 1) * n, :]

    def cols(t):
        n = t.shape[-1] // tp_size
        return t[..., tp_rank * n:(tp_rank + 1) * n]

    p = {}
    if projs == "fused-gpt-oss":
        gu, down = ckpt[prefix + "gate_up_proj"], ckpt[prefix + "down_proj"]
        gub, downb = ckpt[prefix + "gate_up_proj_bias"], ckpt[prefix + "down_proj_bias"]
        idx = torch.tensor(experts)
        ts, te = tp_rank * p_inter, (tp_rank + 1) * p_inter
        p["w13_weight"] = gu[idx][:, :, 2 * ts:2 * te].permute(0, 2, 1).contiguous().to(params_dtype)
        p["w2_weight"] = down[idx][:, ts:te, :].permute(0, 2, 1).contiguous().to(params_dtype)
        p["w13_bias"] = gub[idx][:, 2 * ts:2 * te].contiguous().to(params_dtype)
        w2b = downb[idx].clone().to(params_dtype)
        if tp_rank != 0:
            w2b.zero_()
        p["w2_bias"] = w2b
        return p

    if projs == "fused-llama4":
        idx = torch.tensor(experts)
        gu = ckpt[prefix + "gate_up_proj"].view(torch.uint8)[idx].transpose(-1, -2)  # [E, 2I, H]
        w1, w3 = gu.chunk(2, dim=-2)
        w2 = ckpt[prefix + "down_proj"].view(torch.uint8)[idx].transpose(-1, -2)  # [E, H, I]
        p["w13_weight"] = torch.cat([rows(w1), rows(w3)], dim=-2).contiguous().view(f8)
        p["w2_weight"] = cols(w2).contiguous().view(f8)
        s13 = ckpt[prefix + "gate_up_proj_weight_scale"].to(torch.float32).reshape(())
        s2 = ckpt[prefix + "down_proj_weight_scale"].to(torch.float32).reshape(())
        a13 = ckpt[prefix + "gate_up_proj_input_scale"].to(torch.float32).reshape(())
        a2 = ckpt[prefix + "down_proj_input_scale"].to(torch.float32).reshape(())
        p["w13_weight_scale"] = torch.full((E, 2), float(s13))
        p["w2_weight_scale"] = torch.full((E,), float(s2))
        p["w13_input_scale"] = torch.full((E,), float(a13))
        p["w2_input_scale"] = torch.full((E,), float(a2))
        return p

    g, u, d = projs

    def get(e, proj, what):
        return ckpt.get(prefix.format(e=e) + proj + "." + what)

    def stack(fn):
        return torch.stack([fn(e) for e in experts])

    wdtype = params_dtype if method == "unquantized" else f8

    def weight(t):
        return t.view(torch.uint8) if t.dtype == f8 else t

    def as_param(t):
        return t.view(f8) if method != "unquantized" else t.to(params_dtype)

    p["w13_weight"] = as_param(stack(lambda e: torch.cat([rows(weight(get(e, g, "weight"))),
                                                          rows(weight(get(e, u, "weight")))])))
    p["w2_weight"] = as_param(stack(lambda e: cols(weight(get(e, d, "weight")))))
    assert p["w13_weight"].dtype == wdtype
    if method == "unquantized":
        return p

    scale_name = "weight_scale_inv" if method == "fp8" and scheme["block"] else "weight_scale"
    ckpt_scale = CKPT_SCALE_NAME.get(sample, scale_name)
    if method == "modelopt-mxfp8":
        p["w13_weight_scale"] = stack(lambda e: torch.cat([rows(get(e, g, scale_name)), rows(get(e, u, scale_name))]))
        p["w2_weight_scale"] = stack(lambda e: get(e, d, scale_name))
        if tp_size > 1:
            p["w2_weight_scale"] = stack(lambda e: cols(get(e, d, scale_name)))
        return p
    f32 = torch.float32
    if scheme["block"]:
        p["w13_" + scale_name] = stack(lambda e: torch.cat([rows(get(e, g, ckpt_scale)), rows(get(e, u, ckpt_scale))]).to(f32))
        p["w2_" + scale_name] = stack(lambda e: cols(get(e, d, ckpt_scale)).to(f32))
    elif method == "compressed-tensors" and scheme["weight"] == "channel":
        p["w13_weight_scale"] = stack(lambda e: torch.cat([rows(get(e, g, "weight_scale")),
                                                           rows(get(e, u, "weight_scale"))]).to(f32))
        p["w2_weight_scale"] = stack(lambda e: get(e, d, "weight_scale").to(f32))
    else:  # per-tensor
        p["w13_weight_scale"] = stack(lambda e: torch.stack([get(e, g, "weight_scale").reshape(()),
                                                             get(e, u, "weight_scale").reshape(())]).to(f32))
        p["w2_weight_scale"] = stack(lambda e: get(e, d, "weight_scale").reshape(()).to(f32))
    if scheme["static_inputs"]:
        # The last input scale loaded wins: up_proj after gate_proj (the patches keep them equal).
        p["w13_input_scale"] = stack(lambda e: get(e, u, "input_scale").reshape(()).to(f32))
        p["w2_input_scale"] = stack(lambda e: get(e, d, "input_scale").reshape(()).to(f32))
    return p


class Layer(torch.nn.Module):
    def _expert_routing_tables(self):
        return None


def run_rank(ns, case: dict, ckpt: dict, config: dict, rank: int, dev) -> dict:
    """The method's process_weights_after_loading for one rank of `case`; returns {role: tensor}."""
    sample = case["sample"]
    _, projs, method_name = SAMPLES[sample]
    PLATFORM.target = case["target"]
    scheme = quant_scheme(sample, config)
    act = ns["MoEActivation"]
    activation = act.SWIGLUOAI if projs == "fused-gpt-oss" else act.SILU
    params_dtype = torch.float16 if case["model_dtype"] == "float16" else torch.bfloat16
    world, ep = case["tp"], case["ep"]
    total, hidden, inter = model_sizes(sample, ckpt, config)
    if ep:  # every rank owns whole experts (linear placement), tp 1
        local = total // world
        experts, tp_rank, tp_size = list(range(rank * local, (rank + 1) * local)), 0, 1
    else:
        experts, tp_rank, tp_size = list(range(total)), rank, world
    params = load_rank(ckpt, sample, config, scheme, experts, tp_rank, tp_size, params_dtype)
    p_inter = inter // tp_size

    layer = Layer()
    for name, t in params.items():
        layer.register_parameter(name, torch.nn.Parameter(t.to(dev), requires_grad=False))
    has_bias = "w13_bias" in params
    parallel = types.SimpleNamespace(enable_eplb=False, ep_rank=rank if ep else 0, ep_size=world if ep else 1,
                                     tp_rank=tp_rank, tp_size=tp_size, dp_size=1, use_batched_activation_format=False,
                                     use_deepep_v2_kernels=False)
    moe = types.SimpleNamespace(is_act_and_mul=True, activation=activation, moe_parallel_config=parallel,
                                hidden_dim=hidden, intermediate_size_per_partition=p_inter, num_local_experts=len(experts),
                                num_experts=total, experts_per_token=1, has_bias=has_bias, in_dtype=params_dtype,
                                w13_num_shards=2, device=dev)
    layer.moe_config = moe
    layer.activation = activation
    layer.num_experts = len(experts)
    layer.local_num_experts = len(experts)
    layer.hidden_size = hidden
    layer.intermediate_size_per_partition = p_inter
    layer.params_dtype = params_dtype
    layer.orig_dtype = params_dtype

    cls = ns["methods"][method_name]
    method = cls.__new__(cls)
    method.moe = moe
    method.moe_kernel = None
    method.experts_cls = object
    if method_name == "unquantized":
        method.unquantized_backend = ns["UnquantizedMoeBackend"][case["backend"]]
    else:
        backend = ns["Fp8MoeBackend"][case["backend"]]
        if method_name == "modelopt-mxfp8":
            method.mxfp8_backend = backend
            method.weight_block_size = [1, 32]
        else:
            method.fp8_backend = backend
        if method_name == "fp8":
            block = scheme["block"]
            method.quant_config = types.SimpleNamespace(activation_scheme="static" if scheme["static_inputs"] else "dynamic",
                                                        weight_block_size=block)
            method.weight_block_size, method.block_quant = block, block is not None
            method.weight_scale_name = "weight_scale_inv" if block else "weight_scale"
            layer.weight_block_size = block
        elif method_name == "compressed-tensors":
            method.weight_quant = types.SimpleNamespace(strategy=QuantizationStrategy(scheme["weight"]))
            method.input_quant = types.SimpleNamespace(strategy=QuantizationStrategy(scheme["input"]),
                                                       dynamic=not scheme["static_inputs"])
            method.weight_block_size, method.block_quant = scheme["block"], scheme["block"] is not None
            method.static_input_scales = scheme["static_inputs"]
            layer.weight_block_size = scheme["block"]
        if not scheme["static_inputs"]:
            layer.w13_input_scale, layer.w2_input_scale = None, None
    # vLLM's DefaultModelLoader runs process_weights_after_loading under the model dtype as
    # torch's default dtype (set_default_torch_dtype in base_loader.load_model); MXFP8 Marlin
    # reads it (torch.get_default_dtype()).
    default = torch.get_default_dtype()
    torch.set_default_dtype(params_dtype)
    try:
        method.process_weights_after_loading(layer)
    finally:
        torch.set_default_dtype(default)
    return dict(layer.named_parameters())


# ---------------------------------------------------------------------------------------------
# The deployments
# ---------------------------------------------------------------------------------------------


AITER_ENV = ["VLLM_ROCM_USE_AITER=1", "VLLM_ROCM_USE_AITER_MOE=1"]


def dep(sample, target, backend, moe_backend="", patch="", model_dtype="", tp=1, ep=False, env=()):
    return {"sample": sample, "patch": patch, "target": target, "moe_backend": moe_backend, "model_dtype": model_dtype,
            "tp": tp, "ep": ep, "env": list(env), "backend": backend}


def fp8_block(sample, patch=""):
    return [
        dep(sample, "sm90", "TRITON", patch=patch),
        dep(sample, "sm90", "DEEPGEMM", "deep_gemm", patch=patch),
        dep(sample, "sm100", "DEEPGEMM", "deep_gemm", patch=patch),
        dep(sample, "sm100", "DEEPGEMM", "deep_gemm", patch=patch, tp=2, ep=True),
        dep(sample, "sm100", "FLASHINFER_TRTLLM", patch=patch),
        dep(sample, "sm100", "FLASHINFER_TRTLLM", patch=patch, tp=2, ep=True),
        dep(sample, "sm90", "FLASHINFER_CUTLASS", "flashinfer_cutlass", patch=patch),
        dep(sample, "sm90", "FLASHINFER_CUTLASS", patch=patch, tp=2, ep=True),
        dep(sample, "xpu", "XPU", patch=patch),
        dep(sample, "gfx950", "AITER", patch=patch, env=AITER_ENV),
    ]


def fp8_tensor(sample, patch="", cutlass=False):
    out = [
        dep(sample, "sm89", "TRITON", patch=patch),
        dep(sample, "sm90", "FLASHINFER_CUTLASS", patch=patch),
        dep(sample, "sm90", "FLASHINFER_CUTLASS", patch=patch, tp=2),
        dep(sample, "sm100", "FLASHINFER_TRTLLM", patch=patch),
        dep(sample, "sm100", "FLASHINFER_TRTLLM", patch=patch, tp=2),
        dep(sample, "sm100", "FLASHINFER_TRTLLM", patch=patch, tp=2, ep=True),
        dep(sample, "gfx950", "AITER", patch=patch, env=AITER_ENV),
        dep(sample, "gfx950", "AITER", patch=patch, tp=2, env=AITER_ENV),
    ]
    if cutlass:
        out.append(dep(sample, "sm110", "VLLM_CUTLASS", patch=patch))
    return out


def fp8_marlin():
    """FP8 and MXFP8 weight-only on Marlin (MarlinExperts), asked for on sm90 or the default on
    GPUs without FP8 (sm80, sm86), through each method's own process_weights_after_loading."""
    m = "marlin"
    return [
        dep("deepseek-v3-fp8", "sm90", "MARLIN", m), dep("deepseek-v3-fp8", "sm86", "MARLIN"),
        dep("deepseek-v3-fp8", "sm90", "MARLIN", m, model_dtype="float16"),
        dep("deepseek-v3-fp8", "sm90", "MARLIN", m, patch="block_scales"),
        dep("deepseek-v4-fp8", "sm90", "MARLIN", m), dep("deepseek-v4-fp8", "sm86", "MARLIN", model_dtype="float16"),
        dep("ct-fp8-block", "sm90", "MARLIN", m),
        dep("ct-fp8-channel", "sm86", "MARLIN"), dep("ct-fp8-channel", "sm80", "MARLIN", tp=2),
        dep("ct-fp8-tensor", "sm90", "MARLIN", m), dep("ct-fp8-tensor", "sm80", "MARLIN", tp=2),
        dep("ct-fp8-tensor", "sm90", "MARLIN", m, patch="per_tensor_scales"),
        dep("ct-fp8-tensor", "sm86", "MARLIN", patch="per_tensor_scales", model_dtype="float16", tp=2),
        dep("modelopt-fp8", "sm90", "MARLIN", m), dep("modelopt-fp8", "sm90", "MARLIN", m, model_dtype="float16"),
        dep("modelopt-fp8", "sm90", "MARLIN", m, patch="per_tensor_scales", model_dtype="float16"),
        dep("modelopt-fp8", "sm80", "MARLIN", patch="per_tensor_scales", tp=2),
        dep("llama4-fp8", "sm90", "MARLIN", m),
        dep("modelopt-mxfp8", "sm90", "MARLIN", m), dep("modelopt-mxfp8", "sm86", "MARLIN"),
        dep("modelopt-mxfp8", "sm80", "MARLIN", tp=2),
    ]


def unquantized(sample):
    return [
        dep(sample, "sm90", "TRITON"),
        dep(sample, "sm100", "FLASHINFER_TRTLLM"),
        dep(sample, "sm100", "FLASHINFER_TRTLLM", tp=2),
        dep(sample, "sm120", "FLASHINFER_CUTLASS"),
        dep(sample, "sm120", "FLASHINFER_CUTLASS", tp=2, ep=True),
        dep(sample, "gfx942", "TRITON"),
        dep(sample, "gfx942", "AITER", env=AITER_ENV),
        dep(sample, "gfx942", "AITER", tp=2, env=AITER_ENV),
        dep(sample, "xpu", "XPU"),
        dep(sample, "xpu", "XPU", tp=2),
    ]


DEPLOYMENTS = (
    fp8_block("deepseek-v3-fp8") + fp8_block("deepseek-v3-fp8", "block_scales") + fp8_block("ct-fp8-block")
    + [dep("ct-fp8-channel", "sm89", "TRITON"), dep("ct-fp8-channel", "sm90", "VLLM_CUTLASS"),
       dep("ct-fp8-channel", "sm90", "VLLM_CUTLASS", tp=2), dep("ct-fp8-channel", "sm90", "VLLM_CUTLASS", tp=2, ep=True),
       dep("ct-fp8-channel", "gfx950", "AITER", env=AITER_ENV),
       dep("ct-fp8-channel", "gfx950", "AITER", tp=2, env=AITER_ENV)]
    + fp8_tensor("ct-fp8-tensor", cutlass=True) + fp8_tensor("ct-fp8-tensor", "per_tensor_scales", cutlass=True)
    + fp8_tensor("modelopt-fp8") + fp8_tensor("modelopt-fp8", "per_tensor_scales")
    + fp8_tensor("llama4-fp8")
    + [dep("modelopt-mxfp8", "sm100", "FLASHINFER_TRTLLM"), dep("modelopt-mxfp8", "sm100", "FLASHINFER_TRTLLM", tp=2, ep=True)]
    + fp8_marlin()
    + unquantized("mixtral-bf16") + unquantized("qwen3-moe-bf16")
    + [dep("gpt-oss-bf16", "sm90", "TRITON"), dep("gpt-oss-bf16", "sm90", "TRITON", tp=2),
       dep("gpt-oss-bf16", "sm90", "FLASHINFER_CUTLASS", "flashinfer_cutlass"),
       dep("gpt-oss-bf16", "gfx942", "AITER", env=AITER_ENV), dep("gpt-oss-bf16", "xpu", "XPU"),
       dep("gpt-oss-bf16", "xpu", "XPU", tp=2)]
    # DeepSeek-V4 FP8 (SwiGLU with a limit) on FlashInfer TRT-LLM: the modular experts class.
    + [dep("deepseek-v4-fp8", "sm100", "FLASHINFER_TRTLLM")]
)

# vLLM's UnquantizedMoeBackend names its members by value ("FlashInfer TRTLLM"); the cases use the
# member names, as moepack's manifest does.


def make_patches(variant: str, sample: str, ckpt: dict, config: dict, gen) -> dict:
    """Seeded replacements for some of a sample's tensors (same names, shapes, dtypes).

    "block_scales" (FP8 128x128 blocks): block scales whose UE8M0 requantization sits on the
    ceil's edges (amax * fp32(1/448) a hair above or at a power of two), tiny scales that
    FlashInfer clamps to 1e-10, and ordinary random ones. "per_tensor_scales": gate and up weight
    scales that differ (the requantization to the larger one rounds every element of the other
    half, through fp16, where tiny products go subnormal), per-expert input scales that differ
    between experts (gate and up kept equal: vLLM's loader keeps the last one loaded, and
    compressed-tensors refuses unequal ones)."""
    prefix, projs, _ = SAMPLES[sample]
    n_exp = model_sizes(sample, ckpt, config)[0]
    patches = {}
    if variant == "block_scales":
        specials = [2.0 ** -9 * (1 + 2.0 ** -23), 0.125 * (1 + 2.0 ** -23), 2.0 ** -7, 3.0e-12, 0.3, 1.7e-5]
        for e in range(n_exp):
            for proj in projs:
                name = prefix.format(e=e) + proj + ".weight_scale_inv"
                old = ckpt[name]
                v = 10.0 ** (-4 + 3 * torch.rand(old.shape, generator=gen, dtype=torch.float64))
                flat = v.reshape(-1)
                flat[0] = specials[(2 * e + projs.index(proj)) % len(specials)]
                patches[name] = v.to(old.dtype)
    elif variant == "per_tensor_scales":
        w = [(0.3, 0.0137), (2.0 ** -12, 1.0625), (0.00052, 0.0009)]
        a = [0.011, 0.0625, 0.3]
        for e in range(n_exp):
            for i, proj in enumerate(projs):
                base = prefix.format(e=e) + proj + "."
                old = ckpt[base + "weight_scale"]
                val = w[e % len(w)][i] if i < 2 else 3.0 ** -(e + 3)
                patches[base + "weight_scale"] = torch.full(old.shape, val, dtype=torch.float64).to(old.dtype)
                old = ckpt[base + "input_scale"]
                val = a[e % len(a)] if i < 2 else 0.07 / (e + 1)
                patches[base + "input_scale"] = torch.full(old.shape, val, dtype=torch.float64).to(old.dtype)
    else:
        raise SystemExit(f"unknown patch set {variant}")
    for name, t in patches.items():
        assert t.dtype == ckpt[name].dtype and tuple(t.shape) == tuple(ckpt[name].shape), name
    return patches


# ---------------------------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------------------------


def role_note(case: dict, role: str) -> str:
    notes = []
    if case["backend"] == "DEEPGEMM" and case["target"] == "sm100" and role.startswith(("w13_weight_scale", "w2_weight_scale")):
        notes.append(STAND_IN_DEEPGEMM)
    if role == "w13_weight" and case["sample"] in ("ct-fp8-tensor", "modelopt-fp8", "llama4-fp8"):  # per-tensor
        notes.append(STAND_IN_SCALED_FP8_QUANT)
    if case["sample"] == "modelopt-mxfp8" and case["backend"] == "FLASHINFER_TRTLLM" and role in ("w13_weight_scale",
                                                                                                 "w2_weight_scale"):
        notes.append(mx.STAND_IN_128X4)
    return "; ".join(notes)


def storage_shape(t: torch.Tensor):
    """The shape of `t`'s storage: its dims by decreasing stride (a stable sort, so size-1 dims,
    whose strides torch does not normalise, keep their place among equals)."""
    order = sorted(range(t.ndim), key=lambda d: -t.stride(d))
    return [int(t.shape[d]) for d in order]


def record_rank(g: nv.Golden, ns, case: dict, ckpt: dict, config: dict, rank: int, dev) -> dict:
    outputs = run_rank(ns, case, ckpt, config, rank, dev)
    recorded = []
    for role, t in sorted(outputs.items()):
        b = nv.storage_bytes(t)
        entry = {"role": role, "shape": storage_shape(t) if t.ndim else [], "dtype": nv.dtype_name(t),
                 "bytes": int(b.numel()), "note": role_note(case, role)}
        if t.ndim and list(t.stride()) != list(torch.empty(t.shape).stride()):
            entry["vllm_shape"], entry["vllm_stride"] = [int(s) for s in t.shape], [int(s) for s in t.stride()]
        common.keep_whole_or_digest(g, entry, b, f"layer/{case['name']}/{rank}/{role}", b.numel() <= FULL_BYTES)
        recorded.append(entry)
    return {"rank": rank, "outputs": recorded}


def case_name(d: dict) -> str:
    parallel = f"tp{d['tp']}" + ("ep" if d["ep"] else "") if d["tp"] > 1 else ""
    return "_".join(x for x in (d["sample"], d["patch"], d["target"], d["moe_backend"] or "auto",
                                "aiter" if d["env"] else "", d["model_dtype"], parallel) if x)


def layer_cases(ns, g: nv.Golden, samples: Path, gen, dev, errors: list):
    data = {s: read_sample(samples, s) for s in sorted({d["sample"] for d in DEPLOYMENTS})}
    patched = {}
    for sample, variant in sorted({(d["sample"], d["patch"]) for d in DEPLOYMENTS if d["patch"]}):
        ckpt, config, _ = data[sample]
        patches = make_patches(variant, sample, ckpt, config, gen)
        keys = {}
        for i, name in enumerate(sorted(patches)):
            keys[name] = f"patch/{sample}/{variant}/{i}"
            g.put(keys[name], patches[name])
        g.patch_sets[f"{sample}/{variant}"] = keys
        patched[(sample, variant)] = dict(ckpt, **patches)

    for d in DEPLOYMENTS:
        ckpt, config, hashes = data[d["sample"]]
        if d["patch"]:
            ckpt = patched[(d["sample"], d["patch"])]
        case = dict(d, name=case_name(d), sample_sha256=hashes, method=SAMPLES[d["sample"]][2])
        try:
            case["ranks"] = [record_rank(g, ns, case, ckpt, config, r, dev) for r in range(d["tp"])]
            g.layer_cases.append(case)
        except Exception as exc:  # keep the other cases; report this one
            common.report_failure(errors, case["name"], exc)


def save(g: nv.Golden, out: Path, provenance: dict) -> Path:
    path = out / "golden_fp8_bf16.safetensors"
    meta = common.layer_golden_metadata(provenance, g.layer_cases, patch_sets=g.patch_sets)
    path.write_bytes(common.safetensors_bytes(g.tensors, meta, nv.ST_NAMES))
    return path


def main():
    ap = common.argument_parser(__doc__)
    ap.add_argument("--out", type=Path, help="where golden_fp8_bf16.safetensors goes (omit for a dry run)")
    ap.add_argument("--build", type=Path, default=Path("/tmp/moepack_marlin_ops"), help="where the Marlin ops are compiled")
    ap.add_argument("--only", default="", help="run only the cases whose name contains this text")
    args = ap.parse_args()

    compat = []
    if not hasattr(torch, "float8_e4m3fn"):
        torch.float8_e4m3fn = torch.uint8
        finfo = torch.finfo
        torch.finfo = lambda t=None: types.SimpleNamespace(min=-448.0, max=448.0) if t is torch.uint8 else finfo(t)
        compat.append("torch<2.1: float8_e4m3fn aliased to uint8 (values wrong; plumbing only)")
    if not hasattr(torch, "float8_e8m0fnu"):
        torch.float8_e8m0fnu = torch.complex64
        compat.append("torch without float8_e8m0fnu: a dtype no tensor here has stands for it")
    if not hasattr(torch, "accelerator"):
        torch.accelerator = types.SimpleNamespace(current_device_index=lambda: "cpu", empty_cache=lambda: None)
        compat.append("torch without torch.accelerator")
    if not hasattr(torch, "compile"):
        torch.compile = lambda *a, **k: (lambda f: f)
        compat.append("torch without torch.compile: per_block_cast_to_fp8 runs eagerly")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu":
        compat.append("no CUDA: tensors on the CPU")

    global DEPLOYMENTS
    if args.only:
        DEPLOYMENTS = [d for d in DEPLOYMENTS if args.only in case_name(d)]
    marlin_ops, keep = {}, None
    if dev == "cuda":
        marlin_ops = w16.load_marlin_ops(args.vendor, args.build)
    else:
        keep = w16.zeros_repack_library()  # noqa: F841  (kept alive while the ops are used)
        compat.append("no CUDA: the Marlin repack ops return zeros (plumbing only)")
    deepgemm = DeepGemm(args.vendor)
    if deepgemm.pack.error:
        compat.append("DeepGEMM pack kernel unavailable (" + deepgemm.pack.error[:200] + "): its torch fallback used")
    flashinfer(args.vendor)  # FlashInfer's functions, installed as the modules vLLM imports them from
    ns = vllm_namespace(args.vendor, deepgemm)
    provenance = {"vllm": VLLM, "flashinfer": FI, "aiter": AITER, "deep_gemm": DEEPGEMM, "seed": SEED,
                  "torch": torch.__version__, "device": torch.cuda.get_device_name() if dev == "cuda" else dev,
                  "marlin_ops": marlin_ops, "compat": compat}
    g = nv.Golden()
    errors = []
    layer_cases(ns, g, args.samples, torch.Generator().manual_seed(SEED), dev, errors)
    provenance["deepgemm_kernel_cross_checks"] = deepgemm.cross_checks
    summary = {"provenance": provenance, "layer_cases": len(g.layer_cases),
               "bytes": sum(t.numel() * t.element_size() for t in g.tensors.values()), "errors": errors}
    return common.finish(summary, errors, args.out, lambda out: save(g, out, provenance))


if __name__ == "__main__":
    sys.exit(main())
