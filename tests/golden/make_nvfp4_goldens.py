#!/usr/bin/env python3
"""Golden bytes for moepack's NVFP4 conversions, produced by running the REAL upstream Python code.

Tooling, not part of the build; the companion of make_mxfp4_goldens.py (whose helpers it imports)
and run the same way. It needs PyTorch 2.x with float8 dtypes (a CUDA device if there is one:
vLLM's `swizzle_blockscale` ends in `.cuda()`, and the b12x E4M3 cast then runs as vLLM runs
it) and a folder of upstream sources that this repository does NOT ship. Populate it with the
upstream repositories' own files, at their own paths:

  VENDOR/vllm/vllm/...        vllm-project/vllm @ e9d1398d9:
      model_executor/utils.py
      model_executor/layers/fused_moe/activation.py
      model_executor/layers/fused_moe/oracle/nvfp4.py
      model_executor/layers/fused_moe/experts/{trtllm_nvfp4_moe,flashinfer_cutlass_moe,cutlass_moe,
          flashinfer_cutedsl_moe,flashinfer_cutedsl_batched_moe,flashinfer_b12x_moe}.py
      model_executor/layers/quantization/modelopt.py
      model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/
          compressed_tensors_moe_w4a4_nvfp4.py
      model_executor/layers/quantization/utils/{flashinfer_fp4_moe,flashinfer_utils,nvfp4_utils,
          quant_utils,marlin_utils,marlin_utils_fp4}.py
      utils/math_utils.py
  VENDOR/flashinfer/flashinfer/...  flashinfer-ai/flashinfer @ v0.6.17: utils.py, fused_moe/core.py,
      fused_moe/cute_dsl/blackwell_sm12x/moe_w4a16_fp4_helpers.py

  python3 tests/golden/make_nvfp4_goldens.py --vendor VENDOR --samples samples --out OUTDIR

Two kinds of case go into golden_nvfp4.safetensors:

* Layout cases (metadata "golden_cases", the schema of the MXFP4 goldens, checked by
  tests/packers/golden_test.cpp): one upstream function per case on seeded random bytes at
  awkward sizes, recorded with the moepack layout id that claims to reproduce it: vLLM's
  `swizzle_blockscale`, `reorder_w1w3_to_w3w1`, `reorder_w13_to_w31_for_flashinfer_cutedsl` +
  `interleave_linear_and_gate`, `prepare_static_weights_for_trtllm_fp4_moe` (FlashInfer's
  permute indices) and `marlin_permute_scales` + `nvfp4_marlin_process_scales`.

* Layer cases (metadata "golden_layer_cases", checked end to end by
  tests/convert/upstream_goldens_test.cpp): one of the repository's NVFP4 sample checkpoints, some
  of its tensors optionally replaced by seeded adversarial ones (a patch set, "golden_patch_sets",
  stored in the file), loaded into one layer per rank (TP 1 or 2, or EP 2) as vLLM allocates
  and loads it, then the quantization method's own
  `process_weights_after_loading` (ModelOptNvFp4FusedMoE or CompressedTensorsW4A4Nvfp4MoEMethod,
  run whole), which calls `convert_to_nvfp4_moe_kernel_format` (run whole, with every helper it
  calls), `make_nvfp4_moe_quant_config` and the chosen experts class's own
  `process_weights_after_loading` (the input-scale folds, TRT-LLM's g1_scale_c and SwiGLU folds,
  the b12x bake-in). What the kernels then read is recorded by role and rank; the test converts
  the same checkpoint with moepack for the same deployment and compares each of those tensors.
  Tensors of at most FULL_BYTES bytes, and every tensor of a case marked "full", are stored
  whole; larger ones as the SHA-256 of their storage bytes (the FP4 weights, whose byte moves
  the layout cases pin whole).

How upstream code is run: as in make_mxfp4_goldens.py, the needed top-level definitions (and,
for classes that need vLLM's class hierarchy, single methods) are parsed out of the pinned files
with `ast` and executed unchanged in a namespace that provides what they reference. Stand-ins,
named in the `note` of each output that depends on one:
  * FlashInfer `nvfp4_block_scale_interleave` (C++ op): FlashInfer's own pure-torch 128x4
    `swizzle_block_scale` (the same library and version), flattened as the op returns.
  * vLLM `_repack_marlin_experts` (gptq_marlin_repack, CUDA): returns None; Marlin weights are
    not recorded (moepack's 4-bit Marlin repack is pinned by the MXFP4 goldens' neighbours and
    its own tests, not here).
  * FlashInfer `convert_sf_to_mma_layout` (CuteDSL / b12x quant-config views of the swizzled
    scales): returns its input; it only re-views the storage (vLLM asserts the same data_ptr).
  * vLLM's weight loader: the per-expert checkpoint tensors are stacked as FusedMoE's
    weight_loader does (w13 rows [w1; w3], per-shard scalars in column 0 for w1 and 1 for w3;
    under TP each rank's slice of the intermediate extent, under EP the rank's experts in
    linear placement, and ModelOpt's input scales for every expert on the FlashInfer backends,
    as its create_weights allocates them). W4A16 input scales, which vLLM allocates with
    torch.empty and never loads, are ones (the Marlin path drops them unread).
  * `make_nvfp4_moe_kernel`: builds the experts object directly from the selected class (the
    prepare/finalize half has no weights); `FusedMoEQuantConfig` (a dataclass of references) is
    a plain record with the same properties; `replace_parameter` is vLLM's own.
  * Classes whose base is vLLM's modular-kernel hierarchy (FlashInferExperts, CutlassExpertsFp4,
    FlashInferCuteDSL(Batched)Experts, FlashInferB12xExperts): their
    `process_weights_after_loading` method is run, unchanged, on a record that holds what it
    reads (quant_config and its scale properties, num_local_experts). TrtLlmNvFp4ExpertsBase has
    no such base and is run whole (its __init__ included).
"""

import json
import sys
import types
import typing
from enum import Enum
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as common  # noqa: E402
import make_mxfp4_goldens as mx  # noqa: E402  (its FlashInfer pieces, storage_order)

SEED = 20250607
FULL_BYTES = 1024
VLLM = common.VLLM
FI = common.FLASHINFER

# ---------------------------------------------------------------------------------------------
# Running upstream definitions
# ---------------------------------------------------------------------------------------------


class AnyAttr:
    """A module whose every attribute is typing.Any (for annotations such as mk.FusedMoEActivationFormat)."""

    def __getattr__(self, _name):
        return typing.Any


class QuantConfigStandIn:
    """FusedMoEQuantConfig as the NVFP4 paths read it: references to the tensors it was given."""

    def __init__(self, quant_dtype, **kw):
        self.quant_dtype = quant_dtype
        self.weight_quant_dtype = "nvfp4"
        for k in ("w1_scale", "w2_scale", "g1_alphas", "g2_alphas", "a1_gscale", "a2_gscale"):
            setattr(self, k, kw.pop(k, None))
        self.is_scale_swizzled = kw.pop("is_scale_swizzled", True)
        self.gemm1_alpha = kw.pop("gemm1_alpha", None)
        self.gemm1_beta = kw.pop("gemm1_beta", None)
        self.gemm1_clamp_limit = kw.pop("gemm1_clamp_limit", None)
        kw.pop("w1_bias", None), kw.pop("w2_bias", None)
        assert not kw, kw

    @property
    def use_nvfp4_w4a4(self):
        return self.quant_dtype == "nvfp4"

    @property
    def use_nvfp4_w4a16(self):
        return self.quant_dtype is None


def nvfp4_moe_quant_config(**kw):
    return QuantConfigStandIn("nvfp4", **kw)


def nvfp4_w4a16_moe_quant_config(**kw):
    return QuantConfigStandIn(None, **kw)


def experts_record_class(pwal):
    """A class holding what an experts class's process_weights_after_loading reads."""

    class Experts:
        def __init__(self, moe_config, quant_config):
            self.moe_config, self.quant_config = moe_config, quant_config
            self.num_local_experts = moe_config.num_local_experts
            self._fc2_input_scale = None

        w1_scale = property(lambda s: s.quant_config.w1_scale)
        w2_scale = property(lambda s: s.quant_config.w2_scale)
        a2_gscale = property(lambda s: s.quant_config.a2_gscale)
        process_weights_after_loading = pwal

    return Experts


def make_nvfp4_moe_kernel(moe_quant_config, moe_config, experts_cls, backend, routing_tables=None,
                          per_token_activation=False):
    experts = experts_cls(moe_config=moe_config, quant_config=moe_quant_config)
    return types.SimpleNamespace(fused_experts=experts)


def vllm_namespace(vendor: Path):
    v = vendor / "vllm" / "vllm"
    layers = v / "model_executor" / "layers"
    utils = layers / "quantization" / "utils"
    experts = layers / "fused_moe" / "experts"
    ns = {"torch": torch, "F": torch.nn.functional, "Enum": Enum, "logger": common.QuietLogger(), "mk": AnyAttr(),
          "TYPE_CHECKING": False, "dataclass": __import__("dataclasses").dataclass}
    common.exec_top_level(v / "utils" / "math_utils.py", ["round_up"], ns)
    common.exec_top_level(layers / "fused_moe" / "activation.py", ["MoEActivation"], ns)
    common.exec_top_level(v / "model_executor" / "utils.py", ["set_weight_attrs", "replace_parameter"], ns)
    common.exec_top_level(utils / "quant_utils.py", ["amax_for_moe_activation_quant"], ns)
    common.exec_top_level(utils / "nvfp4_utils.py", ["swizzle_blockscale"], ns)
    common.exec_top_level(utils / "flashinfer_utils.py", ["swap_w13_to_w31", "align_fp4_moe_weights_for_fi",
                                                          "align_trtllm_fp4_moe_hidden_dim_for_fi"], ns)
    common.exec_top_level(utils / "flashinfer_fp4_moe.py", [
        "reorder_w1w3_to_w3w1", "interleave_linear_and_gate", "reorder_w13_to_w31_for_flashinfer_cutedsl",
        "prepare_nvfp4_moe_layer_for_flashinfer_cutedsl", "nvfp4_swizzled_scale_to_cutedsl_mma_view",
        "prepare_static_weights_for_trtllm_fp4_moe", "prepare_nvfp4_moe_layer_for_fi_or_cutlass"], ns)
    common.exec_top_level(utils / "marlin_utils.py", ["get_scale_perms", "marlin_permute_scales"], ns)
    ns["get_marlin_input_dtype"] = lambda *a, **k: None  # 16-bit activations (8-bit ones are refused)
    ns["marlin_make_workspace_new"] = lambda *a, **k: None
    ns["_repack_marlin_experts"] = lambda *a, **k: None  # gptq_marlin_repack is a CUDA op
    common.exec_top_level(utils / "marlin_utils_fp4.py", ["_nvfp4_compute_scale_factor", "nvfp4_marlin_process_scales",
                                                          "nvfp4_marlin_process_global_scale",
                                                          "prepare_nvfp4_moe_layer_for_marlin"], ns)
    ns["envs"] = types.SimpleNamespace(VLLM_B12X_MOE_FP4_FORCE_A16=False)
    ns["kE2M1ToFloat_handle"] = types.SimpleNamespace(val=torch.zeros(16))
    ns["prepare_nvfp4_moe_layer_for_b12x"] = None  # native B12X: moepack refuses it (external package)
    ns["nvfp4_moe_quant_config"] = nvfp4_moe_quant_config
    ns["nvfp4_w4a16_moe_quant_config"] = nvfp4_w4a16_moe_quant_config
    common.exec_top_level(layers / "fused_moe" / "oracle" / "nvfp4.py", [
        "NvFp4MoeBackend", "FLASHINFER_NVFP4_MOE_BACKENDS", "is_global_sf_supported_for_nvfp4_backend", "_use_a16",
        "convert_to_nvfp4_moe_kernel_format", "make_nvfp4_moe_quant_config"], ns)
    common.stub_module("vllm.model_executor.layers.fused_moe.oracle.nvfp4", NvFp4MoeBackend=ns["NvFp4MoeBackend"],
                       is_global_sf_supported_for_nvfp4_backend=ns["is_global_sf_supported_for_nvfp4_backend"])
    common.stub_module("flashinfer.cute_dsl.utils", convert_sf_to_mma_layout=lambda scale, **k: scale)
    ns["flashinfer_convert_sf_to_mma_layout"] = lambda scale, **k: scale
    ns["make_nvfp4_moe_kernel"] = make_nvfp4_moe_kernel

    # The quantization methods' own process_weights_after_loading and quant-config builders.
    modelopt = layers / "quantization" / "modelopt.py"
    ct = (layers / "quantization" / "compressed_tensors" / "compressed_tensors_moe" /
          "compressed_tensors_moe_w4a4_nvfp4.py")
    ns["methods"] = {
        "modelopt": (common.exec_method(modelopt, "ModelOptNvFp4FusedMoE", "process_weights_after_loading", ns),
                     common.exec_method(modelopt, "ModelOptNvFp4FusedMoE", "get_fused_moe_quant_config", ns)),
        "compressed-tensors": (common.exec_method(ct, "CompressedTensorsW4A4Nvfp4MoEMethod", "process_weights_after_loading", ns),
                               common.exec_method(ct, "CompressedTensorsW4A4Nvfp4MoEMethod", "get_fused_moe_quant_config", ns)),
    }

    # The experts classes, per backend.
    common.exec_top_level(experts / "trtllm_nvfp4_moe.py", ["TrtLlmNvFp4ExpertsBase"], ns)
    B = ns["NvFp4MoeBackend"]
    ns["experts"] = {
        B.FLASHINFER_TRTLLM: ns["TrtLlmNvFp4ExpertsBase"],
        B.FLASHINFER_CUTLASS: experts_record_class(
            common.exec_method(experts / "flashinfer_cutlass_moe.py", "FlashInferExperts", "process_weights_after_loading", ns)),
        B.VLLM_CUTLASS: experts_record_class(
            common.exec_method(experts / "cutlass_moe.py", "CutlassExpertsFp4", "process_weights_after_loading", ns)),
        B.FLASHINFER_CUTEDSL: experts_record_class(
            common.exec_method(experts / "flashinfer_cutedsl_moe.py", "FlashInferCuteDSLExperts",
                               "process_weights_after_loading", ns)),
        B.FLASHINFER_CUTEDSL_BATCHED: experts_record_class(
            common.exec_method(experts / "flashinfer_cutedsl_batched_moe.py", "FlashInferCuteDSLBatchedExperts",
                               "process_weights_after_loading", ns)),
        B.FLASHINFER_B12X: experts_record_class(
            common.exec_method(experts / "flashinfer_b12x_moe.py", "FlashInferB12xExperts", "process_weights_after_loading",
                               ns)),
        # MarlinExperts and Nvfp4QuantizationEmulationTritonExperts inherit the modular kernel's
        # empty process_weights_after_loading.
        B.MARLIN: experts_record_class(lambda self, layer: None),
        B.EMULATION: experts_record_class(lambda self, layer: None),
    }
    return ns


# ---------------------------------------------------------------------------------------------
# Storage bytes and safetensors dtypes (golden_common reads and writes the container)
# ---------------------------------------------------------------------------------------------

ST_DTYPES = {"U8": torch.uint8, "I32": torch.int32, "F32": torch.float32, "BF16": torch.bfloat16,
             "F16": torch.float16}
if hasattr(torch, "float8_e4m3fn"):
    ST_DTYPES["F8_E4M3"] = torch.float8_e4m3fn
ST_NAMES = {v: k for k, v in ST_DTYPES.items()}


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    return mx.storage_order(t).contiguous().view(torch.uint8).cpu() if t.ndim else t.reshape(1).view(torch.uint8).cpu()


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


# ---------------------------------------------------------------------------------------------
# The golden file
# ---------------------------------------------------------------------------------------------


class Golden:
    def __init__(self):
        self.tensors, self.layout_cases, self.layer_cases, self.patch_sets = {}, [], [], {}

    def put(self, key: str, t: torch.Tensor):
        assert key not in self.tensors, key
        self.tensors[key] = t.detach().contiguous().cpu()

    def add_layout_case(self, key, t, *, layout, input_key, note=""):
        """As make_mxfp4_goldens.Family.add_output."""
        self.put(key, storage_bytes(t))
        self.layout_cases.append({"output": key, "input": input_key, "layout": layout,
                                  "shape": [int(s) for s in t.shape], "stride": [int(s) for s in t.stride()],
                                  "dtype": dtype_name(t), "note": note})

    def save(self, out: Path, provenance: dict) -> Path:
        path = out / "golden_nvfp4.safetensors"
        meta = common.layer_golden_metadata(provenance, self.layer_cases, layout_cases=self.layout_cases,
                                            patch_sets=self.patch_sets)
        path.write_bytes(common.safetensors_bytes(self.tensors, meta, ST_NAMES))
        return path


def e4m3_codes(gen, shape, codes) -> torch.Tensor:
    """Random E4M3 bytes drawn from the list `codes`, as float8_e4m3fn."""
    table = torch.tensor(codes, dtype=torch.uint8)
    idx = torch.randint(0, len(codes), shape, generator=gen)
    return table[idx].view(mx_f8())


def mx_f8():
    return getattr(torch, "float8_e4m3fn", torch.uint8)


POSITIVE_E4M3 = list(range(0x00, 0x7F))      # +0 .. 448
NORMAL_OR_ZERO_E4M3 = [0] + list(range(0x08, 0x7F))  # what Marlin's S0E5M3 keeps


# ---------------------------------------------------------------------------------------------
# Layout cases
# ---------------------------------------------------------------------------------------------

def swizzle_id(rows):
    return f"vllm.swizzle_blockscale(rows={rows},sf=128x4,{VLLM})"


def reorder_id(rows):
    return f"vllm.reorder_w13_rows(rows={rows},{VLLM})"


def trtllm_weight_id(rows):
    return f"flashinfer.trtllm_shuffle_matrix_a(rows={rows},epilogue_tile_m=128,{FI})"


def trtllm_scale_id(rows):
    return f"flashinfer.trtllm_shuffle_matrix_sf_a(rows={rows},epilogue_tile_m=128,sf=128x4,{FI})"


MARLIN_SCALE_ID = f"vllm.nvfp4_marlin_process_scales(group_size=16,{VLLM})"


def layout_cases(ns, g: Golden, gen, dev):
    E = 2
    f8 = mx_f8()
    # swizzle_blockscale alone: rows and columns that pad (130 -> 256, 5 -> 8) and that do not.
    for m, c in [(130, 5), (256, 8), (64, 3), (384, 12)]:
        key = f"sf/m{m}_c{c}"
        s = e4m3_codes(gen, (E, m, c), POSITIVE_E4M3)
        g.put(key, s)
        g.add_layout_case(f"{key}/swizzle_blockscale", ns["swizzle_blockscale"](s.to(dev)), layout=swizzle_id("identity"),
                          input_key=key)

    # FlashInfer CUTLASS / b12x: reorder_w1w3_to_w3w1 on weight and scale, then the swizzle.
    two_i, h = 192, 48
    w = mx.random_bytes(gen, (E, two_i, h // 2))
    s = e4m3_codes(gen, (E, two_i, h // 16), POSITIVE_E4M3)
    g.put("w31/w", w), g.put("w31/s", s)
    rw, rs = ns["reorder_w1w3_to_w3w1"](w.clone().to(dev), s.clone().to(dev))
    g.add_layout_case("w31/w/reorder", rw, layout=reorder_id("swap_halves"), input_key="w31/w")
    g.add_layout_case("w31/s/reorder", rs, layout=reorder_id("swap_halves"), input_key="w31/s")
    g.add_layout_case("w31/s/swizzle", ns["swizzle_blockscale"](rs), layout=swizzle_id("swap_halves"), input_key="w31/s")

    # CuteDSL: [up; gate] (from stacked or, for SWIGLUOAI, interleaved rows), then 64-row groups.
    act = ns["MoEActivation"]
    for two_i, h in [(256, 32), (384, 16)]:
        tag = f"cutedsl/r{two_i}_h{h}"
        w = mx.random_bytes(gen, (E, two_i, h // 2))
        s = e4m3_codes(gen, (E, two_i, h // 16), POSITIVE_E4M3)
        g.put(f"{tag}/w", w), g.put(f"{tag}/s", s)
        for a, rows in ((act.SILU, "cutedsl_w31_interleave64"), (act.SWIGLUOAI, "cutedsl_deinterleave_interleave64")):
            rw, rs = ns["reorder_w13_to_w31_for_flashinfer_cutedsl"](a, w.to(dev), s.to(dev))
            rw = ns["interleave_linear_and_gate"](rw, group_size=64, dim=1)
            rs = ns["interleave_linear_and_gate"](rs, group_size=64, dim=1)
            g.add_layout_case(f"{tag}/{a.value}/w", rw, layout=reorder_id(rows), input_key=f"{tag}/w")
            g.add_layout_case(f"{tag}/{a.value}/s", ns["swizzle_blockscale"](rs), layout=swizzle_id(rows),
                              input_key=f"{tag}/s")

    # TRT-LLM: vLLM's reorder_w1w3_to_w3w1 and prepare_static_weights_for_trtllm_fp4_moe over
    # FlashInfer's permute indices.
    # (Gated only: its w2 is the non-gated w13's row order, identity. The sizes are the smallest
    # the shuffles take: rows a multiple of 128.)
    for gated, inter, hidden in [(True, 64, 128)]:
        tag = f"trtllm/{'gated' if gated else 'plain'}_i{inter}_h{hidden}"
        rows = (2 if gated else 1) * inter
        w13 = mx.random_bytes(gen, (E, rows, hidden // 2))
        s13 = e4m3_codes(gen, (E, rows, hidden // 16), POSITIVE_E4M3)
        w2 = mx.random_bytes(gen, (E, hidden, inter // 2))
        s2 = e4m3_codes(gen, (E, hidden, inter // 16), POSITIVE_E4M3)
        for k, t in (("w13", w13), ("s13", s13), ("w2", w2), ("s2", s2)):
            g.put(f"{tag}/{k}", t)
        # prepare_nvfp4_moe_layer_for_fi_or_cutlass reorders gated w13 to [w3; w1] first.
        d13, ds13 = w13.clone().to(dev), s13.clone().to(dev)
        if gated:
            d13, ds13 = ns["reorder_w1w3_to_w3w1"](d13, ds13)
        o13, os13, o2, os2 = ns["prepare_static_weights_for_trtllm_fp4_moe"](
            d13, w2.to(dev), ds13, s2.to(dev), hidden_size=hidden, intermediate_size=inter,
            num_experts=E, is_gated_activation=gated)
        r = "w3w1_interleave" if gated else "identity"
        g.add_layout_case(f"{tag}/w13_out", o13, layout=trtllm_weight_id(r), input_key=f"{tag}/w13")
        g.add_layout_case(f"{tag}/s13_out", os13, layout=trtllm_scale_id(r), input_key=f"{tag}/s13",
                          note=mx.STAND_IN_128X4)
        g.add_layout_case(f"{tag}/w2_out", o2, layout=trtllm_weight_id("identity"), input_key=f"{tag}/w2")
        g.add_layout_case(f"{tag}/s2_out", os2, layout=trtllm_scale_id("identity"), input_key=f"{tag}/s2",
                          note=mx.STAND_IN_128X4)

    # Marlin NVFP4 scales at factor 1 (the factor is a value stage; the layer cases run it):
    # prepare_nvfp4_moe_layer_for_marlin's per-expert steps, scales in the model dtype (bf16).
    for n, k in [(192, 320), (64, 64), (128, 128)]:
        tag = f"marlin/n{n}_k{k}"
        s = e4m3_codes(gen, (E, n, k // 16), NORMAL_OR_ZERO_E4M3)
        g.put(tag, s)
        out = []
        for e in range(E):
            perm = ns["marlin_permute_scales"](s=s[e].to(dev).to(torch.bfloat16).T, size_k=k, size_n=n, group_size=16,
                                               is_a_8bit=False)
            out.append(ns["nvfp4_marlin_process_scales"](perm, scale_factor=1.0, a_dtype=torch.bfloat16)[0])
        g.add_layout_case(f"{tag}/marlin", torch.stack(out), layout=MARLIN_SCALE_ID, input_key=tag)


# ---------------------------------------------------------------------------------------------
# Layer cases: the samples through the methods' process_weights_after_loading
# ---------------------------------------------------------------------------------------------

# How each sample names one expert's projections (ERRATA 12, 13), and its method.
SAMPLES = {
    "modelopt-nvfp4": ("model.layers.0.mlp.experts.{e}.", ("gate_proj", "up_proj"), "down_proj", "modelopt"),
    "modelopt-w4a16-nvfp4": ("model.layers.0.mlp.experts.{e}.", ("gate_proj", "up_proj"), "down_proj", "modelopt"),
    "ct-nvfp4": ("model.layers.0.mlp.experts.{e}.", ("gate_proj", "up_proj"), "down_proj", "compressed-tensors"),
    "ct-nvfp4a16": ("model.layers.0.mlp.experts.{e}.", ("gate_proj", "up_proj"), "down_proj", "compressed-tensors"),
    "nemotron-h-nvfp4": ("backbone.layers.0.mixer.experts.{e}.", ("up_proj",), "down_proj", "modelopt"),
    "deepseek-v4-nvfp4": ("layers.0.ffn.experts.{e}.", ("w1", "w3"), "w2", "modelopt"),
}


def sample_config(samples: Path, sample: str) -> dict:
    return json.loads((samples / sample / "config.json").read_text())


def weight_only(config: dict) -> bool:
    """The methods' use_a16: ModelOpt's quant_algo W4A16_NVFP4, compressed-tensors without
    input_activations."""
    q = config.get("quantization_config", {})
    if q.get("quant_algo") == "W4A16_NVFP4":
        return True
    groups = q.get("config_groups", {})
    return q.get("quant_method") == "compressed-tensors" and all(g.get("input_activations") is None for g in groups.values())


def num_experts_of(config: dict) -> int:
    return config.get("num_experts") or config.get("n_routed_experts")


def load_rank(ckpt: dict, sample: str, config: dict, experts, input_experts, tp_rank: int, tp_size: int):
    """One rank's layer params as the method's create_weights allocates them, filled as FusedMoE's
    weight_loader fills them: the rank's experts `experts` (global ids), each projection's
    intermediate extent cut into tp_size slices (w1/w3 rows, w2 columns, their block scales
    alike), per-shard scalars in column 0 (w1) and 1 (w3). Input scales are allocated for
    `input_experts` (ModelOpt allocates every expert's for the FlashInfer backends)."""
    prefix, w13_projs, w2_proj, method = SAMPLES[sample]
    ct = method == "compressed-tensors"
    names = {"weight": "weight_packed" if ct else "weight", "scale_2": "weight_global_scale" if ct else "weight_scale_2",
             "input": "input_global_scale" if ct else "input_scale"}

    def get(e, proj, what):
        return ckpt.get(prefix.format(e=e) + proj + "." + what)

    def rows(t):  # a w1/w3 tensor's slice of this rank
        n = t.shape[0] // tp_size
        return t[tp_rank * n:(tp_rank + 1) * n]

    def cols(t):  # a w2 tensor's slice of this rank
        n = t.shape[1] // tp_size
        return t[:, tp_rank * n:(tp_rank + 1) * n]

    def stack(expert_ids, proj_list, what, cut=None):
        out = []
        for e in expert_ids:
            parts = [get(e, p, what) for p in proj_list]
            if any(p is None for p in parts):
                return None
            if parts[0].ndim > 1:
                out.append(torch.cat([cut(p) for p in parts], dim=0))
            else:
                out.append(torch.cat([p.reshape(-1) for p in parts]))
        return torch.stack(out)

    p = {}
    p["w13_weight_packed" if ct else "w13_weight"] = stack(experts, w13_projs, names["weight"], rows)
    p["w13_weight_scale"] = stack(experts, w13_projs, "weight_scale", rows)
    p["w13_weight_global_scale" if ct else "w13_weight_scale_2"] = stack(experts, w13_projs, names["scale_2"])
    p["w2_weight_packed" if ct else "w2_weight"] = stack(experts, [w2_proj], names["weight"], cols)
    p["w2_weight_scale"] = stack(experts, [w2_proj], "weight_scale", cols)
    p["w2_weight_global_scale" if ct else "w2_weight_scale_2"] = stack(experts, [w2_proj], names["scale_2"]).reshape(-1)
    a13 = stack(input_experts, w13_projs, names["input"])
    a2 = stack(input_experts, [w2_proj], names["input"])
    if a13 is None:
        # W4A16: create_weights still allocates the input scales (torch.empty, never loaded);
        # the Marlin path drops them unread. Ones stand for the uninitialized memory.
        a13 = torch.ones(len(input_experts), len(w13_projs), dtype=torch.float32)
        a2 = torch.ones(len(input_experts), dtype=torch.float32)
    p["w13_input_global_scale" if ct else "w13_input_scale"] = a13
    p["w2_input_global_scale" if ct else "w2_input_scale"] = a2.reshape(-1)
    return p


class Layer(torch.nn.Module):
    def _expert_routing_tables(self):
        return None


def run_rank(ns, case: dict, ckpt: dict, config: dict, rank: int, dev):
    """Runs the method's process_weights_after_loading for one rank of `case`; returns {role: tensor or None}."""
    sample = case["sample"]
    method_name = SAMPLES[sample][3]
    act = ns["MoEActivation"]
    gated = len(SAMPLES[sample][1]) == 2
    activation = act.SILU if gated else act.RELU2_NO_MUL
    params_dtype = torch.float16 if case["model_dtype"] == "float16" else torch.bfloat16
    backend = ns["NvFp4MoeBackend"][case["backend"]]
    world, ep = case["tp"], case["ep"]
    total = num_experts_of(config)
    if ep:  # FusedMoEParallelConfig with EP: every rank owns whole experts (linear placement), tp 1
        local = total // world
        experts, tp_rank, tp_size = list(range(rank * local, (rank + 1) * local)), 0, 1
    else:
        experts, tp_rank, tp_size = list(range(total)), rank, world
    use_global_sf = method_name == "modelopt" and ns["is_global_sf_supported_for_nvfp4_backend"](backend)
    input_experts = list(range(total)) if use_global_sf else experts
    params = load_rank(ckpt, sample, config, experts, input_experts, tp_rank, tp_size)
    hidden = params["w2_weight_scale"].shape[1]
    inter = params["w2_weight_scale"].shape[2] * 16
    swiglu_limit = config.get("swiglu_limit")

    layer = Layer()
    for name, t in params.items():
        layer.register_parameter(name, torch.nn.Parameter(t.to(dev), requires_grad=False))
    parallel = types.SimpleNamespace(enable_eplb=False, ep_rank=rank if ep else 0, ep_size=world if ep else 1,
                                     tp_rank=tp_rank, tp_size=tp_size, dp_size=1, use_batched_activation_format=False)
    moe = types.SimpleNamespace(is_act_and_mul=gated, activation=activation, moe_parallel_config=parallel,
                                hidden_dim=hidden, hidden_dim_unpadded=None, intermediate_size_per_partition=inter,
                                num_local_experts=len(experts), num_experts=total, experts_per_token=2,
                                routing_method=None, swiglu_limit=swiglu_limit, swiglu_alpha=None, swiglu_beta=None,
                                activation_situ_beta=None, activation_situ_linear_beta=None, in_dtype=params_dtype,
                                max_num_tokens=256, device=dev)
    layer.activation = activation
    layer.moe_config = moe
    layer.num_experts = len(experts)
    layer.hidden_size = hidden
    layer.intermediate_size_per_partition = inter
    layer.params_dtype = params_dtype
    if swiglu_limit is not None:
        layer.swiglu_limit = swiglu_limit

    pwal, get_qc = ns["methods"][method_name]
    method = types.SimpleNamespace(moe=moe, nvfp4_backend=backend, use_a16=case["use_a16"],
                                   experts_cls=ns["experts"][backend])
    method.get_fused_moe_quant_config = lambda layer: get_qc(method, layer)
    pwal(method, layer)
    experts_obj = method.moe_kernel.fused_experts

    roles = ["w13_weight", "w13_weight_scale", "w13_weight_scale_2", "w13_input_scale", "w2_weight", "w2_weight_scale",
             "w2_weight_scale_2", "w2_input_scale", "g1_scale_c", "gemm1_clamp_limit", "gemm1_beta", "gemm1_alpha"]
    out = {r: getattr(layer, r, None) for r in roles}
    if backend == ns["NvFp4MoeBackend"].FLASHINFER_B12X:
        out["fc2_input_scale"] = experts_obj._fc2_input_scale
    return out


# The deployments, as moepack's tests name them: (sample, patch set, target, moe_backend,
# model_dtype, tp, ep) and the vLLM backend moepack's oracle must pick for it
# (tests/convert/upstream_goldens_test.cpp checks that it does).
def dep(sample, target, backend, moe_backend="", patch="", model_dtype="", tp=1, ep=False):
    return {"sample": sample, "patch": patch, "target": target, "moe_backend": moe_backend,
            "model_dtype": model_dtype, "tp": tp, "ep": ep, "backend": backend}


DEPLOYMENTS = [
    # ModelOpt NVFP4, gated SiLU: every backend with its own layout.
    dep("modelopt-nvfp4", "sm100", "FLASHINFER_TRTLLM"),
    dep("modelopt-nvfp4", "sm120", "FLASHINFER_CUTLASS"),
    dep("modelopt-nvfp4", "sm110", "VLLM_CUTLASS"),
    dep("modelopt-nvfp4", "sm90", "MARLIN"),
    dep("modelopt-nvfp4", "sm90", "MARLIN", model_dtype="float16"),
    dep("modelopt-nvfp4", "sm100", "FLASHINFER_CUTEDSL", moe_backend="flashinfer_cutedsl"),
    dep("modelopt-nvfp4", "sm120", "FLASHINFER_B12X", moe_backend="flashinfer_b12x"),
    dep("modelopt-nvfp4", "sm100", "EMULATION", moe_backend="emulation"),
    # Tensor parallel (each rank's slice of the intermediate extent) and expert parallel (ModelOpt
    # allocates every expert's input scales for the FlashInfer backends).
    dep("modelopt-nvfp4", "sm100", "FLASHINFER_TRTLLM", tp=2),
    dep("modelopt-nvfp4", "sm120", "FLASHINFER_CUTLASS", tp=2),
    dep("modelopt-nvfp4", "sm100", "FLASHINFER_TRTLLM", tp=2, ep=True),
    dep("modelopt-nvfp4", "sm100", "EMULATION", moe_backend="emulation", tp=2, ep=True),
    # compressed-tensors NVFP4 (global scales as divisors).
    dep("ct-nvfp4", "sm100", "FLASHINFER_TRTLLM"),
    dep("ct-nvfp4", "sm110", "VLLM_CUTLASS"),
    dep("ct-nvfp4", "sm90", "MARLIN"),
    dep("ct-nvfp4", "sm100", "FLASHINFER_CUTEDSL", moe_backend="flashinfer_cutedsl"),
    dep("ct-nvfp4", "sm120", "FLASHINFER_B12X", moe_backend="flashinfer_b12x"),
    dep("ct-nvfp4", "sm100", "EMULATION", moe_backend="emulation"),
    # W4A16.
    dep("modelopt-w4a16-nvfp4", "sm90", "MARLIN"),
    dep("ct-nvfp4a16", "sm90", "MARLIN"),
    # Nemotron-H: non-gated relu2.
    dep("nemotron-h-nvfp4", "sm100", "FLASHINFER_TRTLLM"),
    dep("nemotron-h-nvfp4", "sm120", "FLASHINFER_CUTLASS"),
    dep("nemotron-h-nvfp4", "sm110", "VLLM_CUTLASS"),
    dep("nemotron-h-nvfp4", "sm90", "MARLIN"),
    dep("nemotron-h-nvfp4", "sm100", "FLASHINFER_CUTEDSL", moe_backend="flashinfer_cutedsl"),
    dep("nemotron-h-nvfp4", "sm120", "FLASHINFER_B12X", moe_backend="flashinfer_b12x"),
    # DeepSeek-V4 NVFP4: swiglu_limit (TRT-LLM folds the clamp by g1_alphas).
    dep("deepseek-v4-nvfp4", "sm100", "FLASHINFER_TRTLLM"),
    dep("deepseek-v4-nvfp4", "sm100", "FLASHINFER_TRTLLM", tp=2),
    dep("deepseek-v4-nvfp4", "sm110", "VLLM_CUTLASS"),
    # Seeded adversarial scales (make_patches).
    dep("modelopt-nvfp4", "sm100", "FLASHINFER_TRTLLM", patch="adversarial"),
    dep("modelopt-nvfp4", "sm120", "FLASHINFER_CUTLASS", patch="adversarial"),
    dep("modelopt-nvfp4", "sm110", "VLLM_CUTLASS", patch="adversarial"),
    dep("modelopt-nvfp4", "sm90", "MARLIN", patch="adversarial"),
    dep("modelopt-nvfp4", "sm90", "MARLIN", patch="adversarial", tp=2),
    dep("modelopt-nvfp4", "sm90", "MARLIN", patch="adversarial", model_dtype="float16"),
    dep("modelopt-nvfp4", "sm120", "FLASHINFER_B12X", moe_backend="flashinfer_b12x", patch="adversarial"),
    dep("modelopt-nvfp4", "sm100", "EMULATION", moe_backend="emulation", patch="adversarial"),
    dep("ct-nvfp4", "sm100", "FLASHINFER_TRTLLM", patch="random_scales"),
    dep("ct-nvfp4", "sm100", "FLASHINFER_TRTLLM", patch="random_scales", tp=2, ep=True),
    dep("ct-nvfp4", "sm110", "VLLM_CUTLASS", patch="random_scales"),
    dep("ct-nvfp4", "sm90", "MARLIN", patch="random_scales"),
    dep("ct-nvfp4", "sm120", "FLASHINFER_B12X", moe_backend="flashinfer_b12x", patch="random_scales"),
    dep("ct-nvfp4", "sm100", "EMULATION", moe_backend="emulation", patch="random_scales"),
    dep("ct-nvfp4", "sm100", "EMULATION", moe_backend="emulation", patch="random_scales", tp=2, ep=True),
    # compressed-tensors NVFP4 on FlashInfer CUTLASS (SM120): its input-scale maxima and the
    # weight_scale_2 products that fold them.
    dep("ct-nvfp4", "sm120", "FLASHINFER_CUTLASS"),
    dep("ct-nvfp4", "sm120", "FLASHINFER_CUTLASS", patch="random_scales"),
    dep("ct-nvfp4", "sm120", "FLASHINFER_CUTLASS", patch="random_scales", tp=2),
]

# Block scales whose values vLLM rewrites (the b12x bake-in, Marlin's factor and S0E5M3), stored
# whole for the patched scales.
FULL_ROLES = {(p, b): ["w13_weight_scale", "w2_weight_scale"]
              for p in ("adversarial", "random_scales") for b in ("FLASHINFER_B12X", "MARLIN")}


def make_patches(variant: str, sample: str, ckpt: dict, config: dict, gen) -> dict:
    """Seeded replacements for some of a sample's tensors (same names, shapes, dtypes).

    modelopt-nvfp4 "adversarial": block scales drawn from the E4M3 codes up to 28 for w13 and
    0.875 for w2 (so Marlin's factors are 16 and 512; each TP half of two has its own),
    subnormals and zeros among them; per-expert
    weight_scale_2 that differ between gate and up (ERRATA 2) and range from 2^-12 to 15.3 (the
    b12x bake-in rounds to subnormal, normal and near-top E4M3; 1.0625 = 17/16 makes exact ties);
    input scales different per expert and half. ct-nvfp4 "random_scales": global scales that are
    not powers of two, so vLLM's fp32 reciprocals round."""
    prefix, w13_projs, w2_proj, _method = SAMPLES[sample]
    patches = {}
    if variant == "adversarial":
        # Rows (w13) or columns (w2) of the second TP half draw smaller codes, so a rank of two
        # has its own Marlin factor: w13 up to 28 and 7.5 (factors 16 and 32), w2 up to 0.875 and
        # 0.234375 (512 and 1024).
        w13_codes, w13_low = list(range(0x00, 0x5F)), list(range(0x00, 0x50))
        w2_codes, w2_low = list(range(0x00, 0x37)), list(range(0x00, 0x28))
        scale_2 = [(2.0 ** -12, 0.37), (0.0137, 0.0137), (1.0625, 2.5), (15.3, 1.0)]
        inputs = [(0.011, 0.0093), (0.0625, 0.125), (0.3, 0.0171), (0.00052, 0.0009)]
        for e in range(num_experts_of(config)):
            for i, proj in enumerate(w13_projs):
                name = prefix.format(e=e) + proj + "."
                rows, cols = ckpt[name + "weight_scale"].shape
                s = torch.cat([e4m3_codes(gen, (rows // 2, cols), w13_codes), e4m3_codes(gen, (rows - rows // 2, cols), w13_low)])
                s.view(torch.uint8)[e % 2, e] = 0x5E  # each half's largest code, in every expert
                s.view(torch.uint8)[rows // 2 + e % 2, e] = 0x4F
                patches[name + "weight_scale"] = s
                patches[name + "weight_scale_2"] = torch.tensor(scale_2[e][i], dtype=torch.float32).reshape(
                    ckpt[name + "weight_scale_2"].shape)
                patches[name + "input_scale"] = torch.tensor(inputs[e][i], dtype=torch.float32).reshape(
                    ckpt[name + "input_scale"].shape)
            name = prefix.format(e=e) + w2_proj + "."
            rows, cols = ckpt[name + "weight_scale"].shape
            s = torch.cat([e4m3_codes(gen, (rows, cols // 2), w2_codes), e4m3_codes(gen, (rows, cols - cols // 2), w2_low)], 1)
            s.view(torch.uint8)[e, 0] = 0x36
            s.view(torch.uint8)[e, cols // 2] = 0x27
            patches[name + "weight_scale"] = s.contiguous()
            patches[name + "weight_scale_2"] = torch.tensor(3.0 ** -(e + 3), dtype=torch.float32).reshape(
                ckpt[name + "weight_scale_2"].shape)
            patches[name + "input_scale"] = torch.tensor(0.07 / (e + 1), dtype=torch.float32).reshape(
                ckpt[name + "input_scale"].shape)
    elif variant == "random_scales":
        for e in range(num_experts_of(config)):
            for proj in list(w13_projs) + [w2_proj]:
                name = prefix.format(e=e) + proj + "."
                for what, low, high in (("weight_global_scale", 300.0, 9000.0), ("input_global_scale", 3.0, 700.0)):
                    old = ckpt[name + what]
                    v = low + (high - low) * torch.rand(old.shape, generator=gen, dtype=torch.float64)
                    patches[name + what] = v.to(torch.float32)
    else:
        raise SystemExit(f"unknown patch set {variant}")
    for name, t in patches.items():
        assert t.dtype == ckpt[name].dtype and tuple(t.shape) == tuple(ckpt[name].shape), name
    return patches


def role_note(backend: str, role: str) -> str:
    if backend == "FLASHINFER_TRTLLM" and role in ("w13_weight_scale", "w2_weight_scale"):
        return mx.STAND_IN_128X4
    return ""


def record_rank(g: Golden, ns, case: dict, ckpt: dict, config: dict, rank: int, dev) -> dict:
    outputs = run_rank(ns, case, ckpt, config, rank, dev)
    full_roles = FULL_ROLES.get((case["patch"], case["backend"]), [])
    recorded = []
    for role, t in outputs.items():
        if t is None:
            continue
        if case["backend"] == "MARLIN" and role in ("w13_weight", "w2_weight"):
            continue  # stand-in (gptq_marlin_repack)
        b = storage_bytes(t)
        entry = {"role": role, "shape": [int(s) for s in t.shape], "dtype": dtype_name(t), "bytes": int(b.numel()),
                 "note": role_note(case["backend"], role)}
        common.keep_whole_or_digest(g, entry, b, f"layer/{case['name']}/{rank}/{role}", role in full_roles or b.numel() <= FULL_BYTES)
        recorded.append(entry)
    return {"rank": rank, "outputs": recorded}


def layer_cases(ns, g: Golden, samples: Path, gen, dev, errors: list):
    data = {}
    for sample in sorted({d["sample"] for d in DEPLOYMENTS}):
        model = (samples / sample / "model.safetensors").read_bytes()
        data[sample] = (common.parse_safetensors(model, ST_DTYPES), sample_config(samples, sample), common.sha256_hex(model))

    # The patch sets, stored once: "golden_patch_sets" maps "SAMPLE/SET" to {checkpoint tensor: golden key}.
    patched = {}
    for sample, variant in sorted({(d["sample"], d["patch"]) for d in DEPLOYMENTS if d["patch"]}):
        ckpt, config, _ = data[sample]
        patches = make_patches(variant, sample, ckpt, config, gen)
        keys = {}
        for i, name in enumerate(sorted(patches)):
            keys[name] = f"patch/{variant}/{i}"
            g.put(keys[name], patches[name])
        g.patch_sets[f"{sample}/{variant}"] = keys
        patched[(sample, variant)] = dict(ckpt, **patches)

    for d in DEPLOYMENTS:
        ckpt, config, sha = data[d["sample"]]
        if d["patch"]:
            ckpt = patched[(d["sample"], d["patch"])]
        parallel = f"tp{d['tp']}" + ("ep" if d["ep"] else "") if d["tp"] > 1 else ""
        name = "_".join(x for x in (d["sample"], d["patch"], d["target"], d["moe_backend"] or "auto", d["model_dtype"],
                                    parallel) if x)
        case = dict(d, name=name, sample_sha256=sha, use_a16=weight_only(config), method=SAMPLES[d["sample"]][3])
        try:
            case["ranks"] = [record_rank(g, ns, case, ckpt, config, r, dev) for r in range(d["tp"])]
            g.layer_cases.append(case)
        except Exception as exc:  # keep the other cases; report this one
            common.report_failure(errors, name, exc)


# ---------------------------------------------------------------------------------------------


def main():
    ap = common.argument_parser(__doc__)
    ap.add_argument("--out", type=Path, help="where golden_nvfp4.safetensors goes (omit for a dry run)")
    args = ap.parse_args()

    compat = []
    if not hasattr(torch, "float8_e4m3fn"):
        torch.float8_e4m3fn = torch.uint8
        compat.append("torch<2.1: float8_e4m3fn aliased to uint8 (values wrong; plumbing only)")
    if not hasattr(torch, "accelerator"):
        torch.accelerator = types.SimpleNamespace(current_device_index=lambda: "cpu")
        compat.append("torch without torch.accelerator: device index 'cpu'")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu":
        torch.Tensor.cuda = lambda self, *a, **k: self
        compat.append("no CUDA: Tensor.cuda() is the identity (swizzle_blockscale's .cuda())")

    ns = vllm_namespace(args.vendor)
    mx.install_flashinfer_stubs(mx.flashinfer_namespace(args.vendor))
    provenance = {"vllm": VLLM, "flashinfer": FI, "seed": SEED, "torch": torch.__version__, "device": dev,
                  "compat": compat}
    g = Golden()
    errors = []
    gen = torch.Generator().manual_seed(SEED)
    try:
        layout_cases(ns, g, gen, dev)
    except Exception as exc:
        common.report_failure(errors, "layout cases", exc)
    layer_cases(ns, g, args.samples, torch.Generator().manual_seed(SEED + 1), dev, errors)
    summary = {"provenance": provenance, "layout_cases": len(g.layout_cases), "layer_cases": len(g.layer_cases),
               "bytes": sum(t.numel() * t.element_size() for t in g.tensors.values()), "errors": errors}
    return common.finish(summary, errors, args.out, lambda out: g.save(out, provenance))


if __name__ == "__main__":
    sys.exit(main())
