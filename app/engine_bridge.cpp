#include "app/engine_bridge.hpp"

#include <future>
#include <mutex>
#include <unordered_map>

#include <caf/all.hpp>

#include "actors/engine.hpp"
#include "app/client_link.hpp"
#include "app/hub.hpp"

namespace mm {

namespace {

failure to_failure(const caf::error& err) {
  if (err.category() == caf::atom("mm")) {
    std::string detail;
    auto& ctx = err.context();
    if (ctx.size() == 1 && ctx.match_element<std::string>(0))
      detail = ctx.get_as<std::string>(0);
    return failure{static_cast<errc>(err.code()), std::move(detail)};
  }
  if (err == caf::sec::request_timeout)
    return failure{errc::store_unavailable, "the engine did not answer in time"};
  return failure{errc::protocol_error, caf::to_string(err)};
}

ticket_view to_view(const session_state& st) {
  return ticket_view{st.user,       st.queue,  st.ticket, to_string(st.phase),
                     st.session_id, st.detail};
}

class bridge_impl : public engine_bridge {
public:
  bridge_impl(caf::actor_system& sys, std::shared_ptr<engine> eng,
              std::shared_ptr<hub> events, bridge_config cfg)
    : sys_(sys), eng_(std::move(eng)), events_(std::move(events)), cfg_(cfg) {
    // nop
  }

  void join(const std::string& user, const std::string& queue,
            const std::string& ticket, const std::string& attrs,
            uint32_t give_up_after_s, ticket_cb cb) override {
    ask_link(link(user), std::move(cb), join_atom_v,
             join_request{queue, ticket, attrs, give_up_after_s});
  }

  void cancel(const std::string& user, const std::string& ticket,
              ticket_cb cb) override {
    ask_link(link(user), std::move(cb), cancel_atom_v, ticket, std::string{});
  }

  void state(const std::string& user, const std::string& ticket,
             ticket_cb cb) override {
    ask_link(link(user), std::move(cb), state_atom_v, ticket);
  }

  void swipe(const std::string& from, const std::string& to, bool like,
             swipe_cb cb) override {
    // Both users need a session here, or a mutual match's event would wait
    // in the directory for a session that never comes.
    link(from);
    link(to);
    auto timeout = std::chrono::milliseconds(cfg_.request_timeout_ms);
    auto swipes = eng_->swipes();
    sys_.spawn([=](caf::event_based_actor* self) {
      self->request(swipes, timeout, swipe_atom_v, swipe_request{from, to, like})
        .then(
          [cb](swipe_result& r) {
            cb(swipe_view{r.mutual, r.session_id, r.created});
          },
          [cb](caf::error& err) { cb(to_failure(err)); });
    });
  }

  void end(const std::string& user, const std::string& session,
           const std::string& reason, end_cb cb) override {
    auto l = link(user);
    auto timeout = std::chrono::milliseconds(cfg_.request_timeout_ms);
    sys_.spawn([=](caf::event_based_actor* self) {
      self->request(l, timeout, end_atom_v, session, reason)
        .then(
          [cb](end_result& r) {
            cb(end_view{r.session_id, r.queue, r.ended_by, r.reason,
                        r.ended_now});
          },
          [cb](caf::error& err) { cb(to_failure(err)); });
    });
  }

  bool drain(time_point deadline) override {
    std::vector<client_link_actor> all;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      for (auto& kv : links_)
        all.push_back(kv.second);
    }
    auto left = std::make_shared<std::atomic<size_t>>(all.size());
    auto done = std::make_shared<std::promise<void>>();
    auto fut = done->get_future();
    if (all.empty())
      return true;
    auto timeout = deadline - std::chrono::steady_clock::now();
    for (auto& l : all)
      sys_.spawn([=](caf::event_based_actor* self) {
        auto finish = [left, done] {
          if (--*left == 0)
            done->set_value();
        };
        self->request(l, timeout, flush_atom_v)
          .then([finish](bool) { finish(); },
                [finish](caf::error&) { finish(); });
      });
    return fut.wait_until(deadline) == std::future_status::ready;
  }

  bool flush_events(time_point deadline) override {
    auto relay = eng_->relay();
    if (!relay)
      return true;
    auto done = std::make_shared<std::promise<bool>>();
    auto fut = done->get_future();
    auto timeout = deadline - std::chrono::steady_clock::now();
    sys_.spawn([=](caf::event_based_actor* self) {
      self->request(relay, timeout, flush_atom_v)
        .then([done](uint32_t) { done->set_value(true); },
              [done](caf::error&) { done->set_value(false); });
    });
    return fut.wait_until(deadline) == std::future_status::ready && fut.get();
  }

  void stop() override {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& kv : links_)
      caf::anon_send_exit(kv.second, caf::exit_reason::user_shutdown);
    links_.clear();
  }

  size_t users() const override {
    std::lock_guard<std::mutex> guard{mtx_};
    return links_.size();
  }

private:
  client_link_actor link(const std::string& user) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = links_.find(user);
    if (i != links_.end())
      return i->second;
    auto l = spawn_client_link(sys_, user, eng_, events_,
                               client_link_config{cfg_.client_ttl_ms});
    links_.emplace(user, l);
    eng_->metrics()->client_links.store(static_cast<int64_t>(links_.size()));
    return l;
  }

  /// One short-lived actor per request: it asks and hands the answer to the
  /// transport's callback (which posts it to the connection's thread).
  template <class... Ts>
  void ask_link(client_link_actor l, ticket_cb cb, Ts... xs) {
    auto timeout = std::chrono::milliseconds(cfg_.request_timeout_ms);
    sys_.spawn([=](caf::event_based_actor* self) {
      self->request(l, timeout, xs...)
        .then([cb](session_state& st) { cb(to_view(st)); },
              [cb](caf::error& err) { cb(to_failure(err)); });
    });
  }

  caf::actor_system& sys_;
  std::shared_ptr<engine> eng_;
  std::shared_ptr<hub> events_;
  bridge_config cfg_;
  mutable std::mutex mtx_;
  std::unordered_map<std::string, client_link_actor> links_;
};

} // namespace

engine_bridge::~engine_bridge() {
  // nop
}

std::shared_ptr<engine_bridge>
engine_bridge::make(caf::actor_system& sys, std::shared_ptr<engine> eng,
                    std::shared_ptr<hub> events, bridge_config cfg) {
  return std::make_shared<bridge_impl>(sys, std::move(eng), std::move(events),
                                       cfg);
}

} // namespace mm
