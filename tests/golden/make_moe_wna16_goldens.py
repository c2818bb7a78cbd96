#!/usr/bin/env python3
"""Golden bytes for moepack's MoeWNA16 conversions (`--quantization moe_wna16` on a GPTQ or AutoAWQ
checkpoint), produced by running the REAL upstream code: vLLM's MoeWNA16Method with its own weight
loader wrapper, on the TRITON backend (TritonWNA16Experts), the only one its oracle leaves on CUDA
(Marlin and emulation reject "the MoeWNA16 checkpoint layout").

Tooling, not part of the build; the companion of make_wna16_goldens.py, whose namespace, loader and
checkpoint helpers it imports, and run the same way. No compiled op runs here (the TRITON branch of
convert_to_wna16_moe_kernel_format is a uint8 view), so it needs only PyTorch; it runs on the GPU
when there is one, as vLLM loads the weights there. The folder of upstream sources is
make_wna16_goldens.py's plus two files, from vllm-project/vllm @ e9d1398d9, at their own paths:

  VENDOR/vllm/vllm/model_executor/layers/quantization/{moe_wna16.py,base_config.py}

  python3 tests/golden/make_moe_wna16_goldens.py --vendor VENDOR --samples samples --out OUTDIR

What runs, unchanged (parsed out of the pinned files and executed as make_wna16_goldens.py does):
  * MoeWNA16Config: `from_config` (has_zp from GPTQ's `sym` or AWQ's `zero_point`), `__init__`
    (its AWQ capability check against AutoAWQConfig.get_min_capability), over
    QuantizationConfig.get_from_keys / get_from_keys_or from base_config.py;
  * MoeWNA16Method: `create_weights` (the group_size_div_factor loop that halves the group size
    until it divides the rank's intermediate size and the hidden size, the N-first uint8
    parameters, GPTQ's empty (0,) int32 g_idx and, without zero points, qzeros placeholders),
    `get_weight_loader` (convert_awq_tensor: nibbles unpacked, AWQ's order undone, transposed,
    repacked; GPTQ's transpose and uint8 view, its qzeros + 1; the repeat_interleave of scales and
    zero points by group_size_div_factor; the zero-point slicing by rank), wrapping
    RoutedExperts.weight_loader with all its helpers, and `process_weights_after_loading` (which
    runs convert_to_wna16_moe_kernel_format's TRITON branch and replace_parameter).
What the layer then holds for the kernel (w13/w2 qweight, scales, qzeros, g_idx) is recorded by
role and rank in golden_moe_wna16.safetensors, in the schema of golden_wna16.safetensors (metadata
"golden_layer_cases", each case with "quantization": "moe_wna16"), checked by
tests/convert/upstream_goldens_test.cpp.

Stand-ins, as in make_wna16_goldens.py: the method's constructor (it runs vLLM's WNA16 oracle) is
replaced by the fields it sets for TRITON (the test checks that moepack's oracle picks TRITON);
`_setup_kernel` does nothing; get_tp_group().device is the device used here and
get_tensor_model_parallel_rank() the rank being loaded; current_platform answers capability 9.0
(SM90, the deployment of every case); the model loader is the Qwen3-MoE expert mapping, tensors in
name order. vLLM's model loader moves on when a weight loader answers False (MoeWNA16's for g_idx,
and for qzeros without zero points); so does this one, for those names only.
"""

import json
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as common  # noqa: E402
import make_wna16_goldens as w  # noqa: E402  (vllm_namespace, checkpoints, Golden, safetensors dtypes)

SEED = 20251127
VLLM = common.VLLM
ROLES = ["w13_qweight", "w2_qweight", "w13_scales", "w2_scales", "w13_qzeros", "w2_qzeros", "w13_g_idx", "w2_g_idx"]

# Checkpoints beyond the samples, made by make_wna16_goldens.synth_checkpoint (random codes and,
# for AWQ, random zero points) and stored whole in the golden file.
SYNTHETIC = {
    # AWQ groups of 32, I = 192: three groups per w2 row at TP 2.
    "awq-int4-g32-h128-i192": ("awq-int4", dict(method="awq", bits=4, group=32, hidden=128, inter=192, experts=2)),
    # AWQ two groups of 128 along H = 256 with random zero points: at TP 4 the rank's intermediate
    # size (64) halves the group size (group_size_div_factor 2) for w13's and w2's scales and
    # zero points alike.
    "awq-int4-g128-h256-i256": ("awq-int4", dict(method="awq", bits=4, group=128, hidden=256, inter=256, experts=2)),
    # GPTQ int4 two groups of 128 along H: div factor 2 at TP 4.
    "gptq-int4-g128-h256-i256": ("gptq-int4", dict(method="gptq", bits=4, group=128, hidden=256, inter=256, experts=2)),
    # GPTQ int8 groups of 64, I = 192: div factor 2 at TP 2 (96 per rank).
    "gptq-int8-g64-h128-i192": ("gptq-int8", dict(method="gptq", bits=8, group=64, hidden=128, inter=192, experts=2)),
}

# (checkpoint, tp): every case is sm90, --quantization moe_wna16, TRITON. The samples have
# H = I = 128 and groups of 128: TP 2 gives group_size_div_factor 2, TP 4 gives 4.
DEPLOYMENTS = [
    ("awq-int4", 1), ("awq-int4", 2), ("awq-int4", 4), ("gptq-int4", 1), ("gptq-int4", 2), ("gptq-int8", 1), ("gptq-int8", 2),
    ("awq-int4-g32-h128-i192", 1), ("awq-int4-g32-h128-i192", 2), ("awq-int4-g128-h256-i256", 2),
    ("awq-int4-g128-h256-i256", 4), ("gptq-int4-g128-h256-i256", 4), ("gptq-int8-g64-h128-i192", 1),
    ("gptq-int8-g64-h128-i192", 2),
]


class QuantizationConfig(w.QuantizationConfig):
    """vLLM's QuantizationConfig base, as far as MoeWNA16Config uses it; get_from_keys and
    get_from_keys_or are base_config.py's own (set in moe_wna16_namespace)."""


def moe_wna16_namespace(vendor: Path, dev: str) -> dict:
    ns = w.vllm_namespace(vendor)
    quant = vendor / "vllm" / "vllm" / "model_executor" / "layers" / "quantization"
    mns = dict(ns["methods"]["compressed-tensors"].create_weights.__globals__)  # replace_parameter of model_executor/utils.py
    mns.update(QuantizationConfig=QuantizationConfig, current_platform=types.SimpleNamespace(
        get_device_capability=lambda: types.SimpleNamespace(to_int=lambda: 90)),
        get_tp_group=lambda: types.SimpleNamespace(device=torch.device(dev)), get_tensor_model_parallel_rank=lambda: 0,
        FusedMoEMethodBase=object)
    for name in ("get_from_keys", "get_from_keys_or"):  # get_from_keys_or calls QuantizationConfig.get_from_keys
        setattr(QuantizationConfig, name, staticmethod(common.exec_method(quant / "base_config.py", "QuantizationConfig", name, mns)))
    common.exec_top_level(quant / "moe_wna16.py", ["MoeWNA16Config"], mns)
    path = quant / "moe_wna16.py"
    body = {m: common.exec_method(path, "MoeWNA16Method", m, mns) for m in ("create_weights", "process_weights_after_loading")}
    body["get_weight_loader"] = staticmethod(common.exec_method(path, "MoeWNA16Method", "get_weight_loader", mns))
    body["_setup_kernel"] = lambda self, layer: None
    ns["MoeWNA16Method"] = mns["MoeWNA16Method"] = type("MoeWNA16Method", (), body)  # create_weights names its class
    ns["moe_wna16_globals"] = mns
    return ns


def run_rank(ns, ckpt: dict, config: dict, tp: int, rank: int, dev):
    """One rank's layer: MoeWNA16Config.from_config, create_weights, the wrapped weight loader fed
    every expert tensor, process_weights_after_loading. Returns the layer."""
    hidden = config["hidden_size"]
    inter = config.get("moe_intermediate_size") or config["intermediate_size"]
    experts = config["num_experts"]
    per_rank = inter // tp
    mns = ns["moe_wna16_globals"]
    mns["get_tensor_model_parallel_rank"] = lambda: rank
    qc = mns["MoeWNA16Config"].from_config(config["quantization_config"])
    parallel = types.SimpleNamespace(tp_size=tp, tp_rank=rank, ep_size=1, ep_rank=0, dp_size=1, enable_eplb=False,
                                     use_batched_activation_format=False)
    moe = types.SimpleNamespace(is_act_and_mul=True, w13_num_shards=2, tp_rank=rank, tp_size=tp, moe_parallel_config=parallel,
                                hidden_dim=hidden, intermediate_size_per_partition=per_rank,
                                intermediate_size_per_partition_unpadded=per_rank, intermediate_size=inter,
                                num_local_experts=experts, num_experts=experts)
    method = ns["MoeWNA16Method"]()
    # MoeWNA16Method.__init__ for the TRITON backend (its oracle's pick on SM90).
    method.moe, method.quant_config = moe, qc
    method.wna16_backend, method.experts_cls = ns["WNA16MoEBackend"].TRITON, None
    layer = ns["layer_class"]()
    layer.moe_config = moe
    layer.quant_method = method
    layer.quant_config = qc
    layer._loaded_expert_biases = set()
    layer.hidden_size, layer.intermediate_size_per_partition = hidden, per_rank
    layer.num_experts = experts
    with torch.device(dev):
        method.create_weights(layer, num_experts=experts, hidden_size=hidden, intermediate_size_per_partition=per_rank,
                              params_dtype=torch.bfloat16, weight_loader=layer.weight_loader, unpadded_hidden_size=None,
                              global_num_experts=experts, intermediate_size_full=inter)
    for name in sorted(ckpt):
        if ".experts." not in name:
            continue
        e, proj, suffix = name.split(".experts.", 1)[1].split(".", 2)
        shard = dict(w.PROJS)[proj]
        param_name = ("w2_" if shard == "w2" else "w13_") + suffix
        param = getattr(layer, param_name)
        vllm_name = name.split(".experts.", 1)[0] + ".experts." + param_name
        ok = param.weight_loader(param, ckpt[name], vllm_name, shard_id=shard, expert_id=int(e), return_success=True)
        skipped = "g_idx" in suffix or (suffix == "qzeros" and not qc.has_zp)
        if ok == skipped:
            raise RuntimeError(f"{name}: MoeWNA16's weight loader answered {ok} for {param_name}")
    method.process_weights_after_loading(layer)
    return layer


def record_rank(g, case_name: str, layer, rank: int) -> dict:
    recorded = []
    for role in ROLES:
        t = getattr(layer, role, None)
        if t is None:
            continue
        b = w.storage_bytes(t.data)
        entry = {"role": role, "shape": [int(s) for s in t.shape], "dtype": str(t.dtype).replace("torch.", ""), "bytes": int(b.numel())}
        common.keep_whole_or_digest(g, entry, b, f"layer/{case_name}/{rank}/{role}", b.numel() <= w.WHOLE_BYTES)
        recorded.append(entry)
    others = sorted(f"{n} {str(p.dtype).replace('torch.', '')}{list(p.shape)}" for n, p in layer.named_parameters()
                    if n not in ROLES and n not in ("w13_weight", "w2_weight"))
    return {"rank": rank, "outputs": recorded, "not_recorded": others, "group_size": int(layer.group_size),
            "group_size_div_factor": int(layer.group_size_div_factor)}


def layer_cases(ns, g, samples: Path, gen, dev, errors: list):
    sources = {}
    for name in sorted({d[0] for d in DEPLOYMENTS}):
        if name in SYNTHETIC:
            base, spec = SYNTHETIC[name]
            tensors, q = w.synth_checkpoint(gen, spec)
            data = common.safetensors_bytes(tensors, {"format": "pt"}, w.ST_NAMES)
            config_text = w.synth_config(samples, base, spec, q)
            key = f"checkpoint/{name}/model.safetensors"
            g.put(key, torch.frombuffer(bytearray(data), dtype=torch.uint8))
            g.checkpoints[name] = {"config": config_text, "model": key}
            sources[name] = (data, json.loads(config_text), "")
        else:
            data = (samples / name / "model.safetensors").read_bytes()
            sources[name] = (data, json.loads((samples / name / "config.json").read_text()), name)
    for name, tp in DEPLOYMENTS:
        data, config, sample = sources[name]
        case = {"name": f"{name}_sm90_moe_wna16" + (f"_tp{tp}" if tp > 1 else ""), "sample": sample,
                "checkpoint": "" if sample else name, "sha256": common.sha256_hex(data), "target": "sm90",
                "moe_backend": "", "quantization": "moe_wna16", "model_dtype": "", "tp": tp, "ep": False, "backend": "TRITON",
                "method": "moe_wna16/" + config["quantization_config"]["quant_method"], "ranks": [], "notes": []}
        try:
            ckpt = common.parse_safetensors(data, w.ST_DTYPES)
            for rank in range(tp):
                case["ranks"].append(record_rank(g, case["name"], run_rank(ns, ckpt, config, tp, rank, dev), rank))
            g.layer_cases.append(case)
        except Exception as exc:  # keep the other cases; report this one
            common.report_failure(errors, case["name"], exc)


def main():
    ap = common.argument_parser(__doc__)
    ap.add_argument("--out", type=Path, help="where golden_moe_wna16.safetensors goes (omit for a dry run)")
    args = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    ns = moe_wna16_namespace(args.vendor, dev)
    provenance = {"vllm": VLLM, "seed": SEED, "torch": torch.__version__, "device": dev,
                  "gpu": torch.cuda.get_device_name() if dev == "cuda" else "", "compat": []}
    g = w.Golden()
    errors = []
    layer_cases(ns, g, args.samples, torch.Generator().manual_seed(SEED), dev, errors)
    summary = {"provenance": provenance, "layer_cases": len(g.layer_cases), "errors": errors,
               "div_factors": {c["name"]: [r["group_size_div_factor"] for r in c["ranks"]] for c in g.layer_cases},
               "not_recorded": sorted({x for c in g.layer_cases for r in c["ranks"] for x in r["not_recorded"]})}

    def save(out: Path) -> Path:
        path = out / "golden_moe_wna16.safetensors"
        meta = common.layer_golden_metadata(provenance, g.layer_cases, checkpoints=g.checkpoints)
        path.write_bytes(common.safetensors_bytes(g.tensors, meta, w.ST_NAMES))
        return path

    return common.finish(summary, errors, args.out, save)


if __name__ == "__main__":
    sys.exit(main())
