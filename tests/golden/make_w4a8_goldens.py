#!/usr/bin/env python3
"""Golden bytes for moepack's CUTLASS W4A8 conversion (compressed-tensors int4 group-128 weights,
FP8 activations, SM90), produced by running the REAL upstream code, vLLM's compiled CUDA ops
included.

Tooling, not part of the build; the companion of make_wna16_goldens.py (whose helpers it
imports), run the same way on a machine with an SM90 GPU, nvcc and ninja. It needs two folders
this repository does NOT ship:

  VENDOR/vllm/csrc/...   vLLM's csrc/ tree @ e9d1398d9 (the W4A8 entry files include headers
                         from all over it: libtorch_stable/, cutlass_extensions/, quantization/)
  VENDOR/vllm/vllm/_custom_ops.py, utils/math_utils.py, model_executor/utils.py,
      model_executor/layers/fused_moe/{routed_experts.py,oracle/w4a8.py},
      model_executor/layers/quantization/{input_quant_fp8.py,utils/quant_utils.py},
      model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/
          compressed_tensors_moe_w4a8_fp8.py
  CUTLASS/include, CUTLASS/tools/util/include   NVIDIA/cutlass at v4.4.2
                         (da5e086dab31d63815acafdac9a9c5893b1c69e2), the CUTLASS_REVISION of
                         vLLM e9d1398d9's CMakeLists.txt

  python3 tests/golden/make_w4a8_goldens.py --vendor VENDOR --cutlass CUTLASS --samples samples --out OUTDIR

The compiled ops: csrc/libtorch_stable/quantization/cutlass_w4a8/{w4a8_mm_entry.cu,
w4a8_grouped_mm_entry.cu,w4a8_utils.cu} and csrc/libtorch_stable/quantization/w8a8/fp8/common.cu,
unchanged, for sm_90a (the arch vLLM builds W4A8 for), with the definitions vLLM's CMakeLists
gives its stable-ABI extension (TORCH_TARGET_VERSION, USE_CUDA,
CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1, ENABLE_FP8) and torch's nvcc flags less the four
__CUDA_NO_HALF / BFLOAT16 macros vLLM removes for CUDA >= 12 (common.cu also with
--expt-extended-lambda, which torch's CMake configuration gives vLLM's CUDA sources; no
--use_fast_math: vLLM gives that to other sources only). This repository's
tests/golden/w4a8_cutlass_ops.cpp declares the five W4A8 op schemas under `_C` and
tests/golden/fp8_quant_ops.cpp declares dynamic_per_token_scaled_fp8_quant and binds it, as
vLLM's torch_bindings.cpp does. vLLM's Python wrappers
(cutlass_encode_and_reorder_int4b_grouped, cutlass_pack_scale_fp8, scaled_fp8_quant from
_custom_ops.py) then run unchanged through torch.ops._C.

Layer cases (metadata "golden_layer_cases", checked by tests/convert/upstream_goldens_test.cpp
through tests/support/golden_layers.h): samples/ct-w4a8-fp8, as shipped and with seeded adversarial
group scales patched in ("golden_patch_sets"), loaded into one layer per rank and prepared by
vLLM's own code, run unchanged:
  * CompressedTensorsW4A8Fp8MoEMethod.create_weights (the parameters, their shapes and dtypes,
    under the model dtype as torch's default dtype, as vLLM's model loader sets it; so
    weight_shape is bf16);
  * RoutedExperts.weight_loader with the helpers it calls, fed each checkpoint tensor as
    vLLM's model loader feeds it (Qwen3-MoE's expert mapping, shard ids w1/w3/w2);
  * CompressedTensorsW4A8Fp8MoEMethod.process_weights_after_loading, so
    convert_to_w4a8_moe_kernel_format whole: convert_packed_uint4b8_to_signed_int4_inplace, the
    compiled cutlass_encode_and_reorder_int4b_grouped, convert_bf16_scales_to_fp8 with
    QuantFP8(static=False, group_shape=PER_TOKEN), the compiled cutlass_pack_scale_fp8.
QuantFP8 runs its forward_cuda, and so the compiled dynamic_per_token_scaled_fp8_quant kernel:
that is what CustomOp dispatches to on CUDA when the op is enabled, which it is under
TORCH_COMPILE_DISABLE=1 (compilation mode NONE); the cases carry that environment
(moepack refuses the compiled forward_native, see check_w4a8_quant_fp8.py).
Deployments: TP 1, and TP 2 with expert parallelism (each rank two whole experts; TP 2 without
EP gives 128 per rank, which create_weights refuses). Every parameter the layer holds
afterwards is recorded by role and rank: whole when at most FULL_BYTES bytes, as the SHA-256 of
its bytes otherwise.

Stand-ins, named in tests/packers/golden/README.md:
  * The method's __init__ is not run (it asserts the config and picks the only backend,
    CUTLASS, through select_w4a8_moe_backend); its fields are set as __init__ sets them.
  * QuantFP8 is vLLM's class, defined over a CustomOp base whose call runs forward_cuda
    (CustomOp's dispatch on CUDA with the op enabled); DeepGEMM's UE8M0 and AITER report off
    (neither path is taken for a dynamic PER_TOKEN quantization).
  * make_w4a8_moe_quant_config and make_w4a8_moe_kernel return records: they only hold the
    prepared tensors and build the kernel object (b_strides stay on the method, not recorded).
  * vLLM's model loader: tensors fed in name order; expert parallelism places experts linearly
    (rank r holds experts [r E/2, (r+1) E/2)), vLLM's default.
"""

import argparse
import contextlib
import json
import math
import os
import sys
import time
import types
import typing
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as common  # noqa: E402
import make_nvfp4_goldens as nv  # noqa: E402  (Golden, dtype_name, safetensors dtypes)
import make_wna16_goldens as w16  # noqa: E402  (storage_bytes, safetensors dtypes)

SEED = 20250613
FULL_BYTES = 4096
VLLM = common.VLLM
CUTLASS = "v4.4.2"
HERE = Path(__file__).resolve().parent
SAMPLE = "ct-w4a8-fp8"
ENV = ["TORCH_COMPILE_DISABLE=1"]

# ---------------------------------------------------------------------------------------------
# vLLM's compiled ops
# ---------------------------------------------------------------------------------------------


def load_w4a8_ops(vendor: Path, cutlass: Path, build_dir: Path) -> dict:
    """Builds and loads two extensions: the W4A8 entry files with w4a8_cutlass_ops.cpp, and
    common.cu (the per-token FP8 quantization) with fp8_quant_ops.cpp. common.cu needs
    --expt-extended-lambda, which torch's CMake configuration adds to every vLLM CUDA source; the
    W4A8 files have no extended lambda and are built without it."""
    from torch.utils.cpp_extension import load

    csrc = vendor / "vllm" / "csrc"
    w4a8 = csrc / "libtorch_stable" / "quantization" / "cutlass_w4a8"
    groups = {"vllm_w4a8_cutlass": ([HERE / "w4a8_cutlass_ops.cpp", w4a8 / "w4a8_mm_entry.cu", w4a8 / "w4a8_grouped_mm_entry.cu",
                                     w4a8 / "w4a8_utils.cu"], []),
              "vllm_per_token_fp8_quant": ([HERE / "fp8_quant_ops.cpp",
                                            csrc / "libtorch_stable" / "quantization" / "w8a8" / "fp8" / "common.cu"],
                                           ["--expt-extended-lambda"])}
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"
    defs = ["-DTORCH_TARGET_VERSION=0x020B000000000000ULL", "-DUSE_CUDA", "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1",
            "-DENABLE_FP8"]
    undefs = ["-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
              "-U__CUDA_NO_HALF2_OPERATORS__"]
    cflags = ["-O2", "-std=c++17"] + defs
    built = {}
    for name, (sources, extra) in groups.items():
        cuda_flags = ["-O2", "-std=c++17"] + defs + undefs + extra
        (build_dir / name).mkdir(parents=True, exist_ok=True)
        start = time.time()
        load(name=name, sources=[str(s) for s in sources],
             extra_include_paths=[str(csrc), str(cutlass / "include"), str(cutlass / "tools" / "util" / "include")],
             extra_cflags=cflags, extra_cuda_cflags=cuda_flags, extra_ldflags=["-lcuda"],
             build_directory=str(build_dir / name), is_python_module=False, verbose=True)
        built[name] = {"sources": [str(s.relative_to(vendor)) if vendor in s.parents else s.name for s in sources],
                       "nvcc_flags": cuda_flags, "compile_seconds": round(time.time() - start, 1)}
    return {"arch": os.environ["TORCH_CUDA_ARCH_LIST"], "cutlass": CUTLASS, "extensions": built}


# ---------------------------------------------------------------------------------------------
# Running upstream definitions
# ---------------------------------------------------------------------------------------------


class CustomOp:
    """vLLM's CustomOp as QuantFP8 uses it with the op enabled on CUDA: calling it runs
    forward_cuda."""

    @classmethod
    def register(cls, name):
        return lambda op_cls: op_cls

    def __init__(self, compile_native: bool = True):
        self.compile_native = compile_native

    def __call__(self, *args, **kwargs):
        return self.forward_cuda(*args, **kwargs)


def vllm_namespace(vendor: Path) -> dict:
    v = vendor / "vllm" / "vllm"
    layers = v / "model_executor" / "layers"
    quant = layers / "quantization"
    fp8_dtype = torch.float8_e4m3fn
    platform = types.SimpleNamespace(use_sync_weight_loader=lambda: False, fp8_dtype=lambda: fp8_dtype,
                                     is_rocm=lambda: False, is_cuda=lambda: True)
    common.stub_module("vllm.platforms", current_platform=platform)
    ns = {"torch": torch, "sys": sys, "math": math, "Any": typing.Any, "Literal": typing.Literal, "cast": typing.cast,
          "ClassVar": typing.ClassVar, "Enum": __import__("enum").Enum, "NamedTuple": typing.NamedTuple, "Callable": typing.Callable,
          "Parameter": torch.nn.Parameter, "logger": common.QuietLogger(), "TYPE_CHECKING": False,
          "current_platform": platform}

    # quant_utils: GroupShape and the two W4A8 helpers. GroupShape's aliases are assignments to
    # class attributes at module level in quant_utils.py; they are made here with its values.
    qu = common.exec_top_level(quant / "utils" / "quant_utils.py", ["_GroupShape", "GroupShape", "convert_bf16_scales_to_fp8",
                                                              "convert_packed_uint4b8_to_signed_int4_inplace"], dict(ns))
    gs = qu["GroupShape"]
    gs.PER_TENSOR, gs.PER_TOKEN, gs.PER_CHANNEL = gs(-1, -1), gs(1, -1), gs(-1, 1)
    common.stub_module("vllm.model_executor.layers.quantization.utils.quant_utils", GroupShape=gs,
                       convert_bf16_scales_to_fp8=qu["convert_bf16_scales_to_fp8"],
                       convert_packed_uint4b8_to_signed_int4_inplace=qu["convert_packed_uint4b8_to_signed_int4_inplace"])
    common.stub_module("vllm.model_executor.layers.quantization.utils.fp8_utils")  # forward_cuda imports it (group paths)

    # _custom_ops: the wrappers, unchanged, over torch.ops._C.
    custom = common.exec_top_level(v / "_custom_ops.py", ["scaled_fp8_quant", "cutlass_pack_scale_fp8",
                                                          "cutlass_encode_and_reorder_int4b_grouped"], dict(ns))
    ops = common.stub_module("vllm._custom_ops", **{k: custom[k] for k in ("scaled_fp8_quant", "cutlass_pack_scale_fp8",
                                                                           "cutlass_encode_and_reorder_int4b_grouped")})

    # QuantFP8: the class itself, over the CustomOp stand-in.
    iq_ns = dict(ns, ops=ops, GroupShape=gs, CustomOp=CustomOp, F=torch.nn.functional,
                 rocm_aiter_ops=types.SimpleNamespace(is_linear_fp8_enabled=lambda: False),
                 is_deep_gemm_e8m0_used=lambda: False, is_deep_gemm_supported=lambda: False,
                 DeepGemmQuantScaleFMT=types.SimpleNamespace(from_oracle=lambda: None, UE8M0="UE8M0"))
    common.exec_top_level(quant / "input_quant_fp8.py", ["_FP8_DTYPE", "QuantFP8"], iq_ns)
    common.stub_module("vllm.model_executor.layers.quantization.input_quant_fp8", QuantFP8=iq_ns["QuantFP8"])

    # The oracle's conversion (its imports run against the modules above).
    common.exec_top_level(v / "utils" / "math_utils.py", ["round_up"], ns)
    common.exec_top_level(v / "model_executor" / "utils.py", ["set_weight_attrs", "replace_parameter"], ns)
    common.exec_top_level(layers / "fused_moe" / "routed_experts.py", ["FusedMoeWeightScaleSupported"], ns)
    common.exec_top_level(layers / "fused_moe" / "oracle" / "w4a8.py", ["W4A8MoeBackend", "convert_to_w4a8_moe_kernel_format"],
                          ns)
    ns["make_w4a8_moe_quant_config"] = lambda **kw: types.SimpleNamespace(**kw)
    ns["make_w4a8_moe_kernel"] = lambda **kw: types.SimpleNamespace(**kw)

    path = quant / "compressed_tensors" / "compressed_tensors_moe" / "compressed_tensors_moe_w4a8_fp8.py"
    ns["method_class"] = type("CompressedTensorsW4A8Fp8MoEMethod", (), {
        m: common.exec_method(path, "CompressedTensorsW4A8Fp8MoEMethod", m, ns)
        for m in ("create_weights", "process_weights_after_loading", "get_fused_moe_quant_config")})

    routed = layers / "fused_moe" / "routed_experts.py"
    loader = {m: common.exec_method(routed, "RoutedExperts", m, ns, last=True) for m in (
        "weight_loader", "_load_per_tensor_weight_scale", "_load_model_weight_or_group_weight_scale",
        "_load_per_channel_weight_scale", "_load_w13", "_load_w2", "_load_single_value", "_load_g_idx")}
    loader.update({m: staticmethod(common.exec_method(routed, "RoutedExperts", m, ns, last=True)) for m in (
        "_to_scalar", "_get_hidden_dim", "_narrow_expert_data_for_padding")})
    ns["layer_class"] = type("RoutedExperts", (torch.nn.Module,), dict(loader, _expert_routing_tables=lambda self: None))
    return ns


# ---------------------------------------------------------------------------------------------
# Adversarial group scales
# ---------------------------------------------------------------------------------------------


def bf16_bits(bits: torch.Tensor) -> torch.Tensor:
    return bits.to(torch.int16).view(torch.bfloat16)


def ieee_codes(a: torch.Tensor, x: torch.Tensor, divide: bool):
    """Per-token FP8 of a pair (row maximum a, value x) by IEEE division (the CUDA kernel) or by
    the correctly rounded reciprocal (forward_native run eagerly): (scale, code of x)."""
    fp8_max, min_scale = 448.0, 1.0 / (448.0 * 512.0)
    a64 = a.float().double()
    if divide:
        scale = (a64 / fp8_max).float().clamp(min=min_scale)
        q = (x.float().double() / scale.double()).float()
    else:
        recip448 = torch.tensor(1.0 / fp8_max, dtype=torch.float32).double()
        scale = (a64 * recip448).float().clamp(min=min_scale)
        q = (x.float().double() * (1.0 / scale.double()).float().double()).float()
    codes = q.clamp(-fp8_max, fp8_max).to(torch.float8_e4m3fn).view(torch.uint8) if hasattr(torch, "float8_e4m3fn") \
        and torch.float8_e4m3fn is not torch.uint8 else torch.zeros_like(q, dtype=torch.uint8)
    return scale, codes


def adversarial_rows(gen, count: int) -> torch.Tensor:
    """`count` rows of two non-negative finite bf16 group scales: pairs whose FP8 code differs
    between the CUDA kernel's division and a reciprocal, pairs whose scale differs, an all-zero
    row, rows small enough that the scale is clamped to 1/(448*512) and the codes (and their
    eighths) are subnormal, rows whose largest value is the bf16 maximum, and random rows over
    the whole exponent range; the maximum in either group."""
    a = torch.randint(1, 0x7F80, (1 << 22,), generator=gen, dtype=torch.int32)
    x = (torch.rand(a.shape, generator=gen, dtype=torch.float64) * (a.double() + 1)).to(torch.int32).clamp(max=a)
    av, xv = bf16_bits(a), bf16_bits(x)
    s_div, q_div = ieee_codes(av, xv, True)
    s_rec, q_rec = ieee_codes(av, xv, False)
    code_diff = torch.nonzero(q_div != q_rec).flatten()[:count // 4]
    scale_diff = torch.nonzero((s_div != s_rec) & (q_div == q_rec)).flatten()[:count // 8]
    picked = torch.cat([code_diff, scale_diff])
    rows = [torch.stack([av[picked], xv[picked]], 1)]
    tiny = bf16_bits(torch.randint(1, 0x0400, (count // 8, 2), generator=gen, dtype=torch.int32))  # below ~1e-37
    rows.append(tiny)
    rows.append(torch.zeros(2, 2, dtype=torch.bfloat16))
    rows.append(torch.tensor([[torch.finfo(torch.bfloat16).max, 1.0], [1.0, torch.finfo(torch.bfloat16).max]],
                             dtype=torch.bfloat16))
    have = sum(r.shape[0] for r in rows)
    rest = bf16_bits(torch.randint(0, 0x7F80, (max(count - have, 0), 2), generator=gen, dtype=torch.int32))
    rows.append(rest)
    out = torch.cat(rows)[:count]
    swap = torch.rand(out.shape[0], generator=gen) < 0.5  # the maximum in the first or the second group
    out[swap] = out[swap].flip(1)
    return out.contiguous()


PREFIX = "model.layers.0.mlp.experts.{e}."
PROJS = (("gate_proj", "w1"), ("up_proj", "w3"), ("down_proj", "w2"))


def make_patches(variant: str, ckpt: dict, gen) -> dict:
    assert variant == "adversarial", variant
    names = [PREFIX.format(e=e) + p + ".weight_scale" for e in (0, 1) for p, _ in PROJS]
    rows = adversarial_rows(gen, sum(ckpt[n].shape[0] for n in names))
    out, at = {}, 0
    for n in names:
        shape = ckpt[n].shape
        assert shape[1] == 2, shape  # hidden 256 and intermediate 256: two groups of 128 per row
        out[n] = rows[at:at + shape[0]].clone()
        at += shape[0]
    return out


# ---------------------------------------------------------------------------------------------
# Layer cases
# ---------------------------------------------------------------------------------------------


def run_rank(ns, ckpt: dict, config: dict, tp: int, ep: bool, rank: int, dev):
    hidden = config["hidden_size"]
    inter = config.get("moe_intermediate_size") or config["intermediate_size"]
    experts = config["num_experts"]
    tp_size, tp_rank = (1, 0) if ep else (tp, rank)  # vLLM: with EP the experts are not tensor-sliced
    ep_size, ep_rank = (tp, rank) if ep else (1, 0)
    local = experts // ep_size
    first = ep_rank * local
    per_rank = inter // tp_size
    parallel = types.SimpleNamespace(tp_size=tp_size, tp_rank=tp_rank, ep_size=ep_size, ep_rank=ep_rank, dp_size=1,
                                     enable_eplb=False, use_batched_activation_format=False)
    moe = types.SimpleNamespace(is_act_and_mul=True, w13_num_shards=2, tp_rank=tp_rank, tp_size=tp_size,
                                moe_parallel_config=parallel, hidden_dim=hidden, intermediate_size_per_partition=per_rank,
                                intermediate_size_per_partition_unpadded=per_rank, intermediate_size=inter,
                                num_local_experts=local, num_experts=experts)
    w = config["quantization_config"]["config_groups"]["group_0"]["weights"]
    method = ns["method_class"]()
    # CompressedTensorsW4A8Fp8MoEMethod.__init__'s fields for this config.
    method.moe = moe
    method.weight_quant = types.SimpleNamespace(group_size=w["group_size"], num_bits=w["num_bits"],
                                                symmetric=w["symmetric"], actorder=w["actorder"])
    method.input_quant = None
    method.group_size, method.num_bits = w["group_size"], w["num_bits"]
    method.packed_factor = 32 // method.num_bits
    method.w4a8_backend, method.experts_cls = ns["W4A8MoeBackend"].CUTLASS, object
    method.moe_quant_config, method.moe_kernel = None, None

    layer = ns["layer_class"]()
    layer._map_global_expert_id_to_local_expert_id = lambda e: e - first if first <= e < first + local else -1
    layer.moe_config = moe
    layer.quant_method = method
    layer.quant_config = types.SimpleNamespace(get_name=lambda: "compressed-tensors")
    layer._loaded_expert_biases = set()
    layer.hidden_size, layer.intermediate_size_per_partition = hidden, per_rank
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # vLLM builds the model under its dtype
    try:
        with torch.device(dev) if dev != "cpu" else contextlib.nullcontext():
            method.create_weights(layer, num_experts=local, hidden_size=hidden, intermediate_size_per_partition=per_rank,
                                  params_dtype=torch.bfloat16, weight_loader=layer.weight_loader,
                                  global_num_experts=experts, intermediate_size_full=inter)
    finally:
        torch.set_default_dtype(default)
    for name in sorted(ckpt):
        if ".experts." not in name:
            continue
        e, proj, suffix = name.split(".experts.", 1)[1].split(".", 2)
        shard = dict(PROJS)[proj]
        param_name = ("w2_" if shard == "w2" else "w13_") + suffix
        param = getattr(layer, param_name)
        vllm_name = name.split(".experts.", 1)[0] + ".experts." + param_name
        ok = param.weight_loader(param, ckpt[name], vllm_name, shard_id=shard, expert_id=int(e), return_success=True)
        if not ok and first <= int(e) < first + local:
            raise RuntimeError(f"{name}: vLLM's weight_loader did not load it into {param_name}")
    method.process_weights_after_loading(layer)
    return layer


def record_rank(g, case: dict, layer, rank: int) -> dict:
    recorded = []
    for role, p in sorted(layer.named_parameters()):
        t = p.data
        assert t.is_contiguous(), role
        b = w16.storage_bytes(t)
        entry = {"role": role, "shape": [int(s) for s in t.shape], "dtype": nv.dtype_name(t), "bytes": int(b.numel())}
        common.keep_whole_or_digest(g, entry, b, f"layer/{case['name']}/{rank}/{role}", b.numel() <= FULL_BYTES)
        recorded.append(entry)
    return {"rank": rank, "outputs": recorded}


# (patch set, tp, ep)
DEPLOYMENTS = [("", 1, False), ("adversarial", 1, False), ("", 2, True), ("adversarial", 2, True)]


def layer_cases(ns, g, samples: Path, gen, dev, errors: list):
    data = (samples / SAMPLE / "model.safetensors").read_bytes()
    config = json.loads((samples / SAMPLE / "config.json").read_text())
    ckpt = common.parse_safetensors(data, w16.ST_DTYPES)
    hashes = {"model.safetensors": common.sha256_hex(data),
              "config.json": common.sha256_hex((samples / SAMPLE / "config.json").read_bytes())}
    patched = {}
    for variant in sorted({d[0] for d in DEPLOYMENTS if d[0]}):
        patches = make_patches(variant, ckpt, gen)
        keys = {}
        for i, name in enumerate(sorted(patches)):
            keys[name] = f"patch/{SAMPLE}/{variant}/{i}"
            g.put(keys[name], patches[name])
        g.patch_sets[f"{SAMPLE}/{variant}"] = keys
        patched[variant] = dict(ckpt, **patches)
    for variant, tp, ep in DEPLOYMENTS:
        name = "_".join(x for x in (SAMPLE, variant, "sm90", "cutlass", f"tp{tp}" + ("ep" if ep else "") if tp > 1 else "") if x)
        case = {"name": name, "sample": SAMPLE, "sample_sha256": hashes, "patch": variant, "target": "sm90",
                "moe_backend": "", "model_dtype": "", "tp": tp, "ep": ep, "env": ENV, "backend": "CUTLASS", "ranks": []}
        try:
            for rank in range(tp):
                layer = run_rank(ns, patched[variant] if variant else ckpt, config, tp, ep, rank, dev)
                case["ranks"].append(record_rank(g, case, layer, rank))
            g.layer_cases.append(case)
        except Exception as exc:  # keep the other cases; report this one
            common.report_failure(errors, name, exc)


def fake_ops_library():
    """Dry runs without CUDA: the ops with their output shapes (zeros; scale quantization by torch)."""
    lib = torch.library.Library("_C", "DEF")
    lib.define("cutlass_pack_scale_fp8(Tensor scales) -> Tensor")
    lib.define("cutlass_encode_and_reorder_int4b_grouped(Tensor b_tensors) -> (Tensor, Tensor)")
    lib.define("dynamic_per_token_scaled_fp8_quant(Tensor! result, Tensor input, Tensor! scale, Tensor? scale_ub) -> ()")
    lib.impl("cutlass_pack_scale_fp8", lambda s: torch.zeros(s.numel() * 8, dtype=s.dtype), "CompositeExplicitAutograd")
    lib.impl("cutlass_encode_and_reorder_int4b_grouped", lambda b: (torch.zeros_like(b), torch.zeros(b.shape[0], 8, dtype=torch.int32)),
             "CompositeExplicitAutograd")

    def per_token(out, x, scale, ub):
        scale.copy_((x.float().abs().amax(-1, keepdim=True) / 448.0).clamp(min=1.0 / (448.0 * 512.0)))

    lib.impl("dynamic_per_token_scaled_fp8_quant", per_token, "CompositeExplicitAutograd")
    return lib


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vendor", type=Path, required=True, help="folder of pinned vLLM sources (see the docstring)")
    ap.add_argument("--cutlass", type=Path, required=True, help="NVIDIA/cutlass v4.4.2 (include/, tools/util/include/)")
    ap.add_argument("--samples", type=Path, required=True, help="the repository's samples/ folder")
    ap.add_argument("--build", type=Path, default=Path("/tmp/moepack_w4a8_ops"), help="where the ops are compiled")
    ap.add_argument("--out", type=Path, help="where golden_w4a8.safetensors goes (omit for a dry run)")
    ap.add_argument("--compile-only", action="store_true", help="build the ops and stop")
    args = ap.parse_args()

    compat = []
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    keep = None
    if not hasattr(torch, "float8_e4m3fn"):
        torch.float8_e4m3fn = torch.uint8
        compat.append("torch<2.1: float8_e4m3fn aliased to uint8 (plumbing only)")
    if dev == "cuda":
        ops = load_w4a8_ops(args.vendor, args.cutlass, args.build)
        print(json.dumps({"ops": ops}), flush=True)
    else:
        ops = {}
        keep = fake_ops_library()  # noqa: F841  (kept alive while the ops are used)
        torch.Tensor.is_cuda = property(lambda self: True)  # the conversion asserts CUDA tensors
        compat.append("no CUDA: the ops return zeros and CPU tensors pass for CUDA ones (plumbing only)")
    if args.compile_only:
        return 0
    if not hasattr(torch, "accelerator"):
        torch.accelerator = types.SimpleNamespace(synchronize=lambda: None)
        compat.append("torch without torch.accelerator")
    ns = vllm_namespace(args.vendor)
    provenance = {"vllm": VLLM, "cutlass": CUTLASS, "seed": SEED, "torch": torch.__version__, "device": dev,
                  "gpu": torch.cuda.get_device_name() if dev == "cuda" else "", "ops": ops, "compat": compat}
    g = nv.Golden()
    errors = []
    layer_cases(ns, g, args.samples, torch.Generator().manual_seed(SEED), dev, errors)
    summary = {"provenance": provenance, "layer_cases": len(g.layer_cases),
               "bytes": sum(t.numel() * t.element_size() for t in g.tensors.values()), "errors": errors,
               "roles": sorted({o["role"] + " " + o["dtype"] + str(o["shape"]) for c in g.layer_cases
                                for r in c["ranks"] for o in r["outputs"]})}

    def save(out: Path) -> Path:
        path = out / "golden_w4a8.safetensors"
        meta = common.layer_golden_metadata(provenance, g.layer_cases, patch_sets=g.patch_sets)
        path.write_bytes(common.safetensors_bytes(g.tensors, meta, nv.ST_NAMES))
        return path

    return common.finish(summary, errors, args.out, save)


if __name__ == "__main__":
    sys.exit(main())
