// A ReductionInput over in-memory experts' params (already loaded), keyed by role, for tests of
// reductions and value stages.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lib/convert/reductions.h"

namespace moepack::test {

inline convert::ReductionInput reduction_input(std::string role, std::map<std::string, std::vector<OwnedTensor>> params) {
  convert::ReductionInput in;
  in.role = std::move(role);
  in.local_experts = params.begin()->second.size();
  in.has = [params](const std::string& r) { return params.count(r) > 0; };
  in.each = [params](const std::string& r, bool, const std::function<void(uint64_t, const OwnedTensor&)>& fn) {
    const auto& list = params.at(r);
    for (size_t e = 0; e < list.size(); ++e) fn(e, list[e]);
  };
  in.where = [](const std::string& r, uint64_t e) { return "layer L, expert " + std::to_string(e) + ", " + r; };
  return in;
}

}  // namespace moepack::test
