// Hash commands of the embedded data set: HGET HMGET HSET HDEL HEXISTS
// HLEN HGETALL.

#include "persistence/queue/embedded/dataset.hpp"

namespace mm::embedded {

void dataset::cmd_hget(const std::string* argv, size_t, reply_sink& out) {
  hash_type* h = nullptr;
  if (!find_as(argv[1], h, out))
    return;
  if (h != nullptr) {
    auto i = h->find(argv[2]);
    if (i != h->end()) {
      out.bulk(i->second);
      return;
    }
  }
  out.nil();
}

// HMGET key field [field ...] -> one value (or nil) per field
void dataset::cmd_hmget(const std::string* argv, size_t argc, reply_sink& out) {
  hash_type* h = nullptr;
  if (!find_as(argv[1], h, out))
    return;
  out.begin_array(argc - 2);
  for (size_t i = 2; i < argc; ++i) {
    if (h != nullptr) {
      if (auto f = h->find(argv[i]); f != h->end()) {
        out.bulk(f->second);
        continue;
      }
    }
    out.nil();
  }
  out.end_array();
}

// HSET key field value [field value ...] -> number of new fields
void dataset::cmd_hset(const std::string* argv, size_t argc, reply_sink& out) {
  if (argc % 2 != 0) {
    out.error("ERR wrong number of arguments for 'hset' command");
    return;
  }
  auto* h = find_or_create<hash_type>(argv[1], out);
  if (h == nullptr)
    return;
  int64_t added = 0;
  for (size_t i = 2; i < argc; i += 2) {
    auto i_field = h->find(argv[i]);
    if (i_field == h->end()) {
      h->emplace(argv[i], argv[i + 1]);
      ++added;
    } else {
      i_field->second.assign(argv[i + 1]);
    }
  }
  out.integer(added);
}

void dataset::cmd_hdel(const std::string* argv, size_t argc, reply_sink& out) {
  hash_type* h = nullptr;
  if (!find_as(argv[1], h, out))
    return;
  int64_t n = 0;
  if (h != nullptr) {
    for (size_t i = 2; i < argc; ++i)
      n += static_cast<int64_t>(h->erase(argv[i]));
    if (h->empty())
      erase(argv[1]);
  }
  out.integer(n);
}

void dataset::cmd_hexists(const std::string* argv, size_t, reply_sink& out) {
  hash_type* h = nullptr;
  if (!find_as(argv[1], h, out))
    return;
  out.integer(h != nullptr && h->count(argv[2]) > 0 ? 1 : 0);
}

void dataset::cmd_hlen(const std::string* argv, size_t, reply_sink& out) {
  hash_type* h = nullptr;
  if (!find_as(argv[1], h, out))
    return;
  out.integer(h != nullptr ? static_cast<int64_t>(h->size()) : 0);
}

void dataset::cmd_hgetall(const std::string* argv, size_t, reply_sink& out) {
  hash_type* h = nullptr;
  if (!find_as(argv[1], h, out))
    return;
  if (h == nullptr) {
    out.begin_array(0);
    out.end_array();
    return;
  }
  out.begin_array(h->size() * 2);
  for (const auto& [field, val] : *h) {
    out.bulk(field);
    out.bulk(val);
  }
  out.end_array();
}

} // namespace mm::embedded
