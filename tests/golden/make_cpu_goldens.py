#!/usr/bin/env python3
"""Golden bytes for moepack's x86 CPU MoE conversions (target cpu-amx, and cpu-avx512 for the
unquantized pack), produced by running the REAL upstream code, vLLM's compiled CPU weight packs
included.

Tooling, not part of the build; the companion of make_wna16_goldens.py (whose namespace, loader
and synthetic checkpoints it reuses) and run the same way, on an x86 machine with AVX-512
(BF16, VNNI) and AMX, gcc and ninja (PyTorch's cpp_extension builds the ops there). It needs a
folder of upstream sources that this repository does NOT ship: every file make_wna16_goldens.py
lists, plus, from vllm-project/vllm @ e9d1398d9, at their own paths:

  VENDOR/vllm/csrc/cpu/sgl-kernels/{gemm.cpp,gemm_int4.cpp,gemm.h,common.h,vec.h,blas_gemm.h}
  VENDOR/vllm/csrc/cpu/{cpu_fused_moe.cpp,utils.cpp,utils.hpp,cpu_types.hpp,cpu_types_x86.hpp,
      cpu_arch_macros.h,cpu_fused_moe_activations.hpp}
  VENDOR/vllm/csrc/cpu/micro_gemm/{cpu_micro_gemm_amx.hpp,cpu_micro_gemm_impl.hpp,
      cpu_micro_gemm_vec.hpp}
  VENDOR/vllm/vllm/model_executor/layers/fused_moe/experts/cpu_moe.py
  VENDOR/vllm/vllm/model_executor/layers/fused_moe/{activation.py,unquantized_fused_moe_method.py}
  VENDOR/vllm/vllm/model_executor/layers/fused_moe/oracle/{fp8.py,mxfp4.py}

  python3 tests/golden/make_cpu_goldens.py --vendor VENDOR --samples samples --out OUTDIR

The compiled ops: gemm.cpp (convert_weight_packed, convert_scale_packed), gemm_int4.cpp
(convert_weight_packed_scale_zp), cpu_fused_moe.cpp (prepack_moe_weight) and utils.cpp (the
scratch-pad allocator cpu_fused_moe.cpp links to) are compiled unchanged with the flags
cmake/cpu_extension.cmake gives vLLM's AVX512+AMX extension `_C` (-fopenmp -DVLLM_CPU_EXTENSION
-mf16c -mavx512f -mavx512vl -mavx512bw -mavx512dq -mamx-bf16 -mamx-tile -mavx512bf16
-mavx512vnni -DCPU_CAPABILITY_AMXBF16; -DVLLM_NUMA_DISABLED, vLLM's own switch for a build
without libnuma), beside tests/golden/cpu_pack_ops.cpp, this repository's own file that
declares the four op schemas under vLLM's library name `_C` (vLLM declares them in
csrc/cpu/torch_bindings.cpp among a hundred other ops). vLLM's Python then reaches them as in
vLLM: cpu_moe.py's prepare_*_for_cpu and CPUExpertsInt8.process_weights_after_loading call
torch.ops._C.convert_weight_packed / convert_scale_packed, _custom_ops.py's
convert_weight_packed_scale_zp and cpu_prepack_moe_weight wrap the other two. --sleef DIR adds an
include folder holding sleef.h for a PyTorch whose headers lack it (vLLM's build takes it from
PyTorch). Without the compiled ops (a dry run of the plumbing) the ops return zeros of the
output shape and the provenance's "compat" says so; the test refuses such a file.

Layer cases (metadata "golden_layer_cases", checked end to end by
tests/convert/upstream_goldens_test.cpp), each loaded into one layer per tensor-parallel rank under
the model dtype as vLLM's DefaultModelLoader does (torch's default dtype bfloat16):
  * INT4 W4A16 (GPTQ, AutoAWQ, compressed-tensors symmetric), run as make_wna16_goldens.py runs
    them, whole, with the backend CPU: the method's create_weights, RoutedExperts.weight_loader,
    process_weights_after_loading -> convert_to_wna16_moe_kernel_format -> _process_weights_cpu
    -> prepare_int4_moe_layer_for_cpu -> the compiled convert_weight_packed_scale_zp.
  * Unquantized BF16 (Qwen3-MoE, Mixtral, gpt-oss): UnquantizedFusedMoEMethod.create_weights,
    RoutedExperts.weight_loader (for gpt-oss's fused tensors the model's own _load_weights_other
    narrowing and copy, transliterated: see load_gpt_oss_bf16), then the CPU experts'
    process_weights_after_loading
    (X86CPUUnquantizedExperts, isa "amx", for cpu-amx; CPUUnquantizedExperts, isa "vec", for
    cpu-avx512): _pad_moe_intermediate and the compiled prepack_moe_weight through
    _custom_ops.cpu_prepack_moe_weight. convert_to_unquantized_kernel_format is the identity
    (.contiguous()) for the CPU backend and is not run.
  * In part (cases marked "partial", as make_wna16_goldens.py's FP8 Marlin cases): the
    quantization method's create_weights is stood in for by parameters of the shapes, dtypes and
    loader attributes it creates (named in each function below); RoutedExperts.weight_loader
    loads them (for gpt-oss MXFP4 the model's own narrowing, gpt_oss.py _load_weights_mxfp4, is
    transliterated, then the loader's gpt_oss_mxfp4 copy runs); then the upstream preparation
    runs whole: convert_to_fp8_moe_kernel_format (CPU -> prepare_fp8_moe_layer_for_cpu) for
    compressed-tensors FP8 block, CPUExpertsInt8.process_weights_after_loading for
    compressed-tensors W8A8 INT8, convert_gpt_oss_weight_to_mxfp4_moe_kernel_format (CPU ->
    prepare_mxfp4_moe_layer_for_cpu, biases to fp32) for gpt-oss MXFP4 and Quark MXFP4. The
    method's own process_weights_after_loading around them is not run.
What vLLM's layer then holds for the CPU kernel is recorded by role and rank: whole when at most
WHOLE_BYTES bytes, as the SHA-256 of its storage bytes otherwise. Tensors of no elements
(AutoGPTQ's sort indices, which _process_weights_cpu returns as None and replace_parameter turns
into an empty Parameter) are listed as "empty", not recorded.

Stand-ins, named in the README: the methods' constructors (the oracle) are replaced by the fields
they set for the CPU backend (the test checks that moepack's oracle picks CPU); _setup_kernel and
make_*_moe_kernel do nothing (they build the kernel object); zentorch is absent
(is_zentorch_moe_supported is False, as on any machine without the zentorch package); the model
loader is the expert mapping of Qwen3-MoE / Mixtral (gate_proj or w1 -> w1, up_proj or w3 -> w3,
down_proj or w2 -> w2), tensors in name order, every expert local.
"""

import contextlib
import json
import math
import sys
import time
import types
import typing
from collections.abc import Callable
from enum import Enum, IntEnum
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as common  # noqa: E402
import make_wna16_goldens as wn  # noqa: E402  (namespace, loader, synthetic checkpoints, safetensors dtypes)

SEED = 20250613
WHOLE_BYTES = 4096
VLLM = common.VLLM
HERE = Path(__file__).resolve().parent
AMX_FLAGS = ["-O2", "-fopenmp", "-DVLLM_CPU_EXTENSION", "-mf16c", "-mavx512f", "-mavx512vl", "-mavx512bw", "-mavx512dq",
             "-mamx-bf16", "-mamx-tile", "-mavx512bf16", "-mavx512vnni", "-DCPU_CAPABILITY_AMXBF16", "-DVLLM_NUMA_DISABLED"]

# ---------------------------------------------------------------------------------------------
# vLLM's compiled CPU packs
# ---------------------------------------------------------------------------------------------


def load_cpu_ops(vendor: Path, build_dir: Path, sleef: Path | None) -> dict:
    """Builds vLLM's CPU pack sources (unchanged) with cpu_pack_ops.cpp and loads them as
    torch.ops._C.*. Returns what was built, for the provenance."""
    from torch.utils.cpp_extension import include_paths, load

    cpu = vendor / "vllm" / "csrc" / "cpu"
    sources = [HERE / "cpu_pack_ops.cpp", cpu / "sgl-kernels" / "gemm.cpp", cpu / "sgl-kernels" / "gemm_int4.cpp",
               cpu / "cpu_fused_moe.cpp", cpu / "utils.cpp"]
    includes = [str(vendor / "vllm" / "csrc")]
    torch_has_sleef = any((Path(p) / "sleef.h").exists() for p in include_paths())
    if not torch_has_sleef and sleef is not None:
        includes.append(str(sleef))
    build_dir.mkdir(parents=True, exist_ok=True)
    start = time.time()
    load(name="vllm_cpu_moe_packs", sources=[str(s) for s in sources], extra_include_paths=includes,
         extra_cflags=AMX_FLAGS, extra_ldflags=["-fopenmp"], build_directory=str(build_dir), is_python_module=False)
    return {"sources": [str(s.relative_to(vendor)) if vendor in s.parents else s.name for s in sources],
            "cflags": AMX_FLAGS, "compile_seconds": round(time.time() - start, 1),
            "sleef_h": "pytorch" if torch_has_sleef else ("--sleef" if sleef is not None else "none")}


def zeros_library():
    """Dry runs without the compiled ops: ops of the output shape whose bytes are zeros."""
    lib = torch.library.Library("_C", "DEF")
    lib.define("convert_weight_packed(Tensor weight) -> Tensor")
    lib.define("convert_scale_packed(Tensor scale) -> Tensor")
    lib.define("convert_weight_packed_scale_zp(Tensor weight, Tensor qzeros, Tensor scales, int quant_method_4bit) -> (Tensor, Tensor, Tensor)")
    lib.define("prepack_moe_weight(Tensor weight, Tensor(a1!) packed_weight, str isa) -> ()")

    def weight_packed(w):
        shape = list(w.shape)
        if w.dtype == torch.int8:
            shape[-1] += 4
        return torch.zeros(shape, dtype=w.dtype)

    def scale_zp(w, z, s, algo):
        e, g, n = s.shape
        k = w.shape[1] * (8 if algo == 1 else 1)
        bk = min(k // g, 128)
        return (torch.zeros((e, n // 32, k // bk, bk * 16 + 128), dtype=torch.uint8),
                torch.zeros((e, n // 32, g, 32), dtype=torch.int8), torch.zeros((e, n // 32, g, 32), dtype=torch.float32))

    def prepack(w, out, isa):
        out.zero_()

    lib.impl("convert_weight_packed", weight_packed, "CPU")
    lib.impl("convert_scale_packed", lambda s: torch.zeros_like(s), "CPU")
    lib.impl("convert_weight_packed_scale_zp", scale_zp, "CPU")
    lib.impl("prepack_moe_weight", prepack, "CPU")
    return lib


# ---------------------------------------------------------------------------------------------
# Running upstream definitions
# ---------------------------------------------------------------------------------------------


class ModularKernelStub:
    """vllm.model_executor.layers.fused_moe.modular_kernel as the CPU experts' class bodies use
    it: the base class, and names that appear only in annotations."""

    class FusedMoEExpertsMonolithic:
        def __init__(self, moe_config, quant_config):
            self.moe_config, self.quant_config = moe_config, quant_config

    def __getattr__(self, name):
        return typing.Any


def vllm_namespace(vendor: Path) -> dict:
    ns = wn.vllm_namespace(vendor)
    v = vendor / "vllm" / "vllm"
    fm = v / "model_executor" / "layers" / "fused_moe"

    custom = common.exec_top_level(v / "_custom_ops.py", ["CPUQuantAlgo", "convert_weight_packed_scale_zp", "cpu_prepack_moe_weight"],
                                   {"torch": torch, "IntEnum": IntEnum})
    ns["ops"].CPUQuantAlgo = custom["CPUQuantAlgo"]
    ns["MoEActivation"] = common.exec_top_level(fm / "activation.py", ["MoEActivation"], {"torch": torch, "Enum": Enum})["MoEActivation"]

    # cpu_moe.py: the preparation functions and the CPU experts classes, in a namespace with what
    # the file imports (replace_parameter is vllm.model_executor.utils').
    replace_parameter = common.exec_top_level(v / "model_executor" / "utils.py", ["replace_parameter"], dict(ns))["replace_parameter"]
    cpu_ns = {"torch": torch, "math": math, "sys": sys, "cast": typing.cast, "Callable": Callable, "mk": ModularKernelStub(),
              "replace_parameter": replace_parameter, "round_up": ns["round_up"], "MoEActivation": ns["MoEActivation"],
              "CPUQuantAlgo": custom["CPUQuantAlgo"], "convert_weight_packed_scale_zp": custom["convert_weight_packed_scale_zp"],
              "cpu_prepack_moe_weight": custom["cpu_prepack_moe_weight"],
              "is_zentorch_moe_supported": lambda layer: False, "is_zentorch_moe_config_supported": lambda config: False}
    common.exec_top_level(fm / "experts" / "cpu_moe.py", [
        "CPUUnquantizedExperts", "X86CPUUnquantizedExperts", "prepare_fp8_moe_layer_for_cpu", "prepare_mxfp4_moe_layer_for_cpu",
        "prepare_int4_moe_layer_for_cpu", "CPUExpertsInt8"], cpu_ns)
    common.stub_module("vllm.model_executor.layers.fused_moe.experts.cpu_moe",
                       **{k: cpu_ns[k] for k in ("prepare_fp8_moe_layer_for_cpu", "prepare_mxfp4_moe_layer_for_cpu",
                                             "prepare_int4_moe_layer_for_cpu")})
    ns["cpu"] = cpu_ns
    common.exec_top_level(fm / "oracle" / "int_wna16.py", ["_process_weights_cpu"], ns)

    # The FP8 and MXFP4 converters (only their CPU branches run).
    fp8 = common.exec_top_level(fm / "oracle" / "fp8.py", ["Fp8MoeBackend", "convert_to_fp8_moe_kernel_format"],
                            {"torch": torch, "Enum": Enum, "logger": common.QuietLogger()})
    ns["fp8"] = fp8
    mxfp4 = common.exec_top_level(fm / "oracle" / "mxfp4.py", ["Mxfp4MoeBackend", "TRTLLM_BACKENDS", "TRITON_BACKENDS", "B12X_BACKENDS",
                                                               "convert_gpt_oss_weight_to_mxfp4_moe_kernel_format"],
                              {"torch": torch, "Enum": Enum, "Union": typing.Union, "logger": common.QuietLogger()})
    ns["mxfp4"] = mxfp4

    # UnquantizedFusedMoEMethod.create_weights, as a method of a class of that name.
    um = common.exec_method(fm / "unquantized_fused_moe_method.py", "UnquantizedFusedMoEMethod", "create_weights",
                            dict(ns, set_weight_attrs=ns["set_weight_attrs"]))
    ns["UnquantizedFusedMoEMethod"] = type("UnquantizedFusedMoEMethod", (), {"create_weights": um})
    return ns


# ---------------------------------------------------------------------------------------------
# Layers and loading
# ---------------------------------------------------------------------------------------------

# Checkpoint projection name -> vLLM's shard id (Qwen3-MoE and Mixtral expert mappings).
SHARDS = {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2", "w1": "w1", "w3": "w3", "w2": "w2"}


def moe_of(config: dict, tp: int, rank: int, activation, has_bias=False):
    hidden = config["hidden_size"]
    inter = config.get("moe_intermediate_size") or config["intermediate_size"]
    experts = config.get("num_experts") or config["num_local_experts"]
    assert inter % tp == 0
    per_rank = inter // tp
    parallel = types.SimpleNamespace(tp_size=tp, tp_rank=rank, ep_size=1, ep_rank=0, dp_size=1, enable_eplb=False,
                                     use_batched_activation_format=False, use_ep=False)
    return types.SimpleNamespace(is_act_and_mul=True, w13_num_shards=2, tp_rank=rank, tp_size=tp, has_bias=has_bias,
                                 moe_parallel_config=parallel, hidden_dim=hidden, intermediate_size_per_partition=per_rank,
                                 intermediate_size_per_partition_unpadded=per_rank, intermediate_size=inter,
                                 num_local_experts=experts, num_experts=experts, activation=activation,
                                 in_dtype=torch.bfloat16)


def new_layer(ns, moe, method, quant_name: str):
    layer = ns["layer_class"]()
    layer.moe_config = moe
    layer.quant_method = method
    layer.quant_config = types.SimpleNamespace(get_name=lambda: quant_name)
    layer._loaded_expert_biases = set()
    layer.hidden_size, layer.intermediate_size_per_partition = moe.hidden_dim, moe.intermediate_size_per_partition
    layer.num_experts = moe.num_experts
    # Router settings the CPU experts capture in process_weights_after_loading.
    layer.use_grouped_topk, layer.renormalize, layer.scoring_func, layer.custom_routing_function = False, True, "softmax", None
    return layer


def load_experts(layer, ckpt: dict):
    """vLLM's model loader for per-expert checkpoints: each expert tensor handed to its parameter's
    weight_loader with the shard id of its projection and the expert id."""
    for name in sorted(ckpt):
        if ".experts." not in name:
            continue
        e, proj, suffix = name.split(".experts.", 1)[1].split(".", 2)
        shard = SHARDS[proj]
        param_name = ("w2_" if shard == "w2" else "w13_") + suffix
        param = getattr(layer, param_name)
        vllm_name = name.split(".experts.", 1)[0] + ".experts." + param_name
        if not param.weight_loader(param, ckpt[name], vllm_name, shard_id=shard, expert_id=int(e), return_success=True):
            raise RuntimeError(f"{name}: vLLM's weight_loader did not load it into {param_name}")


def add_param(ns, layer, name, shape, dtype, **attrs):
    p = torch.nn.Parameter(torch.zeros(shape, dtype=dtype), requires_grad=False)
    layer.register_parameter(name, p)
    ns["set_weight_attrs"](p, dict(attrs, weight_loader=layer.weight_loader))


model_dtype = common.model_dtype


# ---- INT4 W4A16 (whole) ---------------------------------------------------------------------

WNA16_ROLES = {
    "gptq": ["w13_qweight", "w2_qweight", "w13_scales", "w2_scales", "w13_qzeros", "w2_qzeros", "w13_g_idx", "w2_g_idx",
             "w13_g_idx_sort_indices", "w2_g_idx_sort_indices", "w13_bias", "w2_bias"],
    # On the CPU backend vLLM keeps compressed-tensors' weight_g_idx / sort-index parameters as
    # create_weights left them (torch.empty, never loaded for a checkpoint without act-order, and
    # not read by the CPU kernel): not recorded.
    "compressed-tensors": ["w13_weight_packed", "w2_weight_packed", "w13_weight_scale", "w2_weight_scale",
                           "w13_weight_zero_point", "w2_weight_zero_point", "w13_weight_shape", "w2_weight_shape"],
}
WNA16_ROLES["awq"] = WNA16_ROLES["gptq"]


def run_wna16_rank(ns, ckpt: dict, config: dict, tp: int, rank: int):
    moe = moe_of(config, tp, rank, ns["MoEActivation"].SILU)
    method, _ = wn.make_method(ns, config, moe)
    # The constructor's fields for backend CPU (select_wna16_moe_backend picks it on an AMX
    # host): compressed-tensors is then not Marlin and its input dtype bfloat16.
    method.wna16_moe_backend = ns["WNA16MoEBackend"].CPU
    if wn.method_of(config) == "compressed-tensors":
        method.wna16_backend = method.wna16_moe_backend
        method.is_marlin, method.is_transposed = False, True
        method.input_dtype = torch.bfloat16
    layer = new_layer(ns, moe, method, wn.QUANT_NAMES[wn.method_of(config)])
    hidden, per_rank, experts = moe.hidden_dim, moe.intermediate_size_per_partition, moe.num_experts
    method.create_weights(layer, num_experts=experts, hidden_size=hidden, intermediate_size_per_partition=per_rank,
                          params_dtype=torch.bfloat16, weight_loader=layer.weight_loader, unpadded_hidden_size=None,
                          global_num_experts=experts, intermediate_size_full=moe.intermediate_size)
    load_experts(layer, ckpt)
    method.process_weights_after_loading(layer)
    return layer


# ---- Unquantized BF16 (whole, kernel object aside) ------------------------------------------

UNQUANTIZED_ROLES = ["w13_weight", "w2_weight", "w13_bias", "w2_bias"]


GPT_OSS = "model.layers.0.mlp.experts."


def run_unquantized_rank(ns, ckpt: dict, config: dict, tp: int, rank: int, target: str):
    gpt_oss = GPT_OSS + "gate_up_proj" in ckpt
    act = ns["MoEActivation"].SWIGLUOAI if gpt_oss else ns["MoEActivation"].SILU
    moe = moe_of(config, tp, rank, act, has_bias=gpt_oss)
    method = ns["UnquantizedFusedMoEMethod"]()
    method.moe = moe
    layer = new_layer(ns, moe, method, "")
    layer.quant_config = None
    method.create_weights(layer, num_experts=moe.num_experts, hidden_size=moe.hidden_dim,
                          intermediate_size_per_partition=moe.intermediate_size_per_partition,
                          params_dtype=torch.bfloat16, weight_loader=layer.weight_loader)
    if gpt_oss:
        load_gpt_oss_bf16(layer, ckpt, moe, tp, rank)
    else:
        load_experts(layer, ckpt)
    experts_cls = ns["cpu"]["X86CPUUnquantizedExperts" if target == "cpu-amx" else "CPUUnquantizedExperts"]
    experts = experts_cls(moe, None)
    experts.process_weights_after_loading(layer)
    return layer


def load_gpt_oss_bf16(layer, ckpt: dict, moe, tp: int, rank: int):
    """gpt-oss BF16 (fused expert tensors), the model's _load_weights_other transliterated
    (gpt_oss.py @ e9d1398d9): per-rank intermediate size cdiv(I, tp); gate_up_proj [E, H, 2I]
    narrowed to columns [2 start, 2 end) of the interleaved gate/up columns and permuted to
    [E, 2I, H]; down_proj [E, I, H] narrowed to rows [start, end) and permuted to [E, H, I];
    gate_up_proj_bias columns [2 start, 2 end); down_proj_bias zeroed on ranks other than 0;
    each copied into the parameter."""
    full = moe.intermediate_size
    per = math.ceil(full / tp)
    start, end = rank * per, min((rank + 1) * per, full)
    w13 = ckpt[GPT_OSS + "gate_up_proj"][:, :, 2 * start:2 * end].permute(0, 2, 1).contiguous()
    w2 = ckpt[GPT_OSS + "down_proj"][:, start:end, :].permute(0, 2, 1).contiguous()
    b13 = ckpt[GPT_OSS + "gate_up_proj_bias"][:, 2 * start:2 * end]
    b2 = ckpt[GPT_OSS + "down_proj_bias"].clone()
    if rank != 0:
        b2.zero_()
    for name, t in (("w13_weight", w13), ("w2_weight", w2), ("w13_bias", b13), ("w2_bias", b2)):
        getattr(layer, name).data.copy_(t)


# ---- In part: FP8 block, INT8 W8A8, MXFP4 ---------------------------------------------------

SCALE_ROLES = ["w13_weight", "w2_weight", "w13_weight_scale", "w2_weight_scale"]
MXFP4_ROLES = SCALE_ROLES + ["w13_bias", "w2_bias"]


def quant_layer(ns, config, tp, rank, method_name, quant_name):
    moe = moe_of(config, tp, rank, ns["MoEActivation"].SILU)
    layer = new_layer(ns, moe, type(method_name, (), {})(), quant_name)
    return moe, layer


def run_fp8_block_rank(ns, ckpt, config, tp, rank):
    """compressed-tensors FP8 128x128 block: CompressedTensorsW8A8Fp8MoEMethod.create_weights
    stood in for (w13_weight F8 [E, 2I, H], w2_weight F8 [E, H, I], block scales F32
    [E, 2 ceil(I/128), ceil(H/128)] / [E, ceil(H/128), ceil(I/128)] with quant_method "block");
    convert_to_fp8_moe_kernel_format(CPU) run whole."""
    moe, layer = quant_layer(ns, config, tp, rank, "CompressedTensorsW8A8Fp8MoEMethod", "compressed-tensors")
    e, h, i = moe.num_experts, moe.hidden_dim, moe.intermediate_size_per_partition
    block = config["quantization_config"]["config_groups"]["group_0"]["weights"]["block_structure"]
    bn, bk = block
    block_value = ns["FusedMoeWeightScaleSupported"].BLOCK.value
    add_param(ns, layer, "w13_weight", (e, 2 * i, h), torch.float8_e4m3fn)
    add_param(ns, layer, "w2_weight", (e, h, i), torch.float8_e4m3fn)
    add_param(ns, layer, "w13_weight_scale", (e, 2 * math.ceil(i / bn), math.ceil(h / bk)), torch.float32, quant_method=block_value)
    add_param(ns, layer, "w2_weight_scale", (e, math.ceil(h / bn), math.ceil(i / bk)), torch.float32, quant_method=block_value)
    load_experts(layer, ckpt)
    layer.weight_block_size = block
    out = ns["fp8"]["convert_to_fp8_moe_kernel_format"](ns["fp8"]["Fp8MoeBackend"].CPU, layer, layer.w13_weight.data,
                                                        layer.w2_weight.data, layer.w13_weight_scale.data,
                                                        layer.w2_weight_scale.data, None, None)
    return types.SimpleNamespace(**dict(zip(SCALE_ROLES, out)))


def run_int8_rank(ns, ckpt, config, tp, rank):
    """compressed-tensors W8A8 INT8, channel weights: CompressedTensorsW8A8Int8MoEMethod.create_weights
    stood in for (w13_weight I8 [E, 2I, H], w2_weight I8 [E, H, I], scales F32 [E, 2I, 1] /
    [E, H, 1] with quant_method "channel"); CPUExpertsInt8.process_weights_after_loading run whole."""
    moe, layer = quant_layer(ns, config, tp, rank, "CompressedTensorsW8A8Int8MoEMethod", "compressed-tensors")
    e, h, i = moe.num_experts, moe.hidden_dim, moe.intermediate_size_per_partition
    channel = ns["FusedMoeWeightScaleSupported"].CHANNEL.value
    add_param(ns, layer, "w13_weight", (e, 2 * i, h), torch.int8)
    add_param(ns, layer, "w2_weight", (e, h, i), torch.int8)
    add_param(ns, layer, "w13_weight_scale", (e, 2 * i, 1), torch.float32, quant_method=channel)
    add_param(ns, layer, "w2_weight_scale", (e, h, 1), torch.float32, quant_method=channel)
    load_experts(layer, ckpt)
    experts = ns["cpu"]["CPUExpertsInt8"](moe, None)
    experts.process_weights_after_loading(layer)
    return layer


def run_quark_mxfp4_rank(ns, ckpt, config, tp, rank, backend="CPU"):
    """Quark MXFP4 weights (per-expert tensors): QuarkOCP_MX_MoEMethod.create_weights stood in for
    (w13_weight U8 [E, 2I, H/2], w2_weight U8 [E, H, I/2], E8M0 scales U8 [E, 2I, H/32] /
    [E, H, I/32] with quant_method "group"); convert_gpt_oss_weight_to_mxfp4_moe_kernel_format
    (CPU) run whole."""
    moe, layer = quant_layer(ns, config, tp, rank, "QuarkOCP_MX_MoEMethod", "quark")
    e, h, i = moe.num_experts, moe.hidden_dim, moe.intermediate_size_per_partition
    group = ns["FusedMoeWeightScaleSupported"].GROUP.value
    add_param(ns, layer, "w13_weight", (e, 2 * i, h // 2), torch.uint8)
    add_param(ns, layer, "w2_weight", (e, h, i // 2), torch.uint8)
    add_param(ns, layer, "w13_weight_scale", (e, 2 * i, h // 32), torch.uint8, quant_method=group)
    add_param(ns, layer, "w2_weight_scale", (e, h, i // 32), torch.uint8, quant_method=group)
    load_experts(layer, ckpt)
    return convert_mxfp4(ns, layer, backend)


def run_gpt_oss_mxfp4_rank(ns, ckpt, config, tp, rank, backend="CPU"):
    """gpt-oss MXFP4 (fused expert tensors): Mxfp4MoEMethod.create_weights stood in for (w13_weight
    U8 [E, 2I, H/2], w13_weight_scale U8 [E, 2I, H/32], w13_bias [E, 2I] in the model dtype, w2
    likewise; I and H as the CPU backend rounds them to 32, here unchanged); the model's
    _load_weights_mxfp4 narrowing transliterated (gpt_oss.py @ e9d1398d9: per-rank intermediate
    size cdiv(I/32, tp)*32, w13 rows [2 start, 2 end) of the interleaved gate/up rows, w2 bytes
    [start/2, end/2) and scales [start/32, end/32), w2_bias zeroed on ranks other than 0), then
    RoutedExperts.weight_loader's gpt_oss_mxfp4 copy; convert_gpt_oss_weight_to_mxfp4_moe_kernel_format
    (CPU) run whole."""
    moe, layer = quant_layer(ns, config, tp, rank, "Mxfp4MoEMethod", "gpt_oss_mxfp4")
    e, h, full = moe.num_experts, moe.hidden_dim, moe.intermediate_size
    per = math.ceil(full // 32 / tp) * 32
    start, end = rank * per, min((rank + 1) * per, full)
    i = per
    add_param(ns, layer, "w13_weight", (e, 2 * i, h // 2), torch.uint8)
    add_param(ns, layer, "w2_weight", (e, h, i // 2), torch.uint8)
    add_param(ns, layer, "w13_weight_scale", (e, 2 * i, h // 32), torch.uint8)
    add_param(ns, layer, "w2_weight_scale", (e, h, i // 32), torch.uint8)
    add_param(ns, layer, "w13_bias", (e, 2 * i), torch.bfloat16)
    add_param(ns, layer, "w2_bias", (e, h), torch.bfloat16)
    p = "model.layers.0.mlp.experts."
    w13 = ckpt[p + "gate_up_proj_blocks"].view(e, 2 * full, -1)[:, 2 * start:2 * end, ...]
    w2 = ckpt[p + "down_proj_blocks"].view(e, -1, full // 2)[..., start // 2:end // 2]
    s13 = ckpt[p + "gate_up_proj_scales"][:, 2 * start:2 * end, ...]
    s2 = ckpt[p + "down_proj_scales"][..., start // 32:end // 32]
    b13 = ckpt[p + "gate_up_proj_bias"][:, 2 * start:2 * end]
    b2 = ckpt[p + "down_proj_bias"].clone()
    if rank != 0:
        b2.zero_()
    for name, t in (("w13_weight", w13), ("w2_weight", w2), ("w13_weight_scale", s13), ("w2_weight_scale", s2),
                    ("w13_bias", b13), ("w2_bias", b2)):
        param = getattr(layer, name)
        param.weight_loader(param, t, p + name, shard_id=None, expert_id=None)
    return convert_mxfp4(ns, layer, backend)


def convert_mxfp4(ns, layer, backend="CPU"):
    """The oracle's MXFP4 kernel-format conversion for `backend` (an Mxfp4MoeBackend member name):
    CPU here; make_mxfp4_layer_goldens.py runs the same loaders for XPU and EMULATION."""
    m = ns["mxfp4"]
    out = m["convert_gpt_oss_weight_to_mxfp4_moe_kernel_format"](
        m["Mxfp4MoeBackend"][backend], layer, layer.w13_weight, layer.w2_weight, layer.w13_weight_scale, layer.w2_weight_scale,
        getattr(layer, "w13_bias", None), getattr(layer, "w2_bias", None))
    return types.SimpleNamespace(**{r: t for r, t in zip(MXFP4_ROLES, out) if t is not None})


# ---------------------------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------------------------


def record_rank(g, case: dict, layer, rank: int, roles) -> dict:
    recorded, empty = [], []
    for role in roles:
        t = getattr(layer, role, None)
        if t is None:
            continue
        t = t.data if isinstance(t, torch.nn.Parameter) else t
        if t.numel() == 0:
            empty.append(role)
            continue
        b = wn.storage_bytes(t)
        entry = {"role": role, "shape": [int(s) for s in t.shape], "dtype": str(t.dtype).replace("torch.", ""),
                 "bytes": int(b.numel())}
        common.keep_whole_or_digest(g, entry, b, f"layer/{case['name']}/{rank}/{role}", b.numel() <= WHOLE_BYTES)
        recorded.append(entry)
    others = []
    if isinstance(layer, torch.nn.Module):
        for name, p in layer.named_parameters():
            if name not in roles and name not in ("w13_weight", "w2_weight"):
                others.append(f"{name} {str(p.dtype).replace('torch.', '')}{list(p.shape)}")
    return {"rank": rank, "outputs": recorded, "empty": empty, "not_recorded": others}


# Synthetic checkpoints (make_wna16_goldens.synth_checkpoint, and unquantized ones here), at
# sizes the samples do not reach.
SYNTHETIC = {
    # AWQ groups of 32 (block_k 32, four groups per row of w13, random zero points), I = 192:
    # 96 per rank at TP 2.
    "awq-int4-g32-h128-i192": ("awq-int4", dict(method="awq", bits=4, group=32, hidden=128, inter=192, experts=2)),
    # GPTQ groups of 128 along a hidden size of 256 (two groups, two 128-input blocks per w13 row).
    "gptq-int4-g128-h256-i256": ("gptq-int4", dict(method="gptq", bits=4, group=128, hidden=256, inter=256, experts=2)),
    # GPTQ groups of 64 (block_k 64), TP 2.
    "gptq-int4-g64-h128-i256": ("gptq-int4", dict(method="gptq", bits=4, group=64, hidden=128, inter=256, experts=2)),
    # compressed-tensors symmetric groups of 64 (synthetic 0x77777777 zero points), TP 2. (Groups
    # of 32 have another weight key, kInt4Static32GroupScale, which CPUExpertsInt4 does not
    # take: vLLM refuses them on the CPU, and so does moepack.)
    "ct-w4a16-g64-h128-i256": ("ct-w4a16", dict(method="compressed-tensors", bits=4, group=64, hidden=128, inter=256,
                                                 experts=2, sym=True)),
}

# Unquantized Qwen3-MoE whose intermediate size the CPU experts pad (80 -> 96 at TP 1, 40 -> 64
# at TP 2): random BF16 weights.
SYNTHETIC_BF16 = {"qwen3-moe-bf16-h128-i80": ("qwen3-moe-bf16", dict(hidden=128, inter=80, experts=2))}


def synth_bf16_checkpoint(gen, spec):
    hidden, inter, experts = spec["hidden"], spec["inter"], spec["experts"]
    t = wn.dense_tensors(gen, hidden, experts)
    for e in range(experts):
        for proj in ("gate_proj", "up_proj", "down_proj"):
            n, k = (hidden, inter) if proj == "down_proj" else (inter, hidden)
            t[wn.PREFIX.format(e=e) + proj + ".weight"] = (torch.randn((n, k), generator=gen) * 0.05).to(torch.bfloat16)
    return t


def synth_bf16_config(samples: Path, base: str, spec: dict) -> str:
    c = json.loads((samples / base / "config.json").read_text())
    c.update(hidden_size=spec["hidden"], intermediate_size=spec["inter"], moe_intermediate_size=spec["inter"],
             num_experts=spec["experts"], num_experts_per_tok=min(2, spec["experts"]))
    return json.dumps(c, indent=2) + "\n"


# (checkpoint, target, tp, family): every deployment moepack converts for the CPU targets among
# the samples (tests/convert/golden/every_target.txt), but the cpu-arm ones (neon packs, not
# compiled on x86) and the Quark MXFP4 variants with activation scales (the packs of
# quark-w-mxfp4, beside scales this harness does not load).
DEPLOYMENTS = [
    ("gptq-int4", "cpu-amx", 1, "wna16"), ("awq-int4", "cpu-amx", 1, "wna16"), ("ct-w4a16", "cpu-amx", 1, "wna16"),
    ("awq-int4-g32-h128-i192", "cpu-amx", 1, "wna16"), ("awq-int4-g32-h128-i192", "cpu-amx", 2, "wna16"),
    ("gptq-int4-g128-h256-i256", "cpu-amx", 1, "wna16"), ("gptq-int4-g128-h256-i256", "cpu-amx", 2, "wna16"),
    ("gptq-int4-g64-h128-i256", "cpu-amx", 2, "wna16"), ("ct-w4a16-g64-h128-i256", "cpu-amx", 2, "wna16"),
    ("qwen3-moe-bf16", "cpu-amx", 1, "bf16"), ("qwen3-moe-bf16", "cpu-amx", 2, "bf16"),
    ("mixtral-bf16", "cpu-amx", 1, "bf16"), ("mixtral-bf16", "cpu-amx", 2, "bf16"),
    ("qwen3-moe-bf16", "cpu-avx512", 1, "bf16"), ("mixtral-bf16", "cpu-avx512", 2, "bf16"),
    ("qwen3-moe-bf16-h128-i80", "cpu-amx", 1, "bf16"), ("qwen3-moe-bf16-h128-i80", "cpu-amx", 2, "bf16"),
    ("qwen3-moe-bf16-h128-i80", "cpu-avx512", 2, "bf16"),
    ("gpt-oss-bf16", "cpu-amx", 1, "bf16"), ("gpt-oss-bf16", "cpu-amx", 2, "bf16"), ("gpt-oss-bf16", "cpu-avx512", 1, "bf16"),
    ("ct-fp8-block", "cpu-amx", 1, "fp8"),
    ("ct-w8a8-int8", "cpu-amx", 1, "int8"), ("ct-w8a8-int8", "cpu-amx", 2, "int8"),
    ("gpt-oss-mxfp4", "cpu-amx", 1, "gpt-oss-mxfp4"), ("gpt-oss-mxfp4", "cpu-amx", 2, "gpt-oss-mxfp4"),
    ("quark-w-mxfp4", "cpu-amx", 1, "quark-mxfp4"), ("quark-w-mxfp4", "cpu-amx", 2, "quark-mxfp4"),
]
PARTIAL = {"fp8", "int8", "gpt-oss-mxfp4", "quark-mxfp4"}
BACKEND_CLASS = {"wna16": "CPUExpertsInt4", "fp8": "CPUExpertsFp8", "int8": "CPUExpertsInt8", "gpt-oss-mxfp4": "CPUExpertsMxfp4",
                 "quark-mxfp4": "CPUExpertsMxfp4"}


def sources_of(samples: Path, gen, g) -> dict:
    sources = {}
    for name in sorted({d[0] for d in DEPLOYMENTS}):
        if name in SYNTHETIC or name in SYNTHETIC_BF16:
            if name in SYNTHETIC:
                base, spec = SYNTHETIC[name]
                tensors, q = wn.synth_checkpoint(gen, spec)
                config_text = wn.synth_config(samples, base, spec, q)
            else:
                base, spec = SYNTHETIC_BF16[name]
                tensors = synth_bf16_checkpoint(gen, spec)
                config_text = synth_bf16_config(samples, base, spec)
            data = common.safetensors_bytes(tensors, {"format": "pt"}, wn.ST_NAMES)
            key = f"checkpoint/{name}/model.safetensors"
            g.put(key, torch.frombuffer(bytearray(data), dtype=torch.uint8))
            g.checkpoints[name] = {"config": config_text, "model": key}
            sources[name] = ({"model.safetensors": data}, json.loads(config_text), "")
        else:
            files = {f.name: f.read_bytes() for f in sorted((samples / name).glob("*.safetensors"))}
            sources[name] = (files, json.loads((samples / name / "config.json").read_text()), name)
    return sources


def case_sha(files: dict) -> str:
    """SHA-256 of the checkpoint: of model.safetensors, or of the shards' hashes in name order."""
    if list(files) == ["model.safetensors"]:
        return common.sha256_hex(files["model.safetensors"])
    return common.sha256_hex("".join(common.sha256_hex(files[n]) for n in sorted(files)).encode())


def layer_cases(ns, g, samples: Path, gen, errors: list):
    sources = sources_of(samples, gen, g)
    for name, target, tp, family in DEPLOYMENTS:
        files, config, sample = sources[name]
        case = {"name": f"{name}_{target}" + (f"_tp{tp}" if tp > 1 else ""), "sample": sample, "checkpoint": "" if sample else name,
                "sha256": case_sha(files), "target": target, "moe_backend": "", "model_dtype": "", "tp": tp, "ep": False,
                "backend": "CPU", "experts_class": "", "method": family, "partial": family in PARTIAL, "ranks": [], "notes": []}
        try:
            ckpt = {}
            for data in files.values():
                ckpt.update(common.parse_safetensors(data, wn.ST_DTYPES))
            for rank in range(tp):
                with model_dtype(torch.bfloat16):
                    if family == "wna16":
                        method = wn.method_of(config)
                        layer, roles = run_wna16_rank(ns, ckpt, config, tp, rank), WNA16_ROLES[method]
                        case["experts_class"] = "CPUExpertsInt4"
                    elif family == "bf16":
                        layer, roles = run_unquantized_rank(ns, ckpt, config, tp, rank, target), UNQUANTIZED_ROLES
                        case["experts_class"] = "X86CPUUnquantizedExperts" if target == "cpu-amx" else "CPUUnquantizedExperts"
                    else:
                        run = {"fp8": run_fp8_block_rank, "int8": run_int8_rank, "gpt-oss-mxfp4": run_gpt_oss_mxfp4_rank,
                               "quark-mxfp4": run_quark_mxfp4_rank}[family]
                        layer = run(ns, ckpt, config, tp, rank)
                        roles = MXFP4_ROLES if "mxfp4" in family else SCALE_ROLES
                        case["experts_class"] = BACKEND_CLASS[family]
                case["ranks"].append(record_rank(g, case, layer, rank, roles))
            g.layer_cases.append(case)
        except Exception as exc:  # keep the other cases; report this one
            common.report_failure(errors, case["name"], exc)


class Golden(wn.Golden):
    FILE = "golden_cpu.safetensors"

    def save(self, out: Path, provenance: dict) -> Path:
        path = out / self.FILE
        meta = common.layer_golden_metadata(provenance, self.layer_cases, checkpoints=self.checkpoints)
        path.write_bytes(common.safetensors_bytes(self.tensors, meta, wn.ST_NAMES))
        return path


def cpu_flags() -> list:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                return sorted(f for f in ("avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8", "amx_tile") if f in have)
    except OSError:
        pass
    return []


def main():
    ap = common.argument_parser(__doc__)
    ap.add_argument("--build", type=Path, default=Path("/tmp/moepack_cpu_ops"), help="where the ops are compiled")
    ap.add_argument("--sleef", type=Path, help="a folder with sleef.h, used when PyTorch's headers lack it")
    ap.add_argument("--dry-run", action="store_true", help="do not compile: the ops return zeros (plumbing only)")
    ap.add_argument("--out", type=Path, help="where golden_cpu.safetensors goes (omit for a dry run)")
    args = ap.parse_args()

    compat, ops = [], {}
    if not hasattr(torch, "float8_e4m3fn"):
        torch.float8_e4m3fn = torch.uint8
        compat.append("torch<2.1: float8_e4m3fn aliased to uint8")
    if not hasattr(torch.Tensor, "untyped_storage"):
        torch.Tensor.untyped_storage = lambda self: self.storage().untyped()
        compat.append("torch without Tensor.untyped_storage: storage().untyped()")
    if args.dry_run:
        keep = zeros_library()  # noqa: F841  (kept alive while the ops are used)
        compat.append("dry run: the CPU pack ops return zeros (plumbing only)")
    else:
        ops = load_cpu_ops(args.vendor, args.build, args.sleef)
    ns = vllm_namespace(args.vendor)
    provenance = {"vllm": VLLM, "seed": SEED, "torch": torch.__version__, "device": "cpu", "cpu_flags": cpu_flags(),
                  "threads": torch.get_num_threads(), "ops": ops, "compat": compat}
    g = Golden()
    errors = []
    layer_cases(ns, g, args.samples, torch.Generator().manual_seed(SEED), errors)
    summary = {"provenance": provenance, "layer_cases": len(g.layer_cases),
               "bytes": sum(t.numel() * t.element_size() for t in g.tensors.values()), "errors": errors,
               "empty": sorted({x for c in g.layer_cases for r in c["ranks"] for x in r["empty"]}),
               "not_recorded": sorted({x for c in g.layer_cases for r in c["ranks"] for x in r["not_recorded"]})}
    return common.finish(summary, errors, args.out, lambda out: g.save(out, provenance))


if __name__ == "__main__":
    sys.exit(main())
