// placeholder
#include "persistence/queue_codec.hpp"
