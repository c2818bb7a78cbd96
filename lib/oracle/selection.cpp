#include "lib/oracle/selection.h"

namespace moepack::oracle {

void raise_value_error(const std::string& message) { throw OracleRaise("ValueError", message); }
void raise_not_implemented(const std::string& message) { throw OracleRaise("NotImplementedError", message); }

std::string py_list(const std::vector<std::string>& items) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", '" : "'") + items[i] + "'";
  return s + "]";
}

std::string unsupported_message(const std::string& prefix, const std::string& value, const std::string& reason,
                                bool quote_with_reason) {
  if (!reason.empty()) {
    const std::string shown = quote_with_reason ? "'" + value + "'" : value;
    return prefix + " MoE backend " + shown + " does not support the deployment configuration since " + reason + ".";
  }
  return prefix + " MoE backend '" + value + "' does not support the deployment configuration.";
}

}  // namespace moepack::oracle
