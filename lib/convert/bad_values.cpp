#include "lib/convert/bad_values.h"

#include "lib/core/error.h"

namespace moepack::convert {

void refuse_bad_values(const ckpt::Checkpoint& checkpoint, const std::string& path) {
  constexpr size_t kListed = 8;
  const ckpt::ValueScan scan = ckpt::scan_values(checkpoint, kListed);
  if (scan.bad_values == 0) return;
  std::string list;
  for (const auto& f : scan.listed) list += "\n  " + f.file + ": tensor `" + f.tensor + "` element " + std::to_string(f.element) + ": " + f.what;
  throw Error(ErrorKind::bad_input, path + ": " + std::to_string(scan.bad_values) + " values no kernel should see (in " +
                                        std::to_string(scan.per_tensor.size()) + " tensors); pass --allow-bad-values to convert anyway:" + list);
}

}  // namespace moepack::convert
