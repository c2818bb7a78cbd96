// The document `moepack convert --dry-run --json` prints (its shape is in moepack-convert(1)):
// what would be written, from the conversion plan and its shard assignment, with nothing
// written.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "lib/convert/executor.h"

namespace moepack::report {

nlohmann::ordered_json dry_run_json(const convert::ConversionPlan& plan, const std::vector<convert::ShardAssignment>& shards);

}  // namespace moepack::report
