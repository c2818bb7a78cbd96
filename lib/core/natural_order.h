// Orders of names in which numbers count as numbers, so "model.layers.2" comes before
// "model.layers.10": the order people expect numbered things in.
#pragma once

#include <string_view>

namespace moepack {

// Python's natural sort key, as vLLM's loader orders shard files: every run of digits compares
// as a number ("model-2" before "model-10"). A strict total order: names equal as numbers ("a01"
// and "a1") fall back to plain byte order, so a sort by it is deterministic.
bool natural_less(std::string_view a, std::string_view b);

// The order of tensor names as module paths: dot-separated components that are all digits
// (ModuleList indices, as in model.layers.10) compare as numbers; everything else keeps plain
// byte order, so "w13_weight" stays before "w2_weight" and names without numeric components sort
// exactly as std::string does. A strict total order.
bool module_path_less(std::string_view a, std::string_view b);

}  // namespace moepack
