// Whole-buffer writes to a file descriptor: write(2) may write less than asked or be interrupted,
// and every writer here wants the same loop and the same messages (disk full and the file size
// limit named as such, so users see why a conversion stopped).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace moepack {

// Writes all of `bytes` to `fd`; throws Error(io) naming `path` on failure (the fd stays open).
void write_all(int fd, std::span<const uint8_t> bytes, const std::string& path);

}  // namespace moepack
