// value_sink: a command's reply as a store_value, the way a Redis client
// sees it (engine::execute).

#include "persistence/queue/embedded/reply_sink.hpp"

#include <utility>

namespace mm::embedded {

void value_sink::nil() {
  next();
}

void value_sink::integer(int64_t x) {
  auto& v = next();
  v.type = store_value::kind::integer;
  v.integer = x;
}

void value_sink::bulk(const char* data, size_t size) {
  auto& v = next();
  v.type = store_value::kind::string;
  v.str.assign(data, size);
}

void value_sink::status(const char* text) {
  auto& v = next();
  v.type = store_value::kind::status;
  v.str = text;
}

void value_sink::error(const std::string& text) {
  auto& v = next();
  v.type = store_value::kind::error;
  v.str = text;
}

void value_sink::begin_array(size_t size_hint) {
  auto& v = next();
  v.type = store_value::kind::array;
  v.elements.reserve(size_hint);
  open_.push_back(&v);
}

void value_sink::end_array() {
  open_.pop_back();
}

store_value value_sink::take() {
  open_.clear();
  return std::move(root_);
}

store_value& value_sink::next() {
  if (open_.empty())
    return root_;
  auto& xs = open_.back()->elements;
  xs.emplace_back();
  return xs.back();
}

} // namespace mm::embedded
