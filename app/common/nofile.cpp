#include "app/common/nofile.hpp"

#include <sys/resource.h>

namespace mm {

uint64_t raise_nofile_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
    return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    auto raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
      lim = raised;
  }
  return lim.rlim_cur;
}

} // namespace mm
