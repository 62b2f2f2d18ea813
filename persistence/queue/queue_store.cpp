#include "persistence/queue/queue_store.hpp"

namespace mm {

queue_store::~queue_store() = default;

queue_store_factory::~queue_store_factory() = default;

} // namespace mm
