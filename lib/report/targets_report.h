// The document `moepack targets --json` prints (its shape is in moepack-targets(1)): the
// devices, backends, experts classes and layouts this build knows, with the reference they
// follow.
#pragma once

#include <nlohmann/json.hpp>

namespace moepack::report {

nlohmann::ordered_json targets_json();

}  // namespace moepack::report
