#include "lib/core/error.h"

#include <cstring>

namespace moepack {

std::string describe_location(const std::string& file, const std::string& tensor) {
  std::string out = file;
  if (!tensor.empty()) {
    if (!out.empty()) out += ": ";
    out += "tensor `" + tensor + "`";
  }
  return out;
}

void throw_bad_input(const std::string& file, const std::string& tensor, const std::string& rule) {
  std::string where = describe_location(file, tensor);
  throw Error(ErrorKind::bad_input, where.empty() ? rule : where + ": " + rule);
}

void throw_io(const std::string& path, const std::string& what, int errno_value) {
  std::string msg = path + ": " + what;
  if (errno_value != 0) msg += ": " + std::string(std::strerror(errno_value));
  throw Error(ErrorKind::io, msg);
}

void throw_internal(const std::string& what) { throw Error(ErrorKind::internal, "internal error: " + what); }

}  // namespace moepack
