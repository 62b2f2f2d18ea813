#include "messages/type_ids.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/message.hpp>

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

} // namespace mm
