#include "app/matchd/engine_bridge.hpp"

#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/engine.hpp"
#include "app/matchd/client_link.hpp"
#include "app/matchd/hub.hpp"
#include "persistence/matchdb/match_store.hpp"

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
    return failure{errc::store_unavailable,
                   "the engine did not answer in time"};
  return failure{errc::protocol_error, caf::to_string(err)};
}

ticket_view to_view(const session_state& st) {
  return ticket_view{st.user,       st.queue,  st.ticket, to_string(st.phase),
                     st.session_id, st.detail, st.windows};
}

party_view to_view(const party_info& p) {
  return party_view{
    p.party, p.code,   p.leader,     p.members, to_string(p.phase),
    p.queue, p.ticket, p.session_id, p.detail,  p.version};
}

/// The client links by user, shared with the links' exit hooks (a link
/// stops when its user is idle: client_link.hpp) and with the request
/// actors (a request that finds its link stopped gets a fresh one).
class link_table : public std::enable_shared_from_this<link_table> {
 public:
  link_table(caf::actor_system& sys, std::shared_ptr<engine> eng,
             std::shared_ptr<hub> events, client_link_config cfg)
    : sys_(sys), eng_(std::move(eng)), events_(std::move(events)), cfg_(cfg) {
    // nop
  }

  /// The link of `user`, spawned when there is none (or when the one there
  /// is `gone`: a link the caller found stopped).
  client_link_actor get(const std::string& user,
                        const client_link_actor& gone = {}) {
    client_link_actor l;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto i = map_.find(user);
      if (i != map_.end()) {
        if (!gone || i->second != gone)
          return i->second;
        map_.erase(i);
      }
      l = spawn_client_link(sys_, user, eng_, events_, cfg_);
      map_.emplace(user, l);
      count();
    }
    // Forgotten when it stops (I9 of docs/design.md); attached outside the
    // lock: on a link that is down already the hook runs at once.
    std::weak_ptr<link_table> weak = shared_from_this();
    auto addr = l.address();
    l->attach_functor([weak, user, addr] {
      if (auto t = weak.lock())
        t->forget(user, addr);
    });
    return l;
  }

  /// The link of `user`, if it has one (none is made).
  std::optional<client_link_actor> find(const std::string& user) const {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = map_.find(user);
    if (i == map_.end())
      return std::nullopt;
    return i->second;
  }

  std::vector<client_link_actor> all() const {
    std::vector<client_link_actor> out;
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& kv : map_)
      out.push_back(kv.second);
    return out;
  }

  /// Stops every link and forgets them.
  void clear() {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& kv : map_)
      caf::anon_send_exit(kv.second, caf::exit_reason::user_shutdown);
    map_.clear();
    count();
  }

  size_t size() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return map_.size();
  }

 private:
  void forget(const std::string& user, const caf::actor_addr& addr) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = map_.find(user);
    if (i != map_.end() && i->second.address() == addr) {
      map_.erase(i);
      count();
    }
  }

  void count() { // under the lock
    if (auto m = eng_->metrics())
      m->client_links.store(static_cast<int64_t>(map_.size()),
                            std::memory_order_relaxed);
  }

  caf::actor_system& sys_;
  std::shared_ptr<engine> eng_;
  std::shared_ptr<hub> events_;
  client_link_config cfg_;
  mutable std::mutex mtx_;
  std::unordered_map<std::string, client_link_actor> map_;
};

/// The console's reads of the database: one connection, made at the
/// first lookup, used by one lookup at a time (an operator's, rare).
/// Called from detached actors only: the call blocks.
class session_reader {
 public:
  explicit session_reader(std::shared_ptr<match_store_factory> f)
    : factory_(std::move(f)) {
    // nop
  }

  outcome<std::string> find(const std::string& id) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!conn_)
      conn_ = factory_->connect();
    auto r = conn_->find_session(id);
    if (!r)
      return r.error();
    if (!*r)
      return failure{errc::not_found, "no session " + id};
    auto& m = **r;
    nlohmann::json members = nlohmann::json::array();
    for (auto& x : m.members)
      members.push_back({{"user", x.user},
                         {"ticket", x.ticket},
                         {"team", x.team},
                         {"active", x.active},
                         {"attrs", x.attrs}});
    if (m.members.empty()) // a pair
      for (auto [u, t] :
           {std::pair{m.user_a, m.ticket_a}, std::pair{m.user_b, m.ticket_b}})
        members.push_back({{"user", u}, {"ticket", t}, {"active", true}});
    nlohmann::json out{{"session_id", m.session_id},
                       {"queue", m.queue},
                       {"status", to_string(m.status)},
                       {"created_at_ms", m.created_at},
                       {"closed_at_ms", m.closed_at},
                       {"close_reason", m.close_reason},
                       {"group", m.group},
                       {"members", members}};
    return out.dump();
  }

 private:
  std::mutex mtx_;
  std::shared_ptr<match_store_factory> factory_;
  std::unique_ptr<match_store> conn_;
};

class bridge_impl : public engine_bridge {
 public:
  bridge_impl(caf::actor_system& sys, std::shared_ptr<engine> eng,
              std::shared_ptr<hub> events, bridge_config cfg)
    : sys_(sys), eng_(std::move(eng)), cfg_(cfg),
      links_(std::make_shared<link_table>(
        sys, eng_, std::move(events),
        client_link_config{cfg.client_ttl_ms, cfg.stats, cfg.tracer})) {
    // nop
  }

  void join(const std::string& user, const std::string& queue,
            const std::string& ticket, const std::string& attrs,
            uint32_t give_up_after_s, ticket_cb cb) override {
    ask_ticket(user, std::move(cb), join_atom_v,
               join_request{queue, ticket, attrs, give_up_after_s});
  }

  void cancel(const std::string& user, const std::string& ticket,
              ticket_cb cb) override {
    ask_ticket(user, std::move(cb), cancel_atom_v, ticket, std::string{});
  }

  void state(const std::string& user, const std::string& ticket,
             ticket_cb cb) override {
    ask_ticket(user, std::move(cb), state_atom_v, ticket);
  }

  bool has_user(const std::string& user) const override {
    return links_->find(user).has_value();
  }

  void inspect(const std::string& user, ticket_cb cb) override {
    auto l = links_->find(user);
    if (!l) {
      cb(failure{errc::not_found, "no such user on this node"});
      return;
    }
    auto timeout = std::chrono::milliseconds(cfg_.request_timeout_ms);
    auto link = *l;
    sys_.spawn([=](caf::event_based_actor* self) {
      self->request(link, timeout, state_atom_v)
        .then([cb](session_state& st) { cb(to_view(st)); },
              [cb](caf::error& err) { cb(to_failure(err)); });
    });
  }

  void cluster_stats(std::function<void(outcome<std::string>)> cb) override {
    // The gateway bounds each peer; this bounds the whole.
    auto timeout = std::chrono::milliseconds(2 * cfg_.request_timeout_ms);
    auto gw = eng_->gateway();
    sys_.spawn([=](caf::event_based_actor* self) {
      self->request(gw, timeout, stats_atom_v, peers_atom_v)
        .then([cb](std::string& text) { cb(std::move(text)); },
              [cb](caf::error& err) { cb(to_failure(err)); });
    });
  }

  void find_session(const std::string& session,
                    std::function<void(outcome<std::string>)> cb) override {
    auto reader = reader_;
    sys_.spawn<caf::detached>([reader, session, cb](caf::event_based_actor*) {
      cb(reader->find(session));
    });
  }

  void cancel_because(const std::string& user, const std::string& ticket,
                      const std::string& reason, ticket_cb cb) override {
    ask_ticket(user, std::move(cb), cancel_atom_v, ticket, reason);
  }

  void swipe(const std::string& from, const std::string& to, bool like,
             swipe_cb cb) override {
    // No link and no session for either user: a swipe does not need one,
    // and a session of `to` here would claim `to` for this node in the
    // cluster's user -> node map (its events would come here, where it has
    // no WebSocket). The mutual match's event reaches both users through
    // their own sessions, wherever they are, or waits in the directory.
    auto timeout = std::chrono::milliseconds(cfg_.request_timeout_ms);
    auto swipes = eng_->swipes();
    sys_.spawn([=](caf::event_based_actor* self) {
      self
        ->request(swipes, timeout, swipe_atom_v, swipe_request{from, to, like})
        .then(
          [cb](swipe_result& r) {
            cb(swipe_view{r.mutual, r.session_id, r.created});
          },
          [cb](caf::error& err) { cb(to_failure(err)); });
    });
  }

  void end(const std::string& user, const std::string& session,
           const std::string& reason, end_cb cb) override {
    ask_link<end_result>(
      user,
      [cb](end_result& r) {
        cb(end_view{r.session_id, r.queue, r.ended_by, r.reason, r.ended_now});
      },
      [cb](const failure& f) { cb(f); }, end_atom_v, session, reason);
  }

  void leave(const std::string& user, const std::string& session,
             const std::string& reason, leave_cb cb) override {
    ask_link<leave_result>(
      user,
      [cb](leave_result& r) {
        cb(leave_view{r.session_id, r.queue, r.remaining, r.left_now, r.ended});
      },
      [cb](const failure& f) { cb(f); }, leave_atom_v, session, reason);
  }

  void party_create(const std::string& user, party_cb cb) override {
    ask_parties(user, std::move(cb), create_atom_v, user);
  }

  void party_join(const std::string& user, const std::string& party,
                  const std::string& code, party_cb cb) override {
    ask_parties(user, std::move(cb), join_atom_v, user, party, code);
  }

  void party_leave(const std::string& user, const std::string& party,
                   party_cb cb) override {
    ask_parties(user, std::move(cb), leave_atom_v, user, party);
  }

  void party_queue(const std::string& user, const std::string& party,
                   const party_ticket& t, party_cb cb) override {
    ask_parties(user, std::move(cb), join_atom_v,
                party_queue_request{user, party, t.queue, t.ticket, t.attrs,
                                    t.give_up_after_s});
  }

  void party_cancel(const std::string& user, const std::string& party,
                    party_cb cb) override {
    ask_parties(user, std::move(cb), cancel_atom_v, user, party);
  }

  void party_state(const std::string& user, const std::string& party,
                   party_cb cb) override {
    ask_parties(user, std::move(cb), state_atom_v, user, party);
  }

  void proposal_answer(const std::string& user, const std::string& queue,
                       const std::string& proposal, const std::string& answer,
                       proposal_cb cb) override {
    auto timeout = std::chrono::milliseconds(cfg_.request_timeout_ms);
    auto hub = eng_->parties();
    mm::proposal_answer a{queue, proposal, user, answer};
    sys_.spawn([=](caf::event_based_actor* self) {
      self->request(hub, timeout, answer_atom_v, a)
        .then(
          [cb](proposal_state& st) {
            cb(proposal_view{st.proposal, st.queue, st.answer, st.deadline,
                             st.players, st.accepted, st.declined,
                             st.complete});
          },
          [cb](caf::error& err) { cb(to_failure(err)); });
    });
  }

  void backfill(const std::string& user, const std::string& session,
                backfill_cb cb) override {
    auto timeout = std::chrono::milliseconds(cfg_.request_timeout_ms);
    auto bf = eng_->backfill();
    backfill_ask ask{session, user};
    sys_.spawn([=](caf::event_based_actor* self) {
      self->request(bf, timeout, backfill_atom_v, ask)
        .then(
          [cb](backfill_info& b) {
            cb(backfill_view{b.session_id, b.queue, b.state, b.players,
                             b.max_players});
          },
          [cb](caf::error& err) { cb(to_failure(err)); });
    });
  }

  void attach(const std::string& user) override {
    ask_link<bool>(
      user, [](bool) {}, [](const failure&) {}, attach_atom_v);
  }

  void detach(const std::string& user) override {
    if (auto l = links_->find(user))
      caf::anon_send(*l, detach_atom_v);
  }

  bool drain(time_point deadline) override {
    auto all = links_->all();
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
    links_->clear();
  }

  size_t users() const override {
    return links_->size();
  }

 private:
  /// One short-lived actor per request: it asks the user's link and hands
  /// the answer to the transport's callback (which posts it to the
  /// connection's thread). A link that stopped meanwhile (its user was
  /// idle) never saw the request: it is asked once more of a fresh link.
  template <class T, class... Ts>
  void ask_link(const std::string& user, std::function<void(T&)> ok,
                std::function<void(const failure&)> bad, Ts... xs) {
    auto timeout = std::chrono::milliseconds(cfg_.request_timeout_ms);
    auto links = links_;
    auto l = links->get(user);
    sys_.spawn([=](caf::event_based_actor* self) {
      self->request(l, timeout, xs...)
        .then([ok](T& x) { ok(x); },
              [=](caf::error& err) {
                if (err != caf::sec::request_receiver_down) {
                  bad(to_failure(err));
                  return;
                }
                self->request(links->get(user, l), timeout, xs...)
                  .then([ok](T& x) { ok(x); },
                        [bad](caf::error& e) { bad(to_failure(e)); });
              });
    });
  }

  /// Asks the party hub. The user gets a link (and a session) here first:
  /// its party's events travel to its session, and on to its WebSockets.
  template <class... Ts>
  void ask_parties(const std::string& user, party_cb cb, Ts... xs) {
    links_->get(user);
    auto timeout = std::chrono::milliseconds(cfg_.request_timeout_ms);
    auto hub = eng_->parties();
    sys_.spawn([=](caf::event_based_actor* self) {
      self->request(hub, timeout, xs...)
        .then([cb](party_info& p) { cb(to_view(p)); },
              [cb](caf::error& err) { cb(to_failure(err)); });
    });
  }

  template <class... Ts>
  void ask_ticket(const std::string& user, ticket_cb cb, Ts... xs) {
    ask_link<session_state>(
      user, [cb](session_state& st) { cb(to_view(st)); },
      [cb](const failure& f) { cb(f); }, xs...);
  }

  caf::actor_system& sys_;
  std::shared_ptr<engine> eng_;
  bridge_config cfg_;
  std::shared_ptr<link_table> links_;
  std::shared_ptr<session_reader> reader_
    = std::make_shared<session_reader>(eng_->match_store());
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
