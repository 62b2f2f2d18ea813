// lua_pool: small blocks from per-size free lists carved out of 64 KiB
// chunks, large ones straight from malloc.

#include "persistence/queue/embedded/lua_pool.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace mm::embedded {

lua_pool::~lua_pool() {
  while (chunks_ != nullptr) {
    auto* next = chunks_->next;
    std::free(chunks_);
    chunks_ = next;
  }
}

void* lua_pool::alloc(void* ud, void* ptr, size_t osize,
                      size_t nsize) noexcept {
  return static_cast<lua_pool*>(ud)->resize(ptr, osize, nsize);
}

void* lua_pool::get(size_t n) noexcept {
  if (n > max_small)
    return std::malloc(n);
  auto c = class_of(n);
  if (auto* b = free_[c]) {
    free_[c] = b->next;
    return b;
  }
  size_t size = (c + 1) * granule;
  if (left_ < size) {
    auto* fresh = static_cast<chunk*>(std::malloc(chunk_size));
    if (fresh == nullptr)
      return nullptr;
    fresh->next = chunks_;
    chunks_ = fresh;
    cur_ = reinterpret_cast<char*>(fresh) + sizeof(chunk);
    left_ = chunk_size - sizeof(chunk);
  }
  void* result = cur_;
  cur_ += size;
  left_ -= size;
  return result;
}

void lua_pool::put(void* ptr, size_t n) noexcept {
  if (n > max_small) {
    std::free(ptr);
    return;
  }
  auto* b = static_cast<block*>(ptr);
  auto c = class_of(n);
  b->next = free_[c];
  free_[c] = b;
}

void* lua_pool::resize(void* ptr, size_t osize, size_t nsize) noexcept {
  if (nsize == 0) {
    if (ptr != nullptr)
      put(ptr, osize);
    return nullptr;
  }
  if (ptr == nullptr)
    return get(nsize);
  bool small_old = osize <= max_small;
  bool small_new = nsize <= max_small;
  if (!small_old && !small_new)
    return std::realloc(ptr, nsize);
  if (small_old && small_new && class_of(osize) == class_of(nsize))
    return ptr;
  void* fresh = get(nsize);
  if (fresh == nullptr) {
    // Lua requires shrinking to succeed: keep the (larger) block. Freeing
    // it later as a small block just recycles it in its small size class.
    return nsize <= osize ? ptr : nullptr;
  }
  std::memcpy(fresh, ptr, std::min(osize, nsize));
  put(ptr, osize);
  return fresh;
}

} // namespace mm::embedded
