// Planning a conversion, from headers and config only: open the checkpoint, ask the oracle for
// every MoE layer, and turn each decision into the list of packed tensors the executor writes
// (per rank: role, name, dtype, storage shape, layout, and how to produce one expert's slab).
//
// A deployment the oracle refuses, a layer vLLM would refuse to load, and a backend whose
// layout moepack cannot produce byte-exactly are all refused here, before any file is written,
// with Error(refused) naming the layer and the reason: never an approximate output.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/executor.h"
#include "lib/convert/param_loader.h"
#include "lib/convert/reductions.h"
#include "lib/core/error.h"
#include "lib/oracle/oracle.h"

namespace moepack::convert {

// The checkpoint reader's facts about one layer, as the oracle's query.
oracle::MoeLayerQuery query_from_checkpoint(const ckpt::Checkpoint& checkpoint, const ckpt::MoeLayer& layer,
                                            const oracle::Deployment& deployment);

struct LayerDecision {
  const ckpt::MoeLayer* layer = nullptr;
  oracle::MoeLayerQuery query;
  oracle::Decision decision;
  // --dtype: the dtype vLLM creates unquantized expert parameters in (params_dtype).
  oracle::FloatType model_dtype = oracle::FloatType::bfloat16;
  // The platform the deployment runs on (refusals that depend on what vLLM builds for it).
  oracle::Platform platform = oracle::Platform::cuda;
  // Whether the device holds FP8 as E4M3FNUZ (MI300-class; RankGeometry::fp8_fnuz).
  bool fp8_is_fnuz = false;
};


// Decisions for every MoE layer of an open checkpoint.
std::vector<LayerDecision> decide_layers(const ckpt::Checkpoint& checkpoint, const oracle::Deployment& deployment);

// vLLM raises for some layers while loading them, before any backend is selected; the reader
// knows which (ckpt::LayerQuant::unsupported). The error vLLM raises, or nullopt when it loads
// the layer: `plan` reports it as the layer's decision (reported_decision), `convert` refuses
// the layer with it (build_conversion_plan).
std::optional<oracle::DecisionError> load_refusal(const ckpt::MoeLayer& layer);

// What vLLM raises while it builds and loads a layer with the backend the oracle chose, where
// the decision alone tells (the NONE backend's conversion; Marlin ops that exist only on CUDA):
// `plan` reports it (reported_decision), `convert` refuses with it (build_conversion_plan).
std::optional<oracle::DecisionError> load_time_refusal(const LayerDecision& layer);

// The decision `plan` reports for a layer: the oracle's, unless vLLM refuses to load the layer
// (load_refusal, load_time_refusal: then that error, with no backend, experts class or layouts).
oracle::Decision reported_decision(const LayerDecision& layer);

// A conversion refusal that is vLLM's own failure while it prepares the layer (a weight layout
// that cannot take the rank's shape), as opposed to moepack's refusals of what it does not
// write: `plan` reports these as the layer's answer (reported_decisions).
class VllmLoadError : public Error {
 public:
  VllmLoadError(const std::string& layer_prefix, std::string message);
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

struct ConvertRequest {
  std::optional<int> only_rank;  // --tp-rank: write one rank's tensors only
  nlohmann::ordered_json target_json = nlohmann::ordered_json::object();  // recorded in the manifest
};

// The executor's plan. Throws Error(refused) for refusals (see above).
ConversionPlan build_conversion_plan(const ckpt::Checkpoint& checkpoint, const std::vector<LayerDecision>& decisions,
                                     const ConvertRequest& request);

// The decisions `plan` reports for a checkpoint's layers: reported_decision's, and where building
// the layer's conversion plan finds that vLLM fails while it prepares the layer (VllmLoadError),
// that failure (type "LoadFailure": moepack knows vLLM's preparation cannot take the shape, not the
// exception's exact text). Reads headers only, like `convert --dry-run`.
std::vector<oracle::Decision> reported_decisions(const ckpt::Checkpoint& checkpoint, const std::vector<LayerDecision>& layers);

// The facts a runtime needs to run `layer` from the artifact alone (docs/ARTIFACT.md): routing,
// activation parameters, biases, w13 row order, gated.
void record_run_facts(const ckpt::Checkpoint& checkpoint, const ckpt::MoeLayer& layer, const oracle::MoeLayerQuery& query, artifact::Layer& manifest_layer);


}  // namespace moepack::convert
