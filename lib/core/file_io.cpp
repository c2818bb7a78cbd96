#include "lib/core/file_io.h"

#include <cerrno>
#include <unistd.h>

#include "lib/core/error.h"

namespace moepack {

void write_all(int fd, std::span<const uint8_t> bytes, const std::string& path) {
  const uint8_t* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      throw_io(path, e == ENOSPC ? "disk full while writing" : (e == EFBIG ? "file size limit reached while writing" : "write failed"), e);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace moepack
