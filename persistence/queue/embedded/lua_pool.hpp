#pragma once

// The allocator of the embedded store's Lua state: per-size free lists for
// the many small objects a script call makes.

#include <cstddef>

namespace mm::embedded {

/// Lua's allocator. A script call creates and drops many small objects
/// (closures, tables, strings: common.lua alone makes dozens per call); they
/// come from per-size free lists here instead of malloc/free. Small blocks
/// are kept for reuse while the state lives. Not thread-safe, like the state.
class lua_pool {
 public:
  lua_pool() = default;
  lua_pool(const lua_pool&) = delete;
  lua_pool& operator=(const lua_pool&) = delete;

  ~lua_pool();

  /// A lua_Alloc; `ud` is the pool.
  static void* alloc(void* ud, void* ptr, size_t osize, size_t nsize) noexcept;

 private:
  static constexpr size_t granule = 16; // keeps every block 16-byte aligned
  static constexpr size_t classes = 16;
  static constexpr size_t max_small = granule * classes;
  static constexpr size_t chunk_size = 64 * 1024;

  struct block {
    block* next;
  };

  struct alignas(16) chunk {
    chunk* next;
  };

  static size_t class_of(size_t n) noexcept {
    return (n + granule - 1) / granule - 1; // n >= 1
  }

  void* get(size_t n) noexcept;
  void put(void* ptr, size_t n) noexcept;
  void* resize(void* ptr, size_t osize, size_t nsize) noexcept;

  block* free_[classes] = {};
  chunk* chunks_ = nullptr;
  char* cur_ = nullptr;
  size_t left_ = 0;
};

} // namespace mm::embedded
