#include "app/matchd/heap.hpp"

#include <cstdint>
#include <malloc.h>

// jemalloc's control interface, resolved at load time when jemalloc is
// linked in or preloaded (null otherwise): one binary reads either heap.
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp,
                       void* newp, size_t newlen) __attribute__((weak));

namespace mm {

namespace {

size_t je_size(const char* name) {
  size_t v = 0;
  size_t len = sizeof(v);
  return mallctl(name, &v, &len, nullptr, 0) == 0 ? v : 0;
}

} // namespace

const char* heap_allocator() {
  return mallctl != nullptr ? "jemalloc" : "glibc";
}

heap_figures heap_now() {
  heap_figures h;
  if (mallctl != nullptr) {
    // jemalloc's statistics are a snapshot refreshed by bumping the epoch.
    uint64_t epoch = 1;
    size_t len = sizeof(epoch);
    mallctl("epoch", &epoch, &len, &epoch, len);
    h.in_use = je_size("stats.allocated");
    auto resident = je_size("stats.resident");
    h.free = resident > h.in_use ? resident - h.in_use : 0;
    return h;
  }
  auto mi = mallinfo2();
  h.in_use = mi.uordblks + mi.hblkhd;
  h.free = mi.fordblks;
  return h;
}

void heap_release() {
  if (mallctl != nullptr) {
    // MALLCTL_ARENAS_ALL (4096): every arena's unused dirty pages.
    mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
    return;
  }
  malloc_trim(0);
}

} // namespace mm
