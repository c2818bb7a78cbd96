// The `target` object of a conversion: the device and every deployment setting in effect. The
// manifest records it (moepack-convert(1)) and `plan --json` prints the same object, so a
// script can compare what was planned with what was converted.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lib/oracle/deployment.h"

namespace moepack::convert {

nlohmann::ordered_json target_json(const oracle::Deployment& deployment);

// The inverse, for a manifest someone else wrote: the deployment a `target` object describes.
// Every key is read strictly, and the object must be exactly what target_json writes for that
// deployment (so a derived key such as `moe_tp_size` or `platform` cannot disagree with the
// flags it follows from). Throws Error(bad_input) naming `manifest_path` and the key
// (`$.target.tp_size`) otherwise.
oracle::Deployment deployment_from_target_json(const nlohmann::ordered_json& target, const std::string& manifest_path);

}  // namespace moepack::convert
