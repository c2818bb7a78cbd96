#!/usr/bin/env python3
"""Golden layers for MXFP4 checkpoints on the backends that keep the loaded bytes (XPU, EMULATION).

Tooling, not part of the build; the companion of make_cpu_goldens.py, whose MXFP4 harness it
runs with another backend: the quantization method's create_weights stood in for, the experts
loaded as vLLM's loaders load them (gpt-oss: the model's _load_weights_mxfp4 narrowing and
RoutedExperts.weight_loader; Quark: per-expert tensors through the same weight loader), then
vLLM's `convert_gpt_oss_weight_to_mxfp4_moe_kernel_format` (oracle/mxfp4.py @ e9d1398d9) run
unchanged for Mxfp4MoeBackend.XPU or EMULATION. Those branches hand the loaded tensors through, so
what is recorded is what vLLM's loading leaves in the layer: the rank's slice, in the
parameter's dtype and row order. It needs PyTorch (Debian's python3-torch 1.13 does, with one
shim recorded in the provenance; no GPU: nothing here is compiled) and make_cpu_goldens.py's
vendor files, plus from vllm-project/vllm @ e9d1398d9 vllm/model_executor/models/{gpt_oss.py,
utils.py}, vllm/model_executor/model_loader/weight_utils.py and
vllm/models/deepseek_v4/xpu/model.py (the model loaders the gpt-oss and DeepSeek-V4 cases run); its CPU ops are not built (the harness' zero stand-in is loaded only so the
namespace imports; the cpu-amx case records the input scales alone).

  python3 tests/golden/make_mxfp4_layer_goldens.py --vendor VENDOR --samples samples --out OUTDIR

Sizes are those every backend keeps (vLLM's mxfp4_round_up_hidden_size_and_intermediate_size
leaves them unchanged): gpt-oss-mxfp4 (H = I = 192) at TP 1, quark-w-mxfp4 and
quark-w-mxfp4-a-fp8 (H = I = 128) at TP 1 and 2. The A-FP8 cases also load the static input
scales, which the EMULATION branch reduces to their maximum over the experts. ct-mxfp4 on XPU
(H = I = 128, TP 1 and 2) and on SM100 (TP 1; TP 2 raises in vLLM and is recorded as that
refusal) run CompressedTensorsW4A4Mxfp4MoEMethod's own process_weights_after_loading: the packed
weights renamed, and on SM100 the scales swizzled for CutlassExpertsMxfp4. ct-gpt-oss-mxfp4
(llm-compressor's per-expert gpt-oss) goes through vLLM's gpt-oss model loader, which raises on
it: recorded as that refusal. quark-gpt-oss-w-mxfp4-a-fp8 (gfx942, TP 1 and 2) runs the model's
_load_weights_quark; deepseek-v4-mxfp4 (xpu at TP 1 and 2, and sm120's DEEPGEMM_MXFP4 for its
weights) the XPU model's load_weights and Mxfp4MoEMethod's create_weights. quark-w-mxfp4-a-fp8 on cpu-amx records only the
input scales, which the CPU backend keeps per expert as loaded (its weight packs are compiled ops,
pinned by make_cpu_goldens.py). Output golden_mxfp4_layers.safetensors, the layer-case schema of golden_cpu.safetensors,
checked by tests/convert/upstream_goldens_test.cpp.
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as common  # noqa: E402
import make_cpu_goldens as cpu  # noqa: E402
import make_wna16_goldens as wn  # noqa: E402

SEED = 20261206

# (checkpoint, target, tp, harness, Mxfp4MoeBackend, experts class moepack's oracle must pick)
DEPLOYMENTS = [
    ("gpt-oss-mxfp4", "xpu", 1, "gpt-oss-mxfp4", "XPU", "XPUExpertsMxFp4"),
    ("gpt-oss-mxfp4", "gfx1250", 1, "gpt-oss-mxfp4", "EMULATION", "OCP_MXQuantizationEmulationTritonExperts"),
    ("quark-w-mxfp4", "gfx942", 1, "quark-mxfp4", "EMULATION", "OCP_MXQuantizationEmulationTritonExperts"),
    ("quark-w-mxfp4", "gfx942", 2, "quark-mxfp4", "EMULATION", "OCP_MXQuantizationEmulationTritonExperts"),
    ("quark-w-mxfp4-a-fp8", "gfx942", 1, "quark-mxfp4-a-fp8", "EMULATION", "OCP_MXQuantizationEmulationTritonExperts"),
    ("quark-w-mxfp4-a-fp8", "gfx942", 2, "quark-mxfp4-a-fp8", "EMULATION", "OCP_MXQuantizationEmulationTritonExperts"),
    ("ct-mxfp4", "xpu", 1, "ct-mxfp4", "XPU", "XPUExpertsMxFp4"),
    ("ct-mxfp4", "xpu", 2, "ct-mxfp4", "XPU", "XPUExpertsMxFp4"),
    # SM100: CutlassExpertsMxfp4, the weights as loaded, the scales swizzled (the method's
    # backend field stays MARLIN; its Marlin course proper is not run here).
    ("ct-mxfp4", "sm100", 1, "ct-mxfp4", "MARLIN", "CutlassExpertsMxfp4"),
    # At TP 2 each rank's w2 scales are [128, 2]: swizzled to CUTLASS's 128x4 tiles they are 512
    # bytes, and the method's reshape back to [N, K/32] raises. Recorded as that refusal.
    ("ct-mxfp4", "sm100", 2, "ct-mxfp4", "MARLIN", "CutlassExpertsMxfp4"),
    # llm-compressor's gpt-oss (per-expert tensors, a bias each): vLLM's gpt-oss model loads any
    # quant_method but mxfp4 and quark with _load_weights_other, which raises on them (on every
    # target: the loader runs before any backend).
    ("ct-gpt-oss-mxfp4", "xpu", 1, "gpt-oss-other-loader", "XPU", "XPUExpertsMxFp4"),
    # amd-quark's gpt-oss export (per-expert gate_up_proj/down_proj, a bias each) through the
    # model's own _load_weights_quark: weights, scales, input scales and biases as vLLM holds them.
    ("quark-gpt-oss-w-mxfp4-a-fp8", "gfx942", 1, "quark-gpt-oss", "EMULATION", "OCP_MXQuantizationEmulationTritonExperts"),
    ("quark-gpt-oss-w-mxfp4-a-fp8", "gfx942", 2, "quark-gpt-oss", "EMULATION", "OCP_MXQuantizationEmulationTritonExperts"),
    # DeepSeek-V4's native MXFP4 experts (I8 nibbles, F8_E8M0 scales, Mxfp4MoEMethod) through the
    # XPU model's own load_weights: XPU keeps them; DeepGEMM keeps the weights (its scale
    # packing is a compiled op, pinned by golden_deepgemm_scales: recorded in part).
    ("deepseek-v4-mxfp4", "xpu", 1, "deepseek-v4", "XPU", "XPUExpertsMxFp4"),
    ("deepseek-v4-mxfp4", "xpu", 2, "deepseek-v4", "XPU", "XPUExpertsMxFp4"),
    ("deepseek-v4-mxfp4", "sm120", 1, "deepseek-v4", "DEEPGEMM_MXFP4", "DeepGemmFP4Experts"),
    # The CPU backend keeps the per-expert input scales as loaded. Only they are recorded: its
    # weight packs are compiled ops (make_cpu_goldens.py runs them; here they are its zero stand-in).
    ("quark-w-mxfp4-a-fp8", "cpu-amx", 1, "quark-mxfp4-a-fp8", "CPU", "CPUExpertsMxfp4"),
]
INPUT_ROLES = ["w13_input_scale", "w2_input_scale"]
# Backends recorded in part, and why.
PARTIAL = {"CPU": "input scales only: the CPU weight packs are compiled ops",
           "DEEPGEMM_MXFP4": "weights only: DeepGEMM's scale packing is a compiled op (golden_deepgemm_scales pins it)"}
# Deployments where vLLM raises loading or preparing the layer (the case records the error, no ranks).
RAISES = {("ct-mxfp4", "sm100", 2), ("ct-gpt-oss-mxfp4", "xpu", 1)}


def run_quark_mxfp4_a_fp8_rank(ns, ckpt, config, tp, rank, backend):
    """Quark W-MXFP4-A-FP8 with static input scales: QuarkOCP_MX_MoEMethod.create_weights stood in
    for as it allocates them (weights and E8M0 scales as for w_mxfp4; w13_input_scale and
    w2_input_scale F32 [E] of ones; every parameter with quant_method "block", the attribute
    create_weights adds to all of them), each expert's tensors through RoutedExperts.weight_loader,
    then convert_gpt_oss_weight_to_mxfp4_moe_kernel_format with the input scales, as _setup_kernel
    passes them (EMULATION replaces each by its maximum over the experts, F32 0-d)."""
    moe, layer = cpu.quant_layer(ns, config, tp, rank, "QuarkOCP_MX_MoEMethod", "quark")
    e, h, i = moe.num_experts, moe.hidden_dim, moe.intermediate_size_per_partition
    block = ns["FusedMoeWeightScaleSupported"].BLOCK.value
    cpu.add_param(ns, layer, "w13_weight", (e, 2 * i, h // 2), torch.uint8, quant_method=block)
    cpu.add_param(ns, layer, "w2_weight", (e, h, i // 2), torch.uint8, quant_method=block)
    cpu.add_param(ns, layer, "w13_weight_scale", (e, 2 * i, h // 32), torch.uint8, quant_method=block)
    cpu.add_param(ns, layer, "w2_weight_scale", (e, h, i // 32), torch.uint8, quant_method=block)
    for name in INPUT_ROLES:
        cpu.add_param(ns, layer, name, (e,), torch.float32, quant_method=block)
        getattr(layer, name).data.fill_(1.0)  # create_weights allocates torch.ones
    cpu.load_experts(layer, ckpt)
    m = ns["mxfp4"]
    out = m["convert_gpt_oss_weight_to_mxfp4_moe_kernel_format"](
        m["Mxfp4MoeBackend"][backend], layer, layer.w13_weight, layer.w2_weight, layer.w13_weight_scale,
        layer.w2_weight_scale, None, None, w13_input_scale=layer.w13_input_scale, w2_input_scale=layer.w2_input_scale)
    result = {r: t for r, t in zip(cpu.MXFP4_ROLES, out) if t is not None}
    for name in INPUT_ROLES:
        result[name] = getattr(layer, name)
    return cpu.types.SimpleNamespace(**result)


class Golden(cpu.Golden):
    FILE = "golden_mxfp4_layers.safetensors"


CT_MXFP4 = ("vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/"
            "compressed_tensors_moe_w4a4_mxfp4.py")


def ct_mxfp4_process_weights(vendor, ns):
    """CompressedTensorsW4A4Mxfp4MoEMethod.process_weights_after_loading, compiled from vLLM's file
    as a plain function, with what its branches reach: torch, cutlass_moe's swizzle_mxfp4_scales
    (imported inside the method, so registered as that module), B12X_BACKENDS and a platform
    that says whether it is an XPU. get_fused_moe_quant_config is given as returning None, so the
    method builds no modular kernel: the experts classes it would build here, XPUExpertsMxFp4 and
    CutlassExpertsMxfp4, keep the modular kernel's empty process_weights_after_loading."""
    fm = vendor / "vllm" / "vllm" / "model_executor" / "layers" / "fused_moe"
    cutlass = common.exec_top_level(fm / "experts" / "cutlass_moe.py", ["swizzle_mxfp4_scales"], {"torch": torch})
    common.stub_module("vllm.model_executor.layers.fused_moe.experts.cutlass_moe", swizzle_mxfp4_scales=cutlass["swizzle_mxfp4_scales"])
    g = dict(ns, torch=torch, B12X_BACKENDS=ns["mxfp4"]["B12X_BACKENDS"])
    return common.exec_method(vendor / "vllm" / CT_MXFP4, "CompressedTensorsW4A4Mxfp4MoEMethod", "process_weights_after_loading", g), g


def run_ct_mxfp4_rank(ns, ckpt, config, tp, rank, backend):
    """compressed-tensors MXFP4 (per-expert weight_packed / weight_scale): CompressedTensorsW4A4Mxfp4-
    MoEMethod.create_weights stood in for as it allocates them (w13_weight_packed U8 [E, 2I, H/2]
    and w2_weight_packed U8 [E, H, I/2] with no quant_method, their E8M0 scales with "group"),
    each expert through RoutedExperts.weight_loader; then the method's own
    process_weights_after_loading (ct_mxfp4_process_weights) on the course the oracle picks: XPU
    (the packed weights renamed w13_weight / w2_weight, the scales kept) or, on SM100
    (use_cutlass_mxfp4, CutlassExpertsMxfp4, while the backend field says MARLIN), the scales
    swizzled to CUTLASS's 128x4 tiles."""
    assert backend in ("XPU", "MARLIN")
    moe, layer = cpu.quant_layer(ns, config, tp, rank, "CompressedTensorsW4A4Mxfp4MoEMethod", "compressed-tensors")
    e, h, i = moe.num_experts, moe.hidden_dim, moe.intermediate_size_per_partition
    group = ns["FusedMoeWeightScaleSupported"].GROUP.value
    cpu.add_param(ns, layer, "w13_weight_packed", (e, 2 * i, h // 2), torch.uint8)
    cpu.add_param(ns, layer, "w2_weight_packed", (e, h, i // 2), torch.uint8)
    cpu.add_param(ns, layer, "w13_weight_scale", (e, 2 * i, h // 32), torch.uint8, quant_method=group)
    cpu.add_param(ns, layer, "w2_weight_scale", (e, h, i // 32), torch.uint8, quant_method=group)
    cpu.load_experts(layer, ckpt)
    process, g = ns["ct_mxfp4_process_weights"]
    g["current_platform"] = cpu.types.SimpleNamespace(is_xpu=lambda: backend == "XPU")
    method = cpu.types.SimpleNamespace(use_cutlass_mxfp4=backend == "MARLIN", mxfp4_backend=None,
                                       get_fused_moe_quant_config=lambda layer: None)
    process(method, layer)
    return cpu.types.SimpleNamespace(w13_weight=layer.w13_weight, w2_weight=layer.w2_weight,
                                     w13_weight_scale=layer.w13_weight_scale, w2_weight_scale=layer.w2_weight_scale)


def answer_for_rank(g, tp, rank):
    """What the gpt-oss loaders ask of vLLM's parallel state, answered for one tensor-parallel
    rank (no data, pipeline or context parallelism; every layer on this rank)."""
    g.update(FusedMoEParallelConfig=cpu.types.SimpleNamespace(flatten_tp_across_dp_and_pcp=lambda **k: (tp, rank)),
             get_tensor_model_parallel_world_size=lambda: tp, get_tensor_model_parallel_rank=lambda: rank,
             get_dp_group=lambda: cpu.types.SimpleNamespace(world_size=1, rank_in_group=0),
             get_pcp_group=lambda: cpu.types.SimpleNamespace(world_size=1, rank_in_group=0),
             is_pp_missing_parameter=lambda name, model: False, cdiv=lambda a, b: -(-a // b))


def run_quark_gpt_oss_rank(ns, ckpt, config, tp, rank, backend):
    """amd-quark gpt-oss (W-MXFP4-A-FP8, per-expert tensors with biases): QuarkOCP_MX_MoEMethod.
    create_weights stood in for as it allocates them (as run_quark_mxfp4_a_fp8_rank, plus
    has_bias' w13_bias F32 [E, 2I] and w2_bias F32 [E, H] of zeros), under the routed experts'
    names; the checkpoint's expert tensors in name order through GptOssForCausalLM's mapper and
    GptOssModel._load_weights_quark (compiled from gpt_oss.py: cdiv(I/32, tp)*32 rows per rank,
    w2_bias zeroed off rank 0, the per-expert input scales copied); then
    convert_gpt_oss_weight_to_mxfp4_moe_kernel_format with biases and input scales as
    _setup_kernel passes them."""
    mapper, _, load_quark, g = ns["gpt_oss_loaders"]
    answer_for_rank(g, tp, rank)
    moe, layer = cpu.quant_layer(ns, config, tp, rank, "QuarkOCP_MX_MoEMethod", "quark")
    e, h, i = moe.num_experts, moe.hidden_dim, moe.intermediate_size_per_partition
    block = ns["FusedMoeWeightScaleSupported"].BLOCK.value
    for name, shape, dtype in (("w13_weight", (e, 2 * i, h // 2), torch.uint8), ("w2_weight", (e, h, i // 2), torch.uint8),
                               ("w13_weight_scale", (e, 2 * i, h // 32), torch.uint8), ("w2_weight_scale", (e, h, i // 32), torch.uint8),
                               ("w13_bias", (e, 2 * i), torch.float32), ("w2_bias", (e, h), torch.float32)):
        cpu.add_param(ns, layer, name, shape, dtype, quant_method=block)
    for name in INPUT_ROLES:
        cpu.add_param(ns, layer, name, (e,), torch.float32, quant_method=block)
        getattr(layer, name).data.fill_(1.0)
    prefix = "model.layers.0.mlp.experts.routed_experts."
    params = {prefix + n: p for n, p in layer.named_parameters()}
    experts = cpu.types.SimpleNamespace(_quant_method=cpu.types.SimpleNamespace(weight_dtype="mxfp4"))
    model = cpu.types.SimpleNamespace(named_parameters=lambda: params.items(), config=cpu.types.SimpleNamespace(**config),
                                      parallel_config=cpu.types.SimpleNamespace(enable_expert_parallel=False),
                                      layers=[cpu.types.SimpleNamespace(mlp=cpu.types.SimpleNamespace(experts=experts))],
                                      get_expert_mapping=lambda: [])
    weights = ((mapper._map_name(k), v) for k, v in sorted(ckpt.items()) if ".mlp.experts." in k)
    load_quark(model, e, 0, config["num_attention_heads"] // tp, 0, ((k, v) for k, v in weights if k is not None), [])
    m = ns["mxfp4"]
    out = m["convert_gpt_oss_weight_to_mxfp4_moe_kernel_format"](
        m["Mxfp4MoeBackend"][backend], layer, layer.w13_weight, layer.w2_weight, layer.w13_weight_scale, layer.w2_weight_scale,
        layer.w13_bias, layer.w2_bias, w13_input_scale=layer.w13_input_scale, w2_input_scale=layer.w2_input_scale)
    result = {r: t for r, t in zip(cpu.MXFP4_ROLES, out) if t is not None}
    for name in INPUT_ROLES:
        result[name] = getattr(layer, name)
    return cpu.types.SimpleNamespace(**result)


def model_loading_namespace(vendor):
    """What vLLM's model loaders are compiled against here: torch, typing names, a quiet logger,
    and models/utils.py's WeightsMapper (returned too, for the models' name mappers)."""
    import dataclasses
    import re
    import typing as t
    base = {"torch": torch, "re": re, "dataclass": dataclasses.dataclass, "field": dataclasses.field, "Mapping": t.Mapping,
            "Iterable": t.Iterable, "Callable": t.Callable, "Generator": t.Generator, "ShardId": t.Any, "WeightRenaming": t.Any,
            "typing": t, "logger": common.QuietLogger()}
    mapper_class = common.exec_top_level(vendor / "vllm" / "vllm" / "model_executor" / "models" / "utils.py", ["WeightsMapper"], dict(base))["WeightsMapper"]
    return base, mapper_class


def deepseek_v4_loader(vendor, ns):
    """DeepSeek-V4 on XPU, what loads its experts: the model's checkpoint-name mapper
    (_make_deepseek_v4_weights_mapper("fp4")) and DeepseekV4Model.load_weights from
    vllm/models/deepseek_v4/xpu/model.py, with RoutedExperts.build_expert_params_mapping (no
    redundant experts: EPLB's physical-to-logical map is the identity); Mxfp4MoEMethod's own
    create_weights and scale loader (_encode_mxfp4_weight_scale); the oracle's
    convert_weight_to_mxfp4_moe_kernel_format. All compiled from vLLM's files as functions."""
    import typing as t
    v = vendor / "vllm" / "vllm"
    base, mapper_class = model_loading_namespace(vendor)
    model_file = v / "models" / "deepseek_v4" / "xpu" / "model.py"
    mapper = common.exec_top_level(model_file, ["_make_deepseek_v4_weights_mapper"], dict(base, WeightsMapper=mapper_class))["_make_deepseek_v4_weights_mapper"]("fp4")
    routed = v / "model_executor" / "layers" / "fused_moe" / "routed_experts.py"
    eplb = cpu.types.SimpleNamespace(build_initial_global_physical_to_logical_map=lambda n, r: list(range(n + r)))
    build_mapping = common.exec_method(routed, "RoutedExperts", "build_expert_params_mapping", dict(base, EplbState=eplb))
    loader_utils = common.exec_top_level(v / "model_executor" / "model_loader" / "weight_utils.py", ["default_weight_loader"], dict(base))
    load_weights = common.exec_method(model_file, "DeepseekV4Model", "load_weights", dict(base, **loader_utils))
    quant = v / "model_executor" / "layers" / "quantization" / "mxfp4.py"
    method_ns = dict(base)
    encode = common.exec_method(quant, "Mxfp4MoEMethod", "_encode_mxfp4_weight_scale", method_ns)
    scale_loader = common.exec_method(quant, "Mxfp4MoEMethod", "get_scale_weight_loader", method_ns)
    method_ns["Mxfp4MoEMethod"] = cpu.types.SimpleNamespace(_encode_mxfp4_weight_scale=encode, get_scale_weight_loader=scale_loader)
    create_weights = common.exec_method(quant, "Mxfp4MoEMethod", "create_weights", dict(method_ns, set_weight_attrs=ns["set_weight_attrs"]))
    fm = v / "model_executor" / "layers" / "fused_moe"
    convert_ns = dict(base, Union=t.Union, current_platform=cpu.types.SimpleNamespace(is_rocm=lambda: False),
                      Mxfp4MoeBackend=ns["mxfp4"]["Mxfp4MoeBackend"], B12X_BACKENDS=ns["mxfp4"]["B12X_BACKENDS"],
                      TRITON_BACKENDS=ns["mxfp4"]["TRITON_BACKENDS"], TRTLLM_BACKENDS=ns["mxfp4"]["TRTLLM_BACKENDS"],
                      convert_gpt_oss_weight_to_mxfp4_moe_kernel_format=ns["mxfp4"]["convert_gpt_oss_weight_to_mxfp4_moe_kernel_format"],
                      # DeepGEMM's scale packing is a compiled op: the scales are not recorded on that path.
                      _pack_deepgemm_mxfp4_scales=lambda w13, w2, s13, s2: (s13, s2))
    convert = common.exec_top_level(fm / "oracle" / "mxfp4.py", ["convert_weight_to_mxfp4_moe_kernel_format"], convert_ns)["convert_weight_to_mxfp4_moe_kernel_format"]
    return mapper, build_mapping, load_weights, create_weights, convert


def run_deepseek_v4_rank(ns, ckpt, config, tp, rank, backend):
    """DeepSeek-V4 MXFP4: Mxfp4MoEMethod.create_weights (run) allocates the layer's parameters
    under the routed experts' names, the checkpoint's expert tensors in name order go through the
    XPU model's mapper and DeepseekV4Model.load_weights (E8M0 scales viewed as bytes, each expert
    through RoutedExperts.weight_loader), then convert_weight_to_mxfp4_moe_kernel_format."""
    mapper, build_mapping, load_weights, create_weights, convert = ns["deepseek_v4_loader"]
    config = dict(config, num_experts=config["n_routed_experts"])
    moe, layer = cpu.quant_layer(ns, config, tp, rank, "Mxfp4MoEMethod", "deepseek_v4_fp8")
    e, h, i = moe.num_experts, moe.hidden_dim, moe.intermediate_size_per_partition
    method = cpu.types.SimpleNamespace(moe=moe)
    create_weights(method, layer, e, h, i, torch.bfloat16, weight_loader=layer.weight_loader)
    prefix = "model.layers.0.ffn.experts.routed_experts."
    params = {prefix + n: p for n, p in layer.named_parameters()}
    g = load_weights.__globals__
    g.update(get_tensor_model_parallel_world_size=lambda: tp, get_tensor_model_parallel_rank=lambda: rank,
             is_pp_missing_parameter=lambda name, model: False)
    model = cpu.types.SimpleNamespace(named_parameters=lambda: params.items(), config=cpu.types.SimpleNamespace(**config),
                                      get_expert_mapping=lambda: build_mapping("w1", "w2", "w3", e))
    weights = ((mapper._map_name(k), v) for k, v in sorted(ckpt.items()) if ".experts." in k and ".shared_experts." not in k)
    load_weights(model, ((k, v) for k, v in weights if k is not None))
    out = convert(ns["mxfp4"]["Mxfp4MoeBackend"][backend], layer, layer.w13_weight, layer.w2_weight,
                  layer.w13_weight_scale, layer.w2_weight_scale, None, None)
    roles = ["w13_weight", "w2_weight"] if backend == "DEEPGEMM_MXFP4" else cpu.MXFP4_ROLES[:4]
    return cpu.types.SimpleNamespace(**{r: t for r, t in zip(cpu.MXFP4_ROLES, out) if r in roles})


def gpt_oss_loaders(vendor):
    """GptOssForCausalLM's checkpoint-name mapper (hf_to_vllm_mapper, evaluated from the class
    body over vLLM's WeightsMapper), GptOssModel._load_weights_other and _load_weights_quark
    compiled as functions,
    with weight_utils' remap_moe_expert_weights; the parallel groups answer for one rank."""
    import ast
    models = vendor / "vllm" / "vllm" / "model_executor" / "models"
    base, mapper_class = model_loading_namespace(vendor)
    mapper = None
    for node in ast.parse((models / "gpt_oss.py").read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == "GptOssForCausalLM":
            for item in node.body:
                if isinstance(item, ast.Assign) and getattr(item.targets[0], "id", "") == "hf_to_vllm_mapper":
                    mapper = eval(compile(ast.Expression(item.value), str(models / "gpt_oss.py"), "eval"), {"WeightsMapper": mapper_class})
    loader_utils = common.exec_top_level(vendor / "vllm" / "vllm" / "model_executor" / "model_loader" / "weight_utils.py",
                                         ["maybe_remap_moe_expert_param_name", "remap_moe_expert_weights", "default_weight_loader"], dict(base))
    g = dict(base, **loader_utils, OCP_MX_BLOCK_SIZE=32)
    load_other = common.exec_method(models / "gpt_oss.py", "GptOssModel", "_load_weights_other", g)
    load_quark = common.exec_method(models / "gpt_oss.py", "GptOssModel", "_load_weights_quark", g)
    return mapper, load_other, load_quark, g


def run_gpt_oss_other_loader_rank(ns, ckpt, config, tp, rank, backend):
    """llm-compressor's gpt-oss through vLLM's gpt-oss model loader: the layer's parameters as
    CompressedTensorsW4A4Mxfp4MoEMethod.create_weights allocates them (under the routed experts'
    names), the checkpoint's expert tensors in name order through GptOssForCausalLM's mapper,
    then GptOssModel._load_weights_other (the loader for any quant_method but mxfp4 and quark).
    It raises on per-expert tensors; the case records what."""
    mapper, load_other, _, g = ns["gpt_oss_loaders"]
    answer_for_rank(g, tp, rank)
    moe, layer = cpu.quant_layer(ns, config, tp, rank, "CompressedTensorsW4A4Mxfp4MoEMethod", "compressed-tensors")
    e, h, i = moe.num_experts, moe.hidden_dim, moe.intermediate_size_per_partition
    for name, shape in (("w13_weight_packed", (e, 2 * i, h // 2)), ("w2_weight_packed", (e, h, i // 2)),
                        ("w13_weight_scale", (e, 2 * i, h // 32)), ("w2_weight_scale", (e, h, i // 32))):
        cpu.add_param(ns, layer, name, shape, torch.uint8)
    prefix = "model.layers.0.mlp.experts.routed_experts."
    params = {prefix + n: p for n, p in layer.named_parameters()}
    model = cpu.types.SimpleNamespace(named_parameters=lambda: params.items(), config=cpu.types.SimpleNamespace(**config),
                                      parallel_config=cpu.types.SimpleNamespace(enable_expert_parallel=False))
    weights = ((mapper._map_name(k), v) for k, v in sorted(ckpt.items()) if ".mlp.experts." in k)
    load_other(model, e, 0, config["num_attention_heads"] // tp, 0, ((k, v) for k, v in weights if k is not None), [])
    raise AssertionError("GptOssModel._load_weights_other loaded the per-expert checkpoint")


def layer_cases(ns, g, samples: Path, errors: list):
    run = {"gpt-oss-mxfp4": cpu.run_gpt_oss_mxfp4_rank, "quark-mxfp4": cpu.run_quark_mxfp4_rank,
           "quark-mxfp4-a-fp8": run_quark_mxfp4_a_fp8_rank, "ct-mxfp4": run_ct_mxfp4_rank,
           "gpt-oss-other-loader": run_gpt_oss_other_loader_rank, "quark-gpt-oss": run_quark_gpt_oss_rank,
           "deepseek-v4": run_deepseek_v4_rank}
    for name, target, tp, harness, backend, experts_class in DEPLOYMENTS:
        files = {f.name: f.read_bytes() for f in sorted((samples / name).glob("*.safetensors"))}
        config = cpu.json.loads((samples / name / "config.json").read_text())
        case = {"name": f"{name}_{target}" + (f"_tp{tp}" if tp > 1 else ""), "sample": name, "checkpoint": "",
                "sha256": cpu.case_sha(files), "target": target, "moe_backend": "", "model_dtype": "", "tp": tp, "ep": False,
                "backend": backend, "experts_class": experts_class, "method": harness, "partial": backend in PARTIAL, "ranks": [],
                "notes": [PARTIAL[backend]] if backend in PARTIAL else []}
        roles = INPUT_ROLES if backend == "CPU" else ["w13_weight", "w2_weight"] if backend == "DEEPGEMM_MXFP4" else cpu.MXFP4_ROLES + INPUT_ROLES
        try:
            ckpt = {}
            dtypes = dict(wn.ST_DTYPES)
            if getattr(torch, "float8_e8m0fnu", torch.uint8) is not torch.uint8:
                dtypes["F8_E8M0"] = torch.float8_e8m0fnu  # read as bytes where torch has no such dtype
            for data in files.values():
                ckpt.update(common.parse_safetensors(data, dtypes))
            raises = (name, target, tp) in RAISES
            for rank in range(tp):
                with cpu.model_dtype(torch.bfloat16):
                    try:
                        layer = run[harness](ns, ckpt, config, tp, rank, backend)
                    except (RuntimeError, KeyError, IndexError) as exc:
                        if not raises:
                            raise
                        case["raises"], case["ranks"] = f"{type(exc).__name__}: {exc}", []
                        break
                case["ranks"].append(cpu.record_rank(g, case, layer, rank, roles))
            if raises and "raises" not in case:
                raise RuntimeError("vLLM was expected to raise while preparing this layer, and did not")
            g.layer_cases.append(case)
        except Exception as exc:  # keep the other cases; report this one
            common.report_failure(errors, case["name"], exc)


def main():
    ap = common.argument_parser(__doc__)
    ap.add_argument("--out", type=Path, help="where golden_mxfp4_layers.safetensors goes (omit for a dry run)")
    args = ap.parse_args()
    compat = []
    if not hasattr(torch.Tensor, "untyped_storage"):
        torch.Tensor.untyped_storage = lambda self: self.storage().untyped()
        compat.append("torch without Tensor.untyped_storage: storage().untyped()")
    if not hasattr(torch, "float8_e8m0fnu"):
        # vLLM compares scale dtypes with it; such a torch reads E8M0 as bytes, which the
        # comparisons then take for it (a view to uint8 of uint8 changes nothing).
        torch.float8_e8m0fnu = torch.uint8
        compat.append("torch without float8_e8m0fnu: E8M0 read as uint8, torch.float8_e8m0fnu = torch.uint8")
    keep = cpu.zeros_library()  # noqa: F841  (the namespace binds the CPU ops; no CPU branch runs here)
    ns = cpu.vllm_namespace(args.vendor)
    ns["ct_mxfp4_process_weights"] = ct_mxfp4_process_weights(args.vendor, ns)
    ns["gpt_oss_loaders"] = gpt_oss_loaders(args.vendor)
    ns["deepseek_v4_loader"] = deepseek_v4_loader(args.vendor, ns)
    # The EMULATION branch asks whether the input scales agree (w8a8_utils.all_close_1d) before
    # it takes their maximum; the CPU harness never reaches that line.
    common.exec_top_level(args.vendor / "vllm" / "vllm" / "model_executor" / "layers" / "quantization" / "utils" / "w8a8_utils.py",
                          ["all_close_1d"], ns["mxfp4"])
    provenance = {"vllm": cpu.VLLM, "seed": SEED, "torch": torch.__version__, "device": "cpu", "compat": compat}
    g = Golden()
    errors = []
    layer_cases(ns, g, args.samples, errors)
    summary = {"provenance": provenance, "layer_cases": len(g.layer_cases),
               "bytes": sum(t.numel() * t.element_size() for t in g.tensors.values()), "errors": errors,
               "not_recorded": sorted({x for c in g.layer_cases for r in c["ranks"] for x in r["not_recorded"]})}
    return common.finish(summary, errors, args.out, lambda out: g.save(out, provenance))


if __name__ == "__main__":
    sys.exit(main())
