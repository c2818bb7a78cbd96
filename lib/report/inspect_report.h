// The document `moepack inspect --json` prints (its shape is in moepack-inspect(1)), built from
// what formats/checkpoints found. It lives here rather than in the CLI so the fuzz target
// tests/fuzz/fuzz_inspect_json.cpp checks the very document the CLI prints.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "formats/checkpoints/hub_cache.h"

namespace moepack::report {

// One entry of "moe_layers".
nlohmann::json inspect_layer_json(const ckpt::MoeLayer& layer);

// "unknown" without a config.json, else the family's name.
std::string family_text(const ckpt::Checkpoint& checkpoint);

// The bad-input message of a value scan that found NaN/Inf or reserved scale codes, naming the
// first finding; empty when the scan is clean.
std::string bad_values_message(const ckpt::ValueScan& scan);

// The whole document. `path` is the checkpoint as the user named it; `scan` is the value scan
// of --check-values (nullptr when it did not run). A scan with bad values adds an "error"
// object of the same shape as a failed run's.
nlohmann::json inspect_json(const ckpt::Checkpoint& checkpoint, const std::string& path, const ckpt::ValueScan* scan);

// A moepack artifact inspected as a checkpoint: its packed experts carry the backends' names
// (w13_weight, ...), so the checkpoint view finds no MoE layers. This says what it is instead:
// one line for people, and the "artifact" object of the JSON document (format, source scheme,
// target, and per layer its prefix, backend and experts class).
std::string artifact_line(const artifact::Manifest& manifest);
nlohmann::json artifact_json(const artifact::Manifest& manifest);

// The "hub" object of inspect's and plan's documents when the checkpoint was named by model id:
// `model_id`, `revision`, `commit` and `snapshot` (the directory read).
nlohmann::json hub_json(const ckpt::CheckpointLocation& location);
// The same for people: "org/name@revision: commit C, snapshot DIR".
std::string hub_line(const ckpt::CheckpointLocation& location);

}  // namespace moepack::report
