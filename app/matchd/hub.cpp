#include "app/matchd/hub.hpp"

#include <algorithm>

namespace mm {

event_sink::~event_sink() {
  // nop
}

hub::hub(size_t backlog_limit, std::chrono::seconds backlog_ttl,
         std::chrono::milliseconds presence_ttl)
  : backlog_limit_(backlog_limit), backlog_ttl_(backlog_ttl),
    presence_ttl_(presence_ttl) {
  // nop
}

void hub::attach(const std::string& user, std::shared_ptr<event_sink> sink) {
  decltype(entry::backlog) backlog;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& e = users_[user];
    e.last_seen = clock::now();
    if (std::find(e.sinks.begin(), e.sinks.end(), sink) != e.sinks.end())
      return;
    e.sinks.push_back(sink);
    ++sink_count_;
    backlog.swap(e.backlog);
  }
  // Outside the lock: push only queues, but keep the critical section short.
  for (auto& item : backlog)
    sink->push(item.second);
  if (on_attach_)
    on_attach_(user);
}

void hub::on_attach(std::function<void(const std::string&)> hook) {
  on_attach_ = std::move(hook);
}

void hub::on_detach(std::function<void(const std::string&)> hook) {
  on_detach_ = std::move(hook);
}

void hub::detach(const std::string& user, const event_sink* sink) {
  bool removed = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = users_.find(user);
    if (i == users_.end())
      return;
    auto& sinks = i->second.sinks;
    auto j = std::find_if(sinks.begin(), sinks.end(),
                          [sink](auto& s) { return s.get() == sink; });
    if (j != sinks.end()) {
      sinks.erase(j);
      --sink_count_;
      removed = true;
    }
    i->second.last_seen = clock::now();
  }
  if (removed && on_detach_)
    on_detach_(user);
}

size_t hub::publish(const std::string& user, const std::string& msg) {
  auto shared = std::make_shared<const std::string>(msg);
  std::vector<std::shared_ptr<event_sink>> targets;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto& e = users_[user];
    if (e.sinks.empty()) {
      if (e.backlog.size() >= backlog_limit_)
        e.backlog.erase(e.backlog.begin());
      e.backlog.emplace_back(clock::now(), shared);
      return 0;
    }
    targets = e.sinks;
  }
  for (auto& s : targets)
    s->push(shared);
  return targets.size();
}

void hub::touch(const std::string& user) {
  std::lock_guard<std::mutex> guard{mtx_};
  users_[user].last_seen = clock::now();
}

bool hub::connected(const std::string& user) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = users_.find(user);
  return i != users_.end() && !i->second.sinks.empty();
}

hub::clock::duration hub::idle(const std::string& user) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto i = users_.find(user);
  if (i == users_.end())
    return clock::duration::max();
  if (!i->second.sinks.empty())
    return clock::duration::zero();
  return clock::now() - i->second.last_seen;
}

void hub::prune() {
  auto now = clock::now();
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto i = users_.begin(); i != users_.end();) {
    auto& e = i->second;
    auto fresh = std::find_if(e.backlog.begin(), e.backlog.end(),
                              [&](const auto& item) {
                                return now - item.first <= backlog_ttl_;
                              });
    e.backlog.erase(e.backlog.begin(), fresh);
    // Keep the last sign of life as long as a presence check may ask;
    // longer would hold rate x TTL entries for users long gone.
    if (e.sinks.empty() && e.backlog.empty()
        && now - e.last_seen > presence_ttl_)
      i = users_.erase(i);
    else
      ++i;
  }
}

size_t hub::sinks() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return sink_count_;
}

size_t hub::users() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return users_.size();
}

} // namespace mm
