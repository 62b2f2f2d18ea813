#include "actors/party_registry.hpp"

#include <mutex>
#include <unordered_map>

namespace mm {

struct party_registry::impl {
  mutable std::mutex mtx;
  std::unordered_map<std::string, std::string> party_of;
};

party_registry::party_registry() : impl_(std::make_unique<impl>()) {
  // nop
}

party_registry::~party_registry() = default;

bool party_registry::enter(const std::string& user, const std::string& party) {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  auto [i, added] = impl_->party_of.emplace(user, party);
  return added || i->second == party;
}

void party_registry::leave(const std::string& user, const std::string& party) {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  auto i = impl_->party_of.find(user);
  if (i != impl_->party_of.end() && i->second == party)
    impl_->party_of.erase(i);
}

std::string party_registry::party_of(const std::string& user) const {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  auto i = impl_->party_of.find(user);
  return i == impl_->party_of.end() ? std::string{} : i->second;
}

size_t party_registry::size() const {
  std::lock_guard<std::mutex> guard{impl_->mtx};
  return impl_->party_of.size();
}

} // namespace mm
