// A rogue client of a node's cluster port, for tests/cluster/
// cluster_tls_test.sh: what an attacker with the project's message types
// would run.
//
//   rogue_peer connect HOST PORT [CERT KEY CA]   reach the gateway over TLS
//                                                (no CERT: no certificate)
//   rogue_peer plain HOST PORT                   reach it without TLS
//   rogue_peer forge HOST PORT CERT KEY CA USER  send the gateway a forged
//                                                match.created for USER
//   rogue_peer forge-plain HOST PORT USER        the same without TLS
//
// Exit 0: connected (forge: and printed the gateway's delivery report as
// "reached=R kept=K failed=F"); 3: refused (the error on stderr), or no
// answer within 5 s (a plaintext client and a TLS server each wait for the
// other to speak first).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include "messages/type_ids.hpp"
#include "persistence/matchdb/match_store.hpp"

namespace {

int usage() {
  std::fprintf(stderr, "usage: rogue_peer connect|plain|forge HOST PORT "
                       "[CERT KEY CA [USER]]\n");
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 4)
    return usage();
  std::string mode = argv[1], host = argv[2];
  auto port = static_cast<uint16_t>(std::stoi(argv[3]));
  bool tls = mode == "connect" || mode == "forge";
  bool forge = mode == "forge" || mode == "forge-plain";
  bool ok_args = (mode == "connect" && (argc == 4 || argc == 7))
                 || (mode == "plain" && argc == 4)
                 || (mode == "forge" && argc == 8)
                 || (mode == "forge-plain" && argc == 5);
  if (!ok_args)
    return usage();
  caf::actor_system_config cfg;
  mm::register_types(cfg);
  cfg.load<caf::io::middleman>();
  if (tls) {
    cfg.load<caf::openssl::manager>();
    if (argc >= 7) {
      cfg.openssl_certificate = argv[4];
      cfg.openssl_key = argv[5];
      cfg.openssl_cafile = argv[6];
    }
  }
  cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system sys{cfg};
  using result = caf::expected<mm::node_gateway_actor>;
  std::packaged_task<result()> connect{[&]() -> result {
    if (tls)
      return caf::openssl::remote_actor<mm::node_gateway_actor>(sys, host,
                                                                port);
    return sys.middleman().remote_actor<mm::node_gateway_actor>(host, port);
  }};
  auto pending = connect.get_future();
  std::thread{std::move(connect)}.detach();
  if (pending.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    std::fprintf(stderr, "refused: no answer within 5 s\n");
    std::fflush(stdout);
    std::_Exit(3); // the actor system would wait for the connection
  }
  auto gw = pending.get();
  if (!gw) {
    std::fprintf(stderr, "refused: %s\n", sys.render(gw.error()).c_str());
    return 3;
  }
  std::printf("connected\n");
  if (!forge)
    return 0;
  std::string user = argv[argc - 1];
  mm::match_event ev;
  ev.session_id = "00000000-0000-4000-8000-00000000f00d";
  ev.event_id = mm::match_created_event_id(ev.session_id);
  ev.queue = "rogue";
  ev.user_a = user;
  ev.ticket_a = "forged";
  ev.user_b = "mallory";
  ev.ticket_b = "forged";
  ev.payload = "{\"type\":\"match.created\",\"session_id\":\"" + ev.session_id
               + "\",\"users\":[{\"user\":\"" + user
               + "\"},{\"user\":\"mallory\"}]}";
  caf::scoped_actor self{sys};
  int rc = 1;
  self->request(*gw, std::chrono::seconds(10), mm::deliver_atom_v, user, ev)
    .receive(
      [&](mm::delivery_report& r) {
        std::printf("reached=%u kept=%u failed=%u\n", r.reached, r.kept,
                    r.failed);
        rc = 0;
      },
      [&](caf::error& e) {
        std::fprintf(stderr, "deliver: %s\n", sys.render(e).c_str());
      });
  return rc;
}
