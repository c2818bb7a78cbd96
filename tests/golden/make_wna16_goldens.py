#!/usr/bin/env python3
"""Golden bytes for moepack's integer weight-only (WNA16) Marlin conversions, produced by running
the REAL upstream code, vLLM's compiled CUDA repack ops included.

Tooling, not part of the build; the companion of make_nvfp4_goldens.py (whose helpers it
imports) and run the same way, on a machine with an SM90 GPU, nvcc and ninja (PyTorch's
cpp_extension builds the ops there in about ten seconds). It needs a folder of upstream sources
that this repository does NOT ship. Populate it with vLLM's own files, at their own paths, from
vllm-project/vllm @ e9d1398d9:

  VENDOR/vllm/csrc/libtorch_stable/torch_utils.h
  VENDOR/vllm/csrc/libtorch_stable/quantization/marlin/{marlin.cuh,gptq_marlin_repack.cu,
      awq_marlin_repack.cu}
  VENDOR/vllm/vllm/_custom_ops.py
  VENDOR/vllm/vllm/utils/math_utils.py
  VENDOR/vllm/vllm/model_executor/utils.py
  VENDOR/vllm/vllm/model_executor/layers/fused_moe/{routed_experts.py,oracle/int_wna16.py}
  VENDOR/vllm/vllm/model_executor/layers/quantization/{auto_gptq.py,auto_awq.py}
  VENDOR/vllm/vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/
      compressed_tensors_moe_wna16.py
  VENDOR/vllm/vllm/model_executor/layers/quantization/utils/{marlin_utils,marlin_utils_fp8,
      quant_utils,layer_utils}.py

  python3 tests/golden/make_wna16_goldens.py --vendor VENDOR --samples samples --out OUTDIR

The compiled ops: vLLM's two repack kernels, csrc/libtorch_stable/quantization/marlin/
gptq_marlin_repack.cu and awq_marlin_repack.cu, are compiled unchanged (sm_90, with the
TORCH_TARGET_VERSION and USE_CUDA definitions vLLM's CMakeLists gives its stable-ABI extension)
together with tests/golden/marlin_repack_ops.cpp, this repository's own file that declares the
two op schemas under vLLM's library name `_C` (vLLM declares them in torch_bindings.cpp among a
hundred other ops). vLLM's Python wrappers (`gptq_marlin_repack`, `awq_marlin_repack`,
`gptq_marlin_moe_repack`, `awq_marlin_moe_repack` from _custom_ops.py) then run unchanged
through torch.ops._C. Without CUDA (a dry run of the plumbing) the repack returns zeros of the
op's shape and the provenance's "compat" says so; the test refuses such a file.

Layer cases (metadata "golden_layer_cases", checked end to end by
tests/convert/upstream_goldens_test.cpp): a GPTQ, AWQ or compressed-tensors checkpoint, loaded into
one layer per tensor-parallel rank and prepared by vLLM's own code, run unchanged:
  * the quantization method's `create_weights` (AutoGPTQMoEMethod, AutoAWQMoEMethod,
    CompressedTensorsWNA16MoEMethod with its get_weight_shape and _w2_scale_sharding): the
    parameters, their shapes and dtypes, and the loader attributes (is_transposed,
    quant_method, load_full_w2);
  * RoutedExperts' `weight_loader` with every helper it calls (_load_w13, _load_w2, _load_g_idx,
    _load_model_weight_or_group_weight_scale, _load_per_channel_weight_scale,
    _load_single_value, _narrow_expert_data_for_padding, ...), fed each checkpoint tensor as
    vLLM's model loader feeds it (the expert-mapping name, shard id w1/w3/w2, expert id);
  * the method's `process_weights_after_loading`, which runs `convert_to_wna16_moe_kernel_format`
    for the MARLIN backend: `_process_weights_marlin` / `_process_awq_weights_marlin` whole (the
    thread-tile padding of the intermediate size, the act-order g_idx sort, the compiled
    repack, `marlin_moe_permute_scales`, the zero-point conversions, the bias permutation).
What vLLM's layer then holds for the Marlin kernel (weights, scales, zero points, g_idx, sort
indices, biases, input global scales) is recorded by role and rank: whole when at most
WHOLE_BYTES bytes, as the SHA-256 of its storage bytes otherwise (the repacked weights).

Other backends, the same methods run whole (DEPLOYMENTS' 5-tuples): compressed-tensors on TRITON
(convert_to_wna16_moe_kernel_format's transposes and uint8 views, zero points regrouped), GPTQ and
compressed-tensors on XPU (_process_weights_xpu), and CompressedTensorsW8A8Int8MoEMethod on TRITON
(create_weights, the loader, convert_to_int8_moe_kernel_format; its quant config and kernel are
records whose experts run FusedMoEExperts' own process_weights_after_loading). Each method is set
up as its __init__ leaves it for that backend.

FP8 on Marlin, in part (cases marked "partial"): the compressed-tensors FP8 samples' expert
weights and scales, stacked as vLLM's loader stacks them, through
`prepare_fp8_moe_layer_for_marlin` run whole (see run_fp8_rank).

Checkpoints: the repository's samples (recorded with their SHA-256), and synthetic ones made
here from a seed and stored whole in the golden file (metadata "golden_checkpoints": the
config.json text and the key of the model.safetensors bytes), at sizes the samples do not
reach: group sizes 32 and 64 with several groups per row, two tensor-parallel ranks whose w13
shard is no larger than one scale group (vLLM permutes those w13 scales with the "single"
permutation because it passes the intermediate size as size_k), intermediate sizes that
Marlin pads (96 -> 128, 80 -> 128), act-order with g_idx that are a permutation of several
groups, zero points, channel-wise 8-bit.

Stand-ins, named in the README:
  * The backend: the method's constructor (which runs vLLM's WNA16 oracle) is not run; its
    fields are set as its __init__ sets them for the MARLIN backend with 16-bit activations
    (input_dtype None, experts_cls None, so no workspace). The test checks that moepack's
    oracle picks MARLIN for the same deployment.
  * `_setup_kernel` (it builds the modular kernel object from the prepared tensors) does
    nothing; `marlin_make_workspace_new` returns None.
  * vLLM's QuantizationConfig base class and compressed-tensors' QuantizationArgs (an external
    package): plain records with the fields the code reads. AutoGPTQConfig and AutoAWQConfig are
    vLLM's own classes, run whole (desc_act with group_size -1 becomes False there).
  * vLLM's model loader: the checkpoint tensors are fed to the weight loader in name order, the
    expert mapping of Qwen3-MoE (gate_proj -> w1, up_proj -> w3, down_proj -> w2), every
    expert local (no expert parallelism).
  * Only where the device's torch.argsort orders a g_idx unlike a stable sort (it did not on the
    H200 that made the committed file): that rank is recorded again with a stable argsort and
    the case's "notes" say so (moepack sorts stably; vLLM's order of equal keys is the sort
    implementation's).
"""

import contextlib
import json
import math
import os
import sys
import types
import typing
from enum import Enum
from fractions import Fraction
from pathlib import Path

import numpy
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as common  # noqa: E402

SEED = 20250612
WHOLE_BYTES = 4096
VLLM = common.VLLM
HERE = Path(__file__).resolve().parent

# ---------------------------------------------------------------------------------------------
# vLLM's compiled repack ops
# ---------------------------------------------------------------------------------------------


def load_marlin_ops(vendor: Path, build_dir: Path) -> dict:
    """Builds vLLM's two Marlin repack .cu files (unchanged) with marlin_repack_ops.cpp and loads
    them as torch.ops._C.{gptq,awq}_marlin_repack. Returns what was built, for the provenance."""
    import time

    from torch.utils.cpp_extension import load

    marlin = vendor / "vllm" / "csrc" / "libtorch_stable" / "quantization" / "marlin"
    sources = [HERE / "marlin_repack_ops.cpp", marlin / "gptq_marlin_repack.cu", marlin / "awq_marlin_repack.cu"]
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    flags = ["-O2", "-DTORCH_TARGET_VERSION=0x020B000000000000ULL", "-DUSE_CUDA"]
    build_dir.mkdir(parents=True, exist_ok=True)
    start = time.time()
    load(name="vllm_marlin_repack", sources=[str(s) for s in sources], extra_include_paths=[str(vendor / "vllm" / "csrc")],
         extra_cflags=flags, extra_cuda_cflags=flags, build_directory=str(build_dir), is_python_module=False)
    return {"sources": [str(s.relative_to(vendor)) if vendor in s.parents else s.name for s in sources],
            "arch": os.environ["TORCH_CUDA_ARCH_LIST"], "compile_seconds": round(time.time() - start, 1),
            "nvcc_flags": flags}


def zeros_repack_library():
    """Dry runs without CUDA: ops of the right output shape whose bytes are zeros."""
    lib = torch.library.Library("_C", "DEF")
    lib.define("gptq_marlin_repack(Tensor b_q_weight, Tensor perm, int size_k, int size_n, int num_bits, bool is_a_8bit) -> Tensor")
    lib.define("awq_marlin_repack(Tensor b_q_weight, int size_k, int size_n, int num_bits, bool is_a_8bit) -> Tensor")

    def out(w, size_k, size_n, num_bits):
        return torch.zeros((size_k // 16, size_n * 16 // (32 // num_bits)), dtype=w.dtype, device=w.device)

    lib.impl("gptq_marlin_repack", lambda w, perm, k, n, b, a8: out(w, k, n, b), "CompositeExplicitAutograd")
    lib.impl("awq_marlin_repack", lambda w, k, n, b, a8: out(w, k, n, b), "CompositeExplicitAutograd")
    return lib


# ---------------------------------------------------------------------------------------------
# Running upstream definitions
# ---------------------------------------------------------------------------------------------


class QuantizationConfig:
    """vLLM's QuantizationConfig base, as far as AutoGPTQConfig / AutoAWQConfig's __init__ use it."""

    def __init__(self):
        self.packed_modules_mapping = {}


class QuantizationArgs:
    """compressed-tensors' QuantizationArgs (an external package): the fields vLLM reads."""

    def __init__(self, num_bits, group_size, strategy, symmetric, actorder):
        self.num_bits, self.group_size, self.strategy = num_bits, group_size, strategy
        self.symmetric, self.actorder = symmetric, actorder


class QuantizationStrategy(str, Enum):
    """compressed-tensors' QuantizationStrategy (an external package): its values."""

    TENSOR = "tensor"
    CHANNEL = "channel"
    GROUP = "group"
    BLOCK = "block"
    TOKEN = "token"


class TorchWithStableArgsort:
    """The torch module, except that argsort is stable while `stable` is set: the stand-in for
    vLLM's torch.argsort of a g_idx when the GPU's sort orders equal keys otherwise (see
    run_rank)."""

    stable = False

    def __getattr__(self, name):
        return getattr(torch, name)

    def argsort(self, t, *args, **kwargs):
        if TorchWithStableArgsort.stable:
            return torch.sort(t, *args, stable=True, **kwargs).indices
        return torch.argsort(t, *args, **kwargs)


def vllm_namespace(vendor: Path) -> dict:
    v = vendor / "vllm" / "vllm"
    layers = v / "model_executor" / "layers"
    quant = layers / "quantization"
    utils = quant / "utils"
    common.stub_module("vllm.platforms", current_platform=types.SimpleNamespace(use_sync_weight_loader=lambda: False))
    ns = {"torch": TorchWithStableArgsort(), "sys": sys, "math": math, "numpy": numpy, "Enum": Enum, "Fraction": Fraction, "Any": typing.Any, "Union": typing.Union,
          "Literal": typing.Literal, "cast": typing.cast,
          "Parameter": torch.nn.Parameter, "logger": common.QuietLogger(), "TYPE_CHECKING": False,
          "QuantizationConfig": QuantizationConfig, "QuantizationArgs": QuantizationArgs,
          "scalar_types": types.SimpleNamespace(uint4b8=types.SimpleNamespace(size_bits=4),
                                                uint8b128=types.SimpleNamespace(size_bits=8),
                                                uint4=types.SimpleNamespace(size_bits=4)),
          "marlin_make_workspace_new": lambda *a, **k: None}
    common.exec_top_level(v / "utils" / "math_utils.py", ["round_up"], ns)
    common.exec_top_level(v / "model_executor" / "utils.py", ["set_weight_attrs"], ns)
    common.exec_top_level(layers / "fused_moe" / "routed_experts.py", ["FusedMoeWeightScaleSupported"], ns)
    common.exec_top_level(utils / "quant_utils.py", ["get_pack_factor", "pack_cols", "unpack_cols"], ns)
    common.exec_top_level(utils / "marlin_utils.py", [
        "marlin_moe_padded_intermediate", "get_scale_perms", "marlin_permute_scales", "marlin_permute_bias",
        "marlin_act_int8_process_scales", "marlin_moe_permute_scales", "marlin_zero_points", "awq_to_marlin_zero_points",
        "moe_awq_to_marlin_zero_points", "moe_packed_to_marlin_zero_points"], ns)
    custom = common.exec_top_level(v / "_custom_ops.py", ["gptq_marlin_repack", "awq_marlin_repack", "gptq_marlin_moe_repack",
                                                          "awq_marlin_moe_repack"], dict(ns))
    ns["ops"] = types.SimpleNamespace(**{k: custom[k] for k in ("gptq_marlin_repack", "awq_marlin_repack",
                                                                "gptq_marlin_moe_repack", "awq_marlin_moe_repack")})
    common.exec_top_level(quant / "auto_gptq.py", ["AutoGPTQConfig"], ns)
    common.exec_top_level(quant / "auto_awq.py", ["AutoAWQConfig"], ns)
    common.stub_module("vllm.model_executor.layers.quantization.auto_gptq", AutoGPTQConfig=ns["AutoGPTQConfig"])
    common.stub_module("vllm.model_executor.layers.quantization.auto_awq", AutoAWQConfig=ns["AutoAWQConfig"])
    common.exec_top_level(layers / "fused_moe" / "oracle" / "int_wna16.py", [
        "WNA16MoEBackend", "_pad_w13_shard_cols", "_pad_rows", "_pad_w13_bias", "_process_weights_marlin",
        "_process_awq_weights_marlin", "_process_weights_xpu", "convert_to_wna16_moe_kernel_format"], ns)

    ns["get_marlin_input_dtype"] = lambda *a, **k: None  # 16-bit activations
    common.exec_top_level(utils / "marlin_utils_fp8.py", ["fp8_fused_exponent_bias_into_scales", "_moe_pad_shard_rows",
                                                          "_moe_pad_last", "pack_fp8_to_int32",
                                                          "prepare_fp8_moe_layer_for_marlin"], ns)

    # The methods, each in a namespace with the replace_parameter its file imports.
    layer_utils = common.exec_top_level(utils / "layer_utils.py", ["update_tensor_inplace", "replace_parameter"], dict(ns))
    gptq_awq_ns = dict(ns, replace_parameter=layer_utils["replace_parameter"])
    ct_ns = common.exec_top_level(v / "model_executor" / "utils.py", ["replace_parameter"], dict(ns))
    common.exec_top_level(quant / "auto_awq.py", ["_replace_or_register_parameter"], gptq_awq_ns)
    noop = lambda self, layer: None  # noqa: E731  (_setup_kernel builds the kernel object)

    def method_class(name, path, methods, statics=(), ns_=gptq_awq_ns):
        body = {m: common.exec_method(path, name, m, ns_) for m in methods}
        body.update({m: staticmethod(common.exec_method(path, name, m, ns_)) for m in statics})
        body["_setup_kernel"] = noop
        return type(name, (), body)

    ct_path = quant / "compressed_tensors" / "compressed_tensors_moe" / "compressed_tensors_moe_wna16.py"
    # INT8 W8A8 (compressed-tensors): the int8 oracle's conversion, run whole; the quant config and
    # the modular kernel are records, whose experts run FusedMoEExperts' own (base)
    # process_weights_after_loading (TritonExperts does not override it).
    int8_ns = dict(ct_ns, QuantizationStrategy=QuantizationStrategy)
    common.exec_top_level(layers / "fused_moe" / "oracle" / "int8.py", ["Int8MoeBackend", "convert_to_int8_moe_kernel_format"],
                          int8_ns)
    experts_pwal = common.exec_method(layers / "fused_moe" / "modular_kernel.py", "FusedMoEExperts",
                                      "process_weights_after_loading", dict(ns))
    int8_ns["make_int8_moe_quant_config"] = lambda **kw: types.SimpleNamespace(**kw)
    int8_ns["make_int8_moe_kernel"] = lambda **kw: types.SimpleNamespace(
        fused_experts=types.SimpleNamespace(process_weights_after_loading=lambda layer: experts_pwal(None, layer)))
    ns["Int8MoeBackend"] = int8_ns["Int8MoeBackend"]
    int8_path = quant / "compressed_tensors" / "compressed_tensors_moe" / "compressed_tensors_moe_w8a8_int8.py"
    ns["methods"] = {
        "gptq": method_class("AutoGPTQMoEMethod", quant / "auto_gptq.py", ["create_weights", "process_weights_after_loading"]),
        "awq": method_class("AutoAWQMoEMethod", quant / "auto_awq.py", ["create_weights", "process_weights_after_loading"]),
        "compressed-tensors": method_class("CompressedTensorsWNA16MoEMethod", ct_path,
                                           ["_packed_dim", "get_weight_shape", "create_weights",
                                            "process_weights_after_loading"], ["_w2_scale_sharding"], ns_=ct_ns),
        "ct-w8a8-int8": method_class("CompressedTensorsW8A8Int8MoEMethod", int8_path,
                                     ["create_weights", "process_weights_after_loading", "get_fused_moe_quant_config"],
                                     ns_=int8_ns),
    }

    # RoutedExperts' weight loader, as methods of the layer.
    routed = layers / "fused_moe" / "routed_experts.py"
    loader = {m: common.exec_method(routed, "RoutedExperts", m, ns, last=True) for m in (
        "weight_loader", "_load_per_tensor_weight_scale", "_load_model_weight_or_group_weight_scale",
        "_load_per_channel_weight_scale", "_load_w13", "_load_w2", "_load_single_value", "_load_g_idx")}
    loader.update({m: staticmethod(common.exec_method(routed, "RoutedExperts", m, ns, last=True)) for m in (
        "_to_scalar", "_get_hidden_dim", "_narrow_expert_data_for_padding")})
    ns["layer_class"] = type("RoutedExperts", (torch.nn.Module,), dict(
        loader, _map_global_expert_id_to_local_expert_id=lambda self, e: e, _expert_routing_tables=lambda self: None))
    return ns


# ---------------------------------------------------------------------------------------------
# Storage bytes and safetensors dtypes (I64 and F16 too; golden_common reads and writes the container)
# ---------------------------------------------------------------------------------------------

ST_DTYPES = {"U8": torch.uint8, "I8": torch.int8, "I32": torch.int32, "I64": torch.int64, "F32": torch.float32, "BF16": torch.bfloat16,
             "F16": torch.float16}
if hasattr(torch, "float8_e4m3fn") and torch.float8_e4m3fn is not torch.uint8:
    ST_DTYPES["F8_E4M3"] = torch.float8_e4m3fn
ST_NAMES = {v: k for k, v in ST_DTYPES.items()}


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().reshape(-1).view(torch.uint8).cpu() if t.ndim else t.reshape(1).view(torch.uint8).cpu()


# ---------------------------------------------------------------------------------------------
# Synthetic checkpoints
# ---------------------------------------------------------------------------------------------

PREFIX = "model.layers.0.mlp.experts.{e}."
PROJS = (("gate_proj", "w1"), ("up_proj", "w3"), ("down_proj", "w2"))


def random_i32(gen, shape):
    return torch.randint(-2 ** 31, 2 ** 31 - 1, shape, generator=gen, dtype=torch.int64).to(torch.int32)


def random_scales(gen, shape, dtype):
    return (0.001 + 0.05 * torch.rand(shape, generator=gen, dtype=torch.float32)).to(dtype)


def dense_tensors(gen, hidden: int, experts: int) -> dict:
    """The non-expert tensors of the samples (Qwen3-MoE, one layer, vocabulary 16)."""
    bf = torch.bfloat16
    return {"lm_head.weight": random_scales(gen, (16, hidden), bf), "model.embed_tokens.weight": random_scales(gen, (16, hidden), bf),
            "model.layers.0.input_layernorm.weight": torch.ones(hidden, dtype=bf),
            "model.layers.0.mlp.gate.weight": random_scales(gen, (experts, hidden), bf),
            "model.layers.0.post_attention_layernorm.weight": torch.ones(hidden, dtype=bf),
            "model.norm.weight": torch.ones(hidden, dtype=bf)}


def synth_checkpoint(gen, spec: dict):
    """(tensors, quantization_config) of a synthetic checkpoint: random codes, positive scales."""
    method, bits, group = spec["method"], spec["bits"], spec["group"]
    hidden, inter, experts = spec["hidden"], spec["inter"], spec["experts"]
    pf = 32 // bits
    t = dense_tensors(gen, hidden, experts)
    for e in range(experts):
        # One act-order permutation per expert input (GPTQ quantizes gate and up on the same
        # inputs, so their g_idx agree).
        perms = {hidden: torch.randperm(hidden, generator=gen), inter: torch.randperm(inter, generator=gen)}
        for proj, _ in PROJS:
            n, k = (hidden, inter) if proj == "down_proj" else (inter, hidden)
            groups = k // group if group > 0 else 1
            g_idx = (torch.arange(k) // (group if group > 0 else k)).to(torch.int32)
            if spec.get("act_order"):
                g_idx = g_idx[perms[k]].contiguous()
            name = PREFIX.format(e=e) + proj + "."
            if method == "gptq":
                t[name + "qweight"] = random_i32(gen, (k // pf, n))
                t[name + "qzeros"] = torch.full((groups, n // pf), 0x77777777 if bits == 4 else 0x7F7F7F7F, dtype=torch.int32)
                t[name + "scales"] = random_scales(gen, (groups, n), torch.float16)
                t[name + "g_idx"] = g_idx
            elif method == "awq":
                t[name + "qweight"] = random_i32(gen, (k, n // pf))
                t[name + "qzeros"] = random_i32(gen, (groups, n // pf))
                t[name + "scales"] = random_scales(gen, (groups, n), torch.float16)
            else:  # compressed-tensors pack-quantized: [N, K/pf], scales [N, groups]
                t[name + "weight_packed"] = random_i32(gen, (n, k // pf))
                t[name + "weight_scale"] = random_scales(gen, (n, groups), torch.bfloat16)
                t[name + "weight_shape"] = torch.tensor([n, k], dtype=torch.int64)
                if not spec["sym"]:
                    t[name + "weight_zero_point"] = random_i32(gen, (n // pf, groups))
                if spec.get("act_order"):
                    t[name + "weight_g_idx"] = g_idx
    if method == "gptq":
        q = {"bits": bits, "checkpoint_format": "gptq", "damp_percent": 0.01, "desc_act": bool(spec.get("act_order")),
             "group_size": group, "lm_head": False, "quant_method": "gptq", "static_groups": False, "sym": True,
             "true_sequential": True}
    elif method == "awq":
        q = {"bits": bits, "group_size": group, "modules_to_not_convert": ["mlp.gate"], "quant_method": "awq",
             "version": "gemm", "zero_point": True}
    else:
        weights = {"actorder": "group" if spec.get("act_order") else None, "block_structure": None, "dynamic": False,
                   "group_size": group if group > 0 else None, "num_bits": bits, "observer": "minmax",
                   "observer_kwargs": {}, "strategy": "group" if group > 0 else "channel", "symmetric": spec["sym"],
                   "type": "int"}
        q = {"config_groups": {"group_0": {"format": "pack-quantized", "input_activations": None, "output_activations": None,
                                           "targets": ["Linear"], "weights": weights}},
             "format": "pack-quantized", "global_compression_ratio": None, "ignore": ["lm_head", "re:.*mlp.gate$"],
             "kv_cache_scheme": None, "quant_method": "compressed-tensors", "quantization_status": "compressed",
             "sparsity_config": {}, "transform_config": {}}
    return t, q


# name: (the sample whose config.json it adapts, spec)
SYNTHETIC = {
    # Two groups of 128 along the hidden size; at TP 2 the rank's intermediate size (128) is one
    # group, so vLLM's w13 scale permutation is the "single" one.
    "gptq-int4-g128-h256-i256": ("gptq-int4", dict(method="gptq", bits=4, group=128, hidden=256, inter=256, experts=2)),
    # Act-order over two and four groups of 64 (w2 group scales loaded whole at TP 2).
    "gptq-int4-g64-desc-act-h128-i256": ("gptq-int4-desc-act", dict(method="gptq", bits=4, group=64, hidden=128, inter=256,
                                                                     experts=2, act_order=True)),
    # Channel-wise 8-bit whose rank intermediate size (80) Marlin pads to 128.
    "gptq-int8-channel-h128-i160": ("gptq-int8", dict(method="gptq", bits=8, group=-1, hidden=128, inter=160, experts=2)),
    # AWQ groups of 32 whose intermediate size (96 per rank at TP 2, 192 at TP 1) Marlin pads.
    "awq-int4-g32-h128-i192": ("awq-int4", dict(method="awq", bits=4, group=32, hidden=128, inter=192, experts=2)),
    # compressed-tensors asymmetric groups of 32 (zero points), TP 2.
    "ct-w4a16-asym-g32-h128-i256": ("ct-w4a16-asym", dict(method="compressed-tensors", bits=4, group=32, hidden=128,
                                                          inter=256, experts=2, sym=False)),
    # compressed-tensors symmetric groups of 32 whose rank intermediate size at TP 2 (96) is three
    # groups (TRITON and XPU, which neither pad nor permute).
    "ct-w4a16-g32-h128-i192": ("ct-w4a16", dict(method="compressed-tensors", bits=4, group=32, hidden=128, inter=192,
                                                experts=2, sym=True)),
    # compressed-tensors act-order ("group") over groups of 64.
    "ct-w4a16-actorder-g64-h128-i256": ("ct-w4a16-actorder", dict(method="compressed-tensors", bits=4, group=64, hidden=128,
                                                                  inter=256, experts=2, sym=True, act_order=True)),
}


def synth_config(samples: Path, base: str, spec: dict, quantization: dict) -> str:
    c = json.loads((samples / base / "config.json").read_text())
    c.update(hidden_size=spec["hidden"], intermediate_size=spec["inter"], moe_intermediate_size=spec["inter"],
             num_experts=spec["experts"], num_experts_per_tok=min(2, spec["experts"]), quantization_config=quantization)
    return json.dumps(c, indent=2) + "\n"


# ---------------------------------------------------------------------------------------------
# Layer cases
# ---------------------------------------------------------------------------------------------


def method_of(config: dict) -> str:
    q = config["quantization_config"]
    m = {"gptq": "gptq", "awq": "awq", "compressed-tensors": "compressed-tensors"}[q["quant_method"]]
    if m == "compressed-tensors" and q["config_groups"]["group_0"].get("input_activations"):
        return "ct-w8a8-int8"  # integer weights and activations (the only such sample here)
    return m


def quant_config_of(ns, config: dict):
    q = config["quantization_config"]
    m = method_of(config)
    if m == "gptq":
        return ns["AutoGPTQConfig"](weight_bits=q["bits"], group_size=q["group_size"], desc_act=q["desc_act"], is_sym=q["sym"],
                                    lm_head_quantized=False, dynamic={}, full_config=q)
    if m == "awq":
        return ns["AutoAWQConfig"](weight_bits=q["bits"], group_size=q["group_size"], zero_point=q["zero_point"],
                                   lm_head_quantized=False)
    w = q["config_groups"]["group_0"]["weights"]
    if m == "ct-w8a8-int8":
        a = q["config_groups"]["group_0"]["input_activations"]
        return (QuantizationArgs(w["num_bits"], -1, QuantizationStrategy(w["strategy"]), w["symmetric"], None),
                types.SimpleNamespace(strategy=QuantizationStrategy(a["strategy"]), dynamic=a["dynamic"]))
    return QuantizationArgs(w["num_bits"], w["group_size"] if w["group_size"] is not None else -1, w["strategy"],
                            w["symmetric"], w["actorder"])


def make_method(ns, config: dict, moe, backend: str = "MARLIN"):
    """The method object as its __init__ leaves it when vLLM's oracle picks `backend` (MARLIN with
    16-bit activations, TRITON or XPU; TRITON for INT8 W8A8)."""
    m = method_of(config)
    qc = quant_config_of(ns, config)
    method = ns["methods"][m]()
    method.moe = moe
    if m == "ct-w8a8-int8":
        method.weight_quant, method.input_quant = qc
        method.static_input_scales = not method.input_quant.dynamic
        method.int8_backend = ns["Int8MoeBackend"][backend]
        method.experts_cls = object  # the experts class of the kernel record
        return method, qc
    method.wna16_moe_backend = ns["WNA16MoEBackend"][backend]
    method.experts_cls = None
    marlin = backend == "MARLIN"
    method.input_dtype = None
    if m in ("gptq", "awq"):
        method.quant_config = qc
        method.use_marlin = True  # set for every backend
    else:
        method.wna16_backend = method.wna16_moe_backend
        method.weight_quant, method.input_quant = qc, None
        method.symmetric, method.num_bits = qc.symmetric, qc.num_bits
        method.packed_factor = Fraction(32, qc.num_bits)
        method.strategy, method.group_size, method.actorder = qc.strategy, qc.group_size, qc.actorder
        method.is_marlin, method.is_transposed = marlin, True
        if not marlin:
            method.input_dtype = torch.bfloat16
    return method, qc


QUANT_NAMES = {"gptq": "gptq", "awq": "awq", "compressed-tensors": "compressed-tensors", "ct-w8a8-int8": "compressed-tensors"}

ROLES = {
    "gptq": ["w13_qweight", "w2_qweight", "w13_scales", "w2_scales", "w13_qzeros", "w2_qzeros", "w13_g_idx", "w2_g_idx",
             "w13_g_idx_sort_indices", "w2_g_idx_sort_indices", "w13_bias", "w2_bias", "w13_input_global_scale",
             "w2_input_global_scale"],
    "compressed-tensors": ["w13_weight_packed", "w2_weight_packed", "w13_weight_scale", "w2_weight_scale",
                           "w13_weight_zero_point", "w2_weight_zero_point", "w13_weight_g_idx", "w2_weight_g_idx",
                           "w13_g_idx_sort_indices", "w2_g_idx_sort_indices", "w13_input_global_scale",
                           "w2_input_global_scale", "w13_weight_shape", "w2_weight_shape"],
}
ROLES["awq"] = ROLES["gptq"]
ROLES["fp8"] = ["w13_weight", "w2_weight", "w13_weight_scale", "w2_weight_scale"]
ROLES["ct-w8a8-int8"] = ROLES["fp8"]
# compressed-tensors on TRITON and XPU: the method replaces only the weights, scales and (when
# asymmetric) zero points; its g_idx and sort-index parameters stay the torch.empty memory that
# create_weights allocated, never loaded nor read, so they are not recorded. weight_shape is
# loaded (each expert's [N, K] in the parameter's dtype) and left as loaded on every backend.
ROLES["compressed-tensors/TRITON"] = ["w13_weight_packed", "w2_weight_packed", "w13_weight_scale", "w2_weight_scale",
                                      "w13_weight_zero_point", "w2_weight_zero_point", "w13_weight_shape", "w2_weight_shape"]
ROLES["compressed-tensors/XPU"] = ROLES["compressed-tensors/TRITON"]


def roles_of(case: dict) -> list:
    return ROLES.get(case["method"] + "/" + case.get("backend", ""), ROLES[case["method"]])


def run_rank(ns, ckpt: dict, config: dict, tp: int, rank: int, dev, backend: str = "MARLIN"):
    """Loads one rank's layer through vLLM's create_weights and weight_loader, runs
    process_weights_after_loading; returns (layer, method, the act-order note)."""
    hidden = config["hidden_size"]
    inter = config.get("moe_intermediate_size") or config["intermediate_size"]
    experts = config["num_experts"]
    assert inter % tp == 0
    per_rank = inter // tp
    parallel = types.SimpleNamespace(tp_size=tp, tp_rank=rank, ep_size=1, ep_rank=0, dp_size=1, enable_eplb=False,
                                     use_batched_activation_format=False)
    moe = types.SimpleNamespace(is_act_and_mul=True, w13_num_shards=2, tp_rank=rank, tp_size=tp,
                                moe_parallel_config=parallel, hidden_dim=hidden, intermediate_size_per_partition=per_rank,
                                intermediate_size_per_partition_unpadded=per_rank, intermediate_size=inter,
                                num_local_experts=experts, num_experts=experts)
    method, _ = make_method(ns, config, moe, backend)
    layer = ns["layer_class"]()
    layer.moe_config = moe
    layer.quant_method = method
    layer.quant_config = types.SimpleNamespace(get_name=lambda: QUANT_NAMES[method_of(config)])
    layer._loaded_expert_biases = set()
    layer.hidden_size, layer.intermediate_size_per_partition = hidden, per_rank
    layer.num_experts = experts
    with torch.device(dev) if dev != "cpu" else contextlib.nullcontext():  # the model's parameters live on the GPU
        method.create_weights(layer, num_experts=experts, hidden_size=hidden, intermediate_size_per_partition=per_rank,
                              params_dtype=torch.bfloat16, weight_loader=layer.weight_loader, unpadded_hidden_size=None,
                              global_num_experts=experts, intermediate_size_full=inter)
    # vLLM's model loader: the expert mapping (gate_proj -> w13_ / w1, up_proj -> w13_ / w3,
    # down_proj -> w2_ / w2), each tensor handed to the parameter's weight_loader.
    for name in sorted(ckpt):
        if ".experts." not in name:
            continue
        rest = name.split(".experts.", 1)[1]  # "{e}.{proj}.{suffix}"
        e, proj, suffix = rest.split(".", 2)
        shard = dict((p, s) for p, s in PROJS)[proj]
        param_name = ("w2_" if shard == "w2" else "w13_") + suffix
        param = getattr(layer, param_name)
        vllm_name = name.split(".experts.", 1)[0] + ".experts." + param_name
        ok = param.weight_loader(param, ckpt[name], vllm_name, shard_id=shard, expert_id=int(e), return_success=True)
        if not ok:
            raise RuntimeError(f"{name}: vLLM's weight_loader did not load it into {param_name}")

    # Whether CUDA's torch.argsort (vLLM's act-order sort) ordered the g_idx as a stable sort does.
    note = ""
    act_order = getattr(getattr(method, "quant_config", None), "desc_act", False) or getattr(method, "actorder", None) == "group"
    for gname in ("w13_g_idx", "w2_g_idx", "w13_weight_g_idx", "w2_weight_g_idx") if act_order else ():
        g = getattr(layer, gname, None)
        if g is not None and g.numel():
            for e in range(g.shape[0]):
                if not torch.equal(torch.argsort(g[e]).cpu(), torch.sort(g[e].cpu(), stable=True).indices):
                    note = "vLLM's torch.argsort of a g_idx differs from a stable sort"
    method.process_weights_after_loading(layer)
    return layer, note


def record_rank(g, case: dict, layer, rank: int) -> dict:
    recorded, others = [], []
    roles = roles_of(case)
    for role in roles:
        t = getattr(layer, role, None)
        if t is None:
            continue
        b = storage_bytes(t.data)
        entry = {"role": role, "shape": [int(s) for s in t.shape], "dtype": str(t.dtype).replace("torch.", ""),
                 "bytes": int(b.numel())}
        common.keep_whole_or_digest(g, entry, b, f"layer/{case['name']}/{rank}/{role}", b.numel() <= WHOLE_BYTES)
        recorded.append(entry)
    for name, p in layer.named_parameters():
        if name not in roles and name not in ("w13_weight", "w2_weight"):
            others.append(f"{name} {str(p.dtype).replace('torch.', '')}{list(p.shape)}")
    return {"rank": rank, "outputs": recorded, "not_recorded": others}


FP8_ROLES = ["w13_weight", "w2_weight", "w13_weight_scale", "w2_weight_scale"]


def run_fp8_rank(ns, ckpt: dict, config: dict, tp: int, rank: int, dev) -> dict:
    """FP8 on Marlin, partially: one rank's expert weights and scales stacked as vLLM's loader
    stacks them (w13 rows [gate; up], each projection's rank slice of the intermediate extent;
    w2 columns; channel scales by row), handed to prepare_fp8_moe_layer_for_marlin (run whole:
    padding, pack_fp8_to_int32, the compiled gptq_marlin_repack, the scale expansion and
    permutation, the fused exponent bias). The FP8 method's own loading and
    process_weights_after_loading are not run (no value stage applies to channel and block
    scales before the Marlin preparation)."""
    hidden = config["hidden_size"]
    inter = config.get("moe_intermediate_size") or config["intermediate_size"]
    experts = config["num_experts"]
    per = inter // tp
    weights = config["quantization_config"]["config_groups"]["group_0"]["weights"]
    block = weights.get("block_structure")

    def rows(t):  # a w1 / w3 tensor's slice of this rank (rows of the intermediate extent)
        step = t.shape[0] * per // inter
        return t[rank * step:(rank + 1) * step]

    def stack(proj_list, what, cut):
        out = []
        for e in range(experts):
            parts = [ckpt[PREFIX.format(e=e) + p + "." + what] for p in proj_list]
            out.append(torch.cat([cut(x) for x in parts], dim=0))
        return torch.stack(out).to(dev)

    def w2_cols(t):
        step = t.shape[1] * per // inter
        return t[:, rank * step:(rank + 1) * step]

    w13 = stack(["gate_proj", "up_proj"], "weight", rows)
    w2 = stack(["down_proj"], "weight", w2_cols)
    s13 = stack(["gate_proj", "up_proj"], "weight_scale", rows).to(torch.float32)
    s2 = stack(["down_proj"], "weight_scale", (lambda t: w2_cols(t)) if block else (lambda t: t)).to(torch.float32)
    layer = torch.nn.Module()
    layer.w13_weight = torch.nn.Parameter(w13, requires_grad=False)
    layer.num_experts, layer.hidden_size, layer.intermediate_size_per_partition = experts, hidden, per
    layer.orig_dtype = torch.bfloat16
    layer.weight_block_size = block
    out = ns["prepare_fp8_moe_layer_for_marlin"](layer, w13, w2, s13, s2)
    return dict(zip(FP8_ROLES, out))


FP8_DEPLOYMENTS = [("ct-fp8-channel", 1), ("ct-fp8-channel", 2), ("ct-fp8-block", 1)]


def fp8_cases(ns, g, samples: Path, dev, errors: list):
    for name, tp in FP8_DEPLOYMENTS:
        data = (samples / name / "model.safetensors").read_bytes()
        config = json.loads((samples / name / "config.json").read_text())
        case = {"name": f"{name}_sm90_marlin" + (f"_tp{tp}" if tp > 1 else ""), "sample": name, "checkpoint": "",
                "sha256": common.sha256_hex(data), "target": "sm90", "moe_backend": "marlin",
                "model_dtype": "", "tp": tp, "ep": False, "backend": "MARLIN", "method": "compressed-tensors-fp8",
                "partial": True, "ranks": [], "notes": []}
        try:
            ckpt = common.parse_safetensors(data, ST_DTYPES)
            for rank in range(tp):
                outputs = run_fp8_rank(ns, ckpt, config, tp, rank, dev)
                layer = types.SimpleNamespace(**outputs, named_parameters=lambda: [])
                case["ranks"].append(record_rank(g, dict(case, method="fp8"), layer, rank))
            g.layer_cases.append(case)
        except Exception as exc:
            common.report_failure(errors, case["name"], exc)


class Golden:
    def __init__(self):
        self.tensors, self.layer_cases, self.checkpoints = {}, [], {}

    def put(self, key: str, t: torch.Tensor):
        assert key not in self.tensors, key
        self.tensors[key] = t.detach().contiguous().cpu()

    def save(self, out: Path, provenance: dict) -> Path:
        path = out / "golden_wna16.safetensors"
        meta = common.layer_golden_metadata(provenance, self.layer_cases, checkpoints=self.checkpoints)
        path.write_bytes(common.safetensors_bytes(self.tensors, meta, ST_NAMES))
        return path


# The deployments: (checkpoint, tp) on sm90 with the default backend choice, bf16 model, where
# vLLM's oracle picks MARLIN; or (checkpoint, tp, target, --moe-backend, backend) for the other
# backends (tests/convert/upstream_goldens_test.cpp checks that moepack's oracle picks the same).
DEPLOYMENTS = [
    ("gptq-int4", 1), ("gptq-int4-desc-act", 1), ("gptq-int8", 1), ("awq-int4", 1), ("ct-w4a16", 1),
    ("ct-w4a16-asym", 1), ("ct-w4a16-actorder", 1), ("ct-w8a16", 1), ("ct-w8a16", 2),
    ("gptq-int4-g128-h256-i256", 1), ("gptq-int4-g128-h256-i256", 2),
    ("gptq-int4-g64-desc-act-h128-i256", 1), ("gptq-int4-g64-desc-act-h128-i256", 2),
    ("gptq-int8-channel-h128-i160", 2),
    ("awq-int4-g32-h128-i192", 1), ("awq-int4-g32-h128-i192", 2),
    ("ct-w4a16-asym-g32-h128-i256", 2),
    ("ct-w4a16-actorder-g64-h128-i256", 1), ("ct-w4a16-actorder-g64-h128-i256", 2),
    # TRITON (TritonWNA16Experts): compressed-tensors only (GPTQ and AWQ may have biases, which
    # vLLM's TRITON WNA16 backend refuses); the default on sm70 and ROCm, or asked for.
    ("ct-w4a16", 1, "sm70", "", "TRITON"), ("ct-w4a16-asym", 1, "gfx942", "", "TRITON"),
    ("ct-w4a16-g32-h128-i192", 2, "sm70", "", "TRITON"), ("ct-w4a16-asym-g32-h128-i256", 2, "sm90", "triton", "TRITON"),
    # XPU (XPUExpertsWNA16): symmetric INT4.
    ("gptq-int4", 1, "xpu", "", "XPU"), ("ct-w4a16", 1, "xpu", "", "XPU"),
    ("gptq-int4-g128-h256-i256", 2, "xpu", "", "XPU"), ("ct-w4a16-g32-h128-i192", 2, "xpu", "", "XPU"),
    # INT8 W8A8 (CompressedTensorsW8A8Int8MoEMethod) on TRITON, the default on CUDA.
    ("ct-w8a8-int8", 1, "sm90", "", "TRITON"), ("ct-w8a8-int8", 2, "sm90", "", "TRITON"),
]


def deployment(d: tuple) -> tuple:
    """(checkpoint, tp, target, moe_backend, backend) of a DEPLOYMENTS entry."""
    return d if len(d) == 5 else (d[0], d[1], "sm90", "", "MARLIN")


def layer_cases(ns, g: Golden, samples: Path, gen, dev, errors: list):
    sources = {}
    for name in sorted({d[0] for d in DEPLOYMENTS}):
        if name in SYNTHETIC:
            base, spec = SYNTHETIC[name]
            tensors, q = synth_checkpoint(gen, spec)
            data = common.safetensors_bytes(tensors, {"format": "pt"}, ST_NAMES)
            config_text = synth_config(samples, base, spec, q)
            key = f"checkpoint/{name}/model.safetensors"
            g.put(key, torch.frombuffer(bytearray(data), dtype=torch.uint8))
            g.checkpoints[name] = {"config": config_text, "model": key}
            sources[name] = (data, json.loads(config_text), "")
        else:
            data = (samples / name / "model.safetensors").read_bytes()
            sources[name] = (data, json.loads((samples / name / "config.json").read_text()), name)
    for d in DEPLOYMENTS:
        name, tp, target, moe_backend, backend = deployment(d)
        data, config, sample = sources[name]
        suffix = "" if backend == "MARLIN" else "_" + (moe_backend or "auto")
        case = {"name": f"{name}_{target}{suffix}" + (f"_tp{tp}" if tp > 1 else ""), "sample": sample,
                "checkpoint": "" if sample else name, "sha256": common.sha256_hex(data), "target": target,
                "moe_backend": moe_backend, "model_dtype": "", "tp": tp, "ep": False, "backend": backend,
                "method": method_of(config), "ranks": [], "notes": []}
        try:
            ckpt = common.parse_safetensors(data, ST_DTYPES)
            for rank in range(tp):
                TorchWithStableArgsort.stable = False
                with common.model_dtype(torch.bfloat16):  # the params_dtype run_rank passes
                    layer, note = run_rank(ns, ckpt, config, tp, rank, dev, backend)
                if note:
                    # vLLM sorts g_idx with torch.argsort, which does not keep equal keys in
                    # order on this device; moepack (and any reproducible conversion) sorts
                    # stably. Rerun with the stable sort and say so.
                    TorchWithStableArgsort.stable = True
                    with common.model_dtype(torch.bfloat16):
                        layer, _ = run_rank(ns, ckpt, config, tp, rank, dev, backend)
                    note += f"; rank {rank} recorded with a stable argsort standing in for it"
                    case["notes"].append(note)
                case["ranks"].append(record_rank(g, case, layer, rank))
            g.layer_cases.append(case)
        except Exception as exc:  # keep the other cases; report this one
            common.report_failure(errors, case["name"], exc)


def main():
    ap = common.argument_parser(__doc__)
    ap.add_argument("--build", type=Path, default=Path("/tmp/moepack_marlin_ops"), help="where the ops are compiled")
    ap.add_argument("--out", type=Path, help="where golden_wna16.safetensors goes (omit for a dry run)")
    args = ap.parse_args()

    compat = []
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if not hasattr(torch, "float8_e4m3fn"):
        torch.float8_e4m3fn = torch.uint8
        compat.append("torch<2.1: float8_e4m3fn aliased to uint8 (never an input dtype here)")
    if torch.__version__ < "2":
        getitem = torch.Tensor.__getitem__

        def getitem_int32(self, index):
            if isinstance(index, torch.Tensor) and index.dtype == torch.int32:
                index = index.long()
            return getitem(self, index)

        torch.Tensor.__getitem__ = getitem_int32
        compat.append("torch<2: int32 index tensors widened to int64")
    if not hasattr(torch.Tensor, "untyped_storage"):
        torch.Tensor.untyped_storage = lambda self: self.storage().untyped()
        compat.append("torch without Tensor.untyped_storage: storage().untyped()")
    ops = {}
    if dev == "cuda":
        ops = load_marlin_ops(args.vendor, args.build)
    else:
        ns_keep = zeros_repack_library()  # noqa: F841  (kept alive while the ops are used)
        compat.append("no CUDA: the Marlin repack ops return zeros (plumbing only)")
    ns = vllm_namespace(args.vendor)
    provenance = {"vllm": VLLM, "seed": SEED, "torch": torch.__version__, "device": dev,
                  "gpu": torch.cuda.get_device_name() if dev == "cuda" else "", "ops": ops, "compat": compat}
    g = Golden()
    errors = []
    layer_cases(ns, g, args.samples, torch.Generator().manual_seed(SEED), dev, errors)
    fp8_cases(ns, g, args.samples, dev, errors)
    summary = {"provenance": provenance, "layer_cases": len(g.layer_cases),
               "bytes": sum(t.numel() * t.element_size() for t in g.tensors.values()), "errors": errors,
               "notes": {c["name"]: c["notes"] for c in g.layer_cases if c["notes"]},
               "not_recorded": sorted({x for c in g.layer_cases for r in c["ranks"] for x in r["not_recorded"]})}
    return common.finish(summary, errors, args.out, lambda out: g.save(out, provenance))


if __name__ == "__main__":
    sys.exit(main())
