// The document `moepack diff --json` prints (its shape is in moepack-diff(1)): both sides, the
// tensors only in one, those that differ with where and by how much, the manifests' field
// differences and the other files.
#pragma once

#include <nlohmann/json.hpp>

#include "formats/artifact/diff.h"

namespace moepack::report {

nlohmann::ordered_json diff_json(const artifact::DiffReport& report);

}  // namespace moepack::report
