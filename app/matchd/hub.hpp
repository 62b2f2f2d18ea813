#pragma once

// Fan-out of user events to the user's open WebSockets, with a short backlog
// for users that have none open, and the client's last sign of life (no CAF,
// no Beast: both sides talk to it through these calls).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mm {

/// One open WebSocket of a user.
class event_sink {
 public:
  virtual ~event_sink();

  /// Queues `msg` for sending; never blocks (the sink bounds its queue and
  /// closes itself when the client does not read). Thread-safe.
  virtual void push(std::shared_ptr<const std::string> msg) = 0;
};

/// Users' open WebSockets, backlogs and signs of life. Thread-safe.
class hub {
 public:
  using clock = std::chrono::steady_clock;

  /// `presence_ttl`: how long an entry with no WebSocket and no backlog
  /// keeps the user's last sign of life. The presence check (matchd's
  /// `--client-ttl`) treats a user unseen for longer as gone, which is what
  /// it answers for a user it has no entry for: pass at least that.
  explicit hub(size_t backlog_limit = 64,
               std::chrono::seconds backlog_ttl = std::chrono::seconds{300},
               std::chrono::milliseconds presence_ttl
               = std::chrono::milliseconds{30000});

  /// Adds `sink` to `user`'s sinks and pushes the user's backlog to it
  /// (then clears it), then calls the attach hook (if any). Counts as a
  /// sign of life. Idempotent per sink.
  void attach(const std::string& user, std::shared_ptr<event_sink> sink);

  /// Called with the user after each new sink (matchd: the user's client
  /// link keeps its session while a WebSocket is open). Set it before the
  /// first attach; it runs on the attaching thread, outside the hub's lock.
  void on_attach(std::function<void(const std::string&)> hook);

  /// Removes `sink`. Counts as a sign of life. Calls the detach hook (if
  /// any) when it removed one. Idempotent.
  void detach(const std::string& user, const event_sink* sink);

  /// Called with the user after a sink was removed (matchd: the user's
  /// client link starts its presence check when none is left). Set it
  /// before the first detach; it runs on the detaching thread, outside the
  /// hub's lock.
  void on_detach(std::function<void(const std::string&)> hook);

  /// Pushes `msg` to every sink of `user`; keeps it in the backlog (at most
  /// `backlog_limit`, oldest dropped) when the user has none. Answers how
  /// many sinks it reached. Not idempotent (the message is sent again).
  size_t publish(const std::string& user, const std::string& msg);

  /// Records a sign of life of `user` (any authenticated request).
  /// Idempotent.
  void touch(const std::string& user);

  /// True while `user` has an open WebSocket.
  bool connected(const std::string& user) const;

  /// Time since the user's last sign of life (zero while connected; large
  /// for a user never seen).
  clock::duration idle(const std::string& user) const;

  /// Drops backlogs older than the TTL, and entries with no WebSocket, no
  /// backlog and no sign of life within `presence_ttl` (a user served costs
  /// the hub nothing after that). Idempotent.
  void prune();

  /// Open WebSockets right now.
  size_t sinks() const;

  /// Users the hub keeps an entry for right now.
  size_t users() const;

 private:
  struct entry {
    std::vector<std::shared_ptr<event_sink>> sinks;
    // Oldest first; a vector, as an empty deque already holds 576 bytes
    // and most users have no backlog.
    std::vector<
      std::pair<clock::time_point, std::shared_ptr<const std::string>>>
      backlog;
    clock::time_point last_seen;
  };

  std::function<void(const std::string&)> on_attach_;
  std::function<void(const std::string&)> on_detach_;
  size_t backlog_limit_;
  clock::duration backlog_ttl_;
  clock::duration presence_ttl_;
  mutable std::mutex mtx_;
  std::unordered_map<std::string, entry> users_;
  size_t sink_count_ = 0;
};

} // namespace mm
