// matchd's failpoints (app/matchd/failpoint.hpp).

#include "app/matchd/failpoint.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <signal.h>
#include <unistd.h>

#include "actors/engine.hpp"

namespace mm {

namespace {

const char* const core_names[] = {"broker",  "finalizer", "directory", "relay",
                                  "gateway", "lifecycle", "pair_lock", "swipe"};

} // namespace

bool arm_failpoint(engine_config& ec, std::string& armed, actor_kill& kill) {
  const char* env = std::getenv("MM_FAILPOINT");
  armed = env != nullptr ? env : "";
  if (armed.empty())
    return true;
  if (armed.rfind("kill_actor=", 0) == 0) {
    auto spec = armed.substr(11);
    auto at = spec.find('@');
    kill.name = spec.substr(0, at);
    try {
      kill.after_ms
        = at == std::string::npos
            ? 0
            : static_cast<uint32_t>(std::stoul(spec.substr(at + 1)));
    } catch (const std::exception&) {
      return false;
    }
    for (auto* n : core_names)
      if (kill.name == n)
        return true;
    return false;
  }
  auto name = armed;
  auto die = [name](const std::string& what) {
    std::fprintf(stderr, "failpoint %s: %s: SIGKILL\n", name.c_str(),
                 what.c_str());
    std::fflush(stderr);
    ::kill(::getpid(), SIGKILL);
  };
  if (armed.rfind("kill_holding_proposals=", 0) == 0) {
    size_t n = 0;
    try {
      size_t used = 0;
      auto text = armed.substr(23);
      n = std::stoul(text, &used);
      if (used != text.size() || n == 0)
        return false;
    } catch (const std::exception&) {
      return false;
    }
    ec.proposals_held = [n, die](size_t held) {
      if (held >= n)
        die(std::to_string(held) + " open proposals");
    };
    return true;
  }
  checkpoint at;
  if (armed == "kill_before_commit")
    at = checkpoint::before_answer; // the rows written, COMMIT not sent
  else if (armed == "kill_after_commit")
    at = checkpoint::after_commit; // committed, the queue not yet settled
  else
    return false;
  ec.finalizer.at_checkpoint = [at, die](checkpoint cp, const claim_pair& p) {
    if (cp == at)
      die("pair " + p.claimer_ticket + "/" + p.claimed.ticket);
  };
  ec.group_at_checkpoint = [at, die](checkpoint cp, const group_commit& g) {
    if (cp != at)
      return;
    auto what = "group " + g.group + " of " + std::to_string(g.tickets.size())
                + " tickets:";
    for (auto& t : g.tickets)
      what += " " + t.ticket;
    die(what);
  };
  return true;
}

} // namespace mm
