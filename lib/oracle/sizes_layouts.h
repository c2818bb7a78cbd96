// Per-rank sizes after a backend's round-up, and the layout each tensor role gets — the two
// facts the converter needs from a decision (internal to lib/oracle).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lib/oracle/selection.h"

namespace moepack::oracle {

// The hidden round-up every method inherits (FusedMoEMethodBase.maybe_roundup_sizes ->
// maybe_roundup_layer_hidden_size): DeepEP high-throughput and v2 round hidden*itemsize up to
// 512 bytes; DeepEP low-latency and NIXL-EP round up to their supported hidden sizes.
int all2all_rounded_hidden(int hidden, FloatType act_dtype, const MoeParallelConfig& parallel);

// mxfp4_round_up_hidden_size_and_intermediate_size (oracle/mxfp4.py). `activation` is only
// passed by Mxfp4MoEMethod (it matters for AITER_MXFP4_BF16 on ROCm).
std::pair<int, int> mxfp4_round_up(const std::string& backend, int hidden, int intermediate, const Device& device,
                                   std::optional<MoEActivation> activation);

// Layout name per tensor role for a selection, as the converter will name its transforms.
std::vector<std::pair<std::string, std::string>> tensor_layouts(Family family, const Selection& s, const SelectionContext& ctx);


}  // namespace moepack::oracle
