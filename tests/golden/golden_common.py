"""What the golden generators (make_*_goldens.py) share: the pinned upstream versions, running
pinned upstream definitions out of the vendored sources, the safetensors container, recording a
layer's outputs, and the command line and summary every script has.

Tooling, not part of the build. The generators need PyTorch; this module imports it only where a
helper handles tensors, so the rest can be imported and checked on a machine without it.
"""

import argparse
import ast
import contextlib
import hashlib
import json
import struct
import sys
import traceback
import types
import typing
from pathlib import Path

# The upstream versions the goldens were made from (the tests check the files' provenance).
VLLM = "e9d1398d9"
FLASHINFER = "v0.6.17"

# ---------------------------------------------------------------------------------------------
# Running upstream definitions
# ---------------------------------------------------------------------------------------------


def exec_definitions(path: Path, names, namespace: dict) -> dict:
    """Executes the named top-level definitions (def, class, NAME = ...) of `path`, in file order,
    in `namespace`. Decorators and bodies run unchanged."""
    tree = ast.parse(path.read_text(), filename=str(path))
    wanted, found = set(names), set()
    for node in tree.body:
        name = None
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name = node.target.id
        if name in wanted:
            exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace)
            found.add(name)
    missing = wanted - found
    if missing:
        raise SystemExit(f"{path}: definitions not found: {sorted(missing)}")
    return namespace


def exec_top_level(path: Path, names, ns: dict) -> dict:
    """exec_definitions, but names used only in annotations become typing.Any."""
    while True:
        try:
            return exec_definitions(path, names, ns)
        except NameError as exc:
            missing = exc.name
            if missing is None or missing in ns:
                raise
            ns[missing] = typing.Any


def exec_method(path: Path, class_name: str, method: str, ns: dict, *, last: bool = False):
    """Compiles method `method` of class `class_name` in `path` as a plain function in `ns`: its
    first definition, or with `last` its last one (the implementation that follows @overload
    stubs). Names used only in annotations become typing.Any."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            items = [i for i in node.body if isinstance(i, ast.FunctionDef) and i.name == method]
            if items:
                item = items[-1] if last else items[0]
                item.decorator_list = []  # @property / @staticmethod: run as a plain function
                local = {}
                while True:
                    try:
                        exec(compile(ast.Module(body=[item], type_ignores=[]), str(path), "exec"), ns, local)
                        return local[method]
                    except NameError as exc:
                        if exc.name is None or exc.name in ns:
                            raise
                        ns[exc.name] = typing.Any
    raise SystemExit(f"{path}: {class_name}.{method} not found")


def stub_module(dotted: str, **attrs) -> types.ModuleType:
    """Registers module `dotted` (and empty parents) in sys.modules, setting `attrs` on it."""
    parts = dotted.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        if name not in sys.modules:
            mod = types.ModuleType(name)
            mod.__path__ = []  # a package, so children can be imported from it
            sys.modules[name] = mod
            if i > 1:
                setattr(sys.modules[".".join(parts[: i - 1])], parts[i - 1], mod)
    mod = sys.modules[dotted]
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


class QuietLogger:
    def __getattr__(self, _name):
        return lambda *a, **k: None


# ---------------------------------------------------------------------------------------------
# Safetensors in and out (no dependency on the safetensors package). Each script passes its own
# dtype table: they differ in which dtypes a dry run on an old torch may alias.
# ---------------------------------------------------------------------------------------------


def parse_safetensors(data: bytes, dtypes: dict) -> dict:
    """name -> tensor; a dtype missing from `dtypes` (safetensors name -> torch dtype) reads as bytes."""
    import torch

    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = torch.frombuffer(bytearray(data[8 + n + begin:8 + n + end]), dtype=torch.uint8)
        out[name] = raw.view(dtypes.get(info["dtype"], torch.uint8)).reshape(info["shape"])  # F8 on torch<2.1: bytes
    return out


def safetensors_bytes(tensors: dict, metadata: dict, dtype_names: dict) -> bytes:
    """The container of `tensors` (in name order) with `metadata`; `dtype_names`: torch dtype -> safetensors name."""
    import torch

    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous().cpu()
        blob = t.reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": dtype_names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + b"".join(blobs)


def layer_golden_metadata(provenance: dict, layer_cases: list, *, layout_cases=None, patch_sets=None, checkpoints=None) -> dict:
    """A golden file's metadata. The header's bytes depend on the key order and the JSON spacing,
    so both are those of the files made so far: layout cases and provenance spaced, the rest compact."""
    compact = {"separators": (",", ":")}
    meta = {}
    if layout_cases is not None:
        meta["golden_cases"] = json.dumps(layout_cases)
    meta["golden_layer_cases"] = json.dumps(layer_cases, **compact)
    if patch_sets is not None:
        meta["golden_patch_sets"] = json.dumps(patch_sets, **compact)
    if checkpoints is not None:
        meta["golden_checkpoints"] = json.dumps(checkpoints, **compact)
    meta["provenance"] = json.dumps(provenance)
    return meta


# ---------------------------------------------------------------------------------------------
# Recording a layer's outputs
# ---------------------------------------------------------------------------------------------


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def keep_whole_or_digest(g, entry: dict, b, key: str, whole: bool):
    """Records output bytes `b` (a uint8 tensor) in `entry`: kept in the golden `g` under `key`
    when `whole`, else by their SHA-256 only (the test compares either way)."""
    if whole:
        g.put(key, b)
        entry["key"] = key
    else:
        entry["sha256"] = sha256_hex(b.numpy().tobytes())


def report_failure(errors: list, label: str, exc: Exception):
    """Call in an `except` block: prints the traceback and notes the failure, so that the other
    cases still run and the script exits 1."""
    traceback.print_exc()
    errors.append(f"{label}: {type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------------------------------
# The command line and the summary
# ---------------------------------------------------------------------------------------------


def argument_parser(doc: str, *, samples: bool = True) -> argparse.ArgumentParser:
    """--vendor (and --samples) as every generator takes them; the script adds its own."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--vendor", type=Path, required=True, help="folder of pinned upstream sources (see the docstring)")
    if samples:
        ap.add_argument("--samples", type=Path, required=True, help="the repository's samples/ folder")
    return ap


def finish(summary: dict, errors: list, out, save) -> int:
    """Saves the golden file into `out` (`save(out)` returns its path; no `out` is a dry run),
    prints the summary as JSON and returns the exit status: 1 when a case failed."""
    if out:
        out.mkdir(parents=True, exist_ok=True)
        summary["file"] = str(save(out))
    json.dump(summary, sys.stdout, indent=1)
    print()
    return 1 if errors else 0


@contextlib.contextmanager
def model_dtype(dtype):
    """DefaultModelLoader.load_model: initialize_model, load_weights and
    process_weights_after_loading all run under set_default_torch_dtype(model dtype), so a
    parameter created without a dtype (compressed-tensors' weight_shape) takes the model's."""
    import torch  # this module is also used without torch
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)
