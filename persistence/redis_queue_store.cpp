// placeholder: being written
#include "persistence/queue_store.hpp"
