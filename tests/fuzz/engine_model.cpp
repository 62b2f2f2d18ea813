// A model of the engine for the front-door targets when the real one is too
// slow to build (MM_FUZZ_MODEL_ENGINE): one ticket per user, answered at
// once. It keeps the router's contract (named refusals, one answer), not
// the engine's matching.

#include <map>
#include <memory>
#include <mutex>

#include "tests/fuzz/api_fixture.hpp"

namespace mm::fuzz {

namespace {

class model_port : public engine_port {
 public:
  void join(const std::string& user, const std::string& queue,
            const std::string& ticket, const std::string&, uint32_t,
            ticket_cb cb) override {
    std::unique_lock<std::mutex> guard{mtx_};
    auto& t = tickets_[user];
    if (!t.ticket.empty() && t.ticket != ticket && t.state == "queued") {
      guard.unlock();
      cb(failure{errc::duplicate_ticket, "the user has ticket " + t.ticket});
      return;
    }
    if (t.ticket != ticket)
      t = ticket_view{user, queue, ticket, "queued", {}, {}, {}};
    auto copy = t;
    guard.unlock();
    cb(copy);
  }

  void cancel(const std::string& user, const std::string& ticket,
              ticket_cb cb) override {
    answer(user, ticket, true, std::move(cb));
  }

  void state(const std::string& user, const std::string& ticket,
             ticket_cb cb) override {
    answer(user, ticket, false, std::move(cb));
  }

  void swipe(const std::string&, const std::string&, bool,
             swipe_cb cb) override {
    cb(swipe_view{});
  }

  void end(const std::string&, const std::string&, const std::string&,
           end_cb cb) override {
    cb(failure{errc::not_found, "no such session"});
  }

 private:
  void answer(const std::string& user, const std::string& ticket, bool cancel,
              ticket_cb cb) {
    std::unique_lock<std::mutex> guard{mtx_};
    auto i = tickets_.find(user);
    if (i == tickets_.end() || i->second.ticket != ticket) {
      guard.unlock();
      cb(failure{errc::not_found, "no such ticket"});
      return;
    }
    if (cancel)
      i->second.state = "cancelled";
    auto copy = i->second;
    guard.unlock();
    cb(copy);
  }

  std::mutex mtx_;
  std::map<std::string, ticket_view> tickets_;
};

} // namespace

std::shared_ptr<engine_port> make_port(const std::shared_ptr<api_context>&) {
  return std::make_shared<model_port>();
}

} // namespace mm::fuzz
