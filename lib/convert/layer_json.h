// Layers described in JSON instead of read from a checkpoint (`moepack plan --layer-json FILE`):
// one object or an array of objects, each key a field of oracle::MoeLayerQuery under its
// config.json or vLLM name. A tool that knows a model's facts asks the oracle without writing
// a checkpoint. Every key is checked: an unknown key or a value of the wrong type is bad input
// naming the file, so a misspelt key cannot silently fall back to a default.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/oracle/oracle.h"

namespace moepack::convert {

// One layer object. `file` names the source in error messages.
oracle::MoeLayerQuery layer_query_from_json(const nlohmann::ordered_json& layer, const std::string& file);

// Every layer of the file (at least one). Throws Error(io) when it cannot be read,
// Error(bad_input) when it is not valid JSON or a layer is not valid.
std::vector<oracle::MoeLayerQuery> read_layer_queries(const std::string& file);

}  // namespace moepack::convert
