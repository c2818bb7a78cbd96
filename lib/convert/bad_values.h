// The bad-values policy of `convert`: a source tensor holding NaN or Inf, or a scale holding a
// reserved code, would reach the kernel unchanged through the packed artifact, so the
// conversion stops before anything is written and names where they are (--allow-bad-values
// converts anyway). `inspect --check-values` runs the same scan and reports it
// (lib/report/inspect_report).
#pragma once

#include <string>

#include "formats/checkpoints/checkpoint.h"

namespace moepack::convert {

// Scans every tensor of `checkpoint`; throws Error(bad_input) naming the count and the first 8
// findings (file, tensor, element, what) when there is any. `path` is the checkpoint as the
// user named it.
void refuse_bad_values(const ckpt::Checkpoint& checkpoint, const std::string& path);

}  // namespace moepack::convert
