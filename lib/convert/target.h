// The `target` object of a conversion: the device and every deployment setting in effect. The
// manifest records it (moepack-convert(1)) and `plan --json` prints the same object, so a
// script can compare what was planned with what was converted.
#pragma once

#include <nlohmann/json.hpp>

#include "lib/oracle/deployment.h"

namespace moepack::convert {

nlohmann::ordered_json target_json(const oracle::Deployment& deployment);

}  // namespace moepack::convert
