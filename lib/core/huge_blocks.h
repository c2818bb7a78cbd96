// Memory blocks of 2 MiB and more, backed by transparent huge pages and reused after release.
//
// Why: convert and verify work in buffers of a few MiB per expert (a source read, its loaded
// copy, a packed slab), allocated and freed once per expert. The first touch of a fresh 4 KiB
// page costs a page fault; on the VMs this project runs on that fault path ran at 0.38 GB/s
// (`memset` of fresh anonymous memory; 22 GB/s once the pages are resident), so the ~70 MB a
// conversion's buffers first touch cost it 0.18 s before its first write, and the faults were a
// quarter of its CPU samples. A block advised with MADV_HUGEPAGE faults 2 MiB at a time (5-13
// GB/s measured), and a released block is kept for the next request of its size, so a steady
// per-expert loop touches no fresh memory at all.
//
// The blocks are whole mappings aligned to 2 MiB (huge pages need both). Released blocks are
// cached up to kCacheLimit bytes; beyond that the oldest are unmapped, so what the process keeps
// resident stays near its peak of live buffers, not the sum of everything it allocated. The
// executable routes every `operator new` of kThreshold bytes or more here (apps/moepack); any
// caller may use it directly. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moepack::huge_blocks {

inline constexpr size_t kHugePage = size_t{2} << 20;
// Requests of at least this many bytes are worth a mapping of their own.
inline constexpr size_t kThreshold = kHugePage;
// Released blocks kept for reuse, in bytes of their mappings.
inline constexpr size_t kCacheLimit = size_t{512} << 20;

// A block of at least `bytes` bytes, aligned to kHugePage; nullptr if the system refuses it.
// Its contents are unspecified (a reused block keeps what its last owner wrote).
void* acquire(size_t bytes) noexcept;
// Whether `p` is a block from acquire(); if so it is released (cached or unmapped).
bool release(void* p) noexcept;

struct Stats {
  uint64_t mapped = 0;        // mappings made
  uint64_t reused = 0;        // requests served from the cache
  uint64_t cached_bytes = 0;  // released blocks held now
  uint64_t live_bytes = 0;    // blocks handed out and not released
};
Stats stats() noexcept;

}  // namespace moepack::huge_blocks
