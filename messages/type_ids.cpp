#include "messages/type_ids.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace mm {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::matchmaker>();
  cfg.add_error_category(caf::atom("mm"),
                         [](uint8_t code, caf::atom_value,
                            const caf::message& ctx) -> std::string {
                           std::string out = "mm::";
                           out += to_string(static_cast<errc>(code));
                           if (ctx.match_element<std::string>(0)) {
                             out += '(';
                             out += ctx.get_as<std::string>(0);
                             out += ')';
                           }
                           return out;
                         });
}

caf::error to_error(const failure& f) {
  return caf::make_error(f.code, f.detail);
}

bool store_trouble(const caf::error& err) {
  return err == caf::sec::request_timeout
         || (err.category() == caf::atom("mm")
             && err.code() == static_cast<uint8_t>(errc::store_unavailable));
}

} // namespace mm
