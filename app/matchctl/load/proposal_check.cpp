// The ready check as `matchctl load` sees it
// (app/matchctl/load/proposal_check.hpp).

#include "app/matchctl/load/proposal_check.hpp"

#include <chrono>
#include <stdexcept>

namespace mm {

int64_t unix_now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch())
    .count();
}

std::string proposal_holder(const std::string& event_id) {
  const std::string tag = "proposal:";
  if (event_id.rfind(tag, 0) != 0)
    return "?";
  auto end = event_id.find(':', tag.size());
  return end == std::string::npos
           ? "?"
           : event_id.substr(tag.size(), end - tag.size());
}

uint64_t proposal_seq(const std::string& group) {
  if (group.size() < 2 || group[0] != 'g')
    return 0;
  try {
    return std::stoull(group.substr(1));
  } catch (const std::exception&) {
    return 0;
  }
}

bool removal_reason(const std::string& detail) {
  return detail == "declined" || detail == "timed_out" || detail == "removed";
}

std::string proposal_end(const std::map<std::string, std::string>& ended,
                         const std::string& id, const heard_proposal& h,
                         bool matched, uint64_t last_seq, bool back) {
  if (auto e = ended.find(id); e != ended.end())
    return e->second;
  if (matched)
    return "matched";
  if (h.seq < last_seq)
    return "later"; // the ticket is in one proposal at a time
  return back ? "queued" : "leaked";
}

void tally_end(group_holder_tally& t, const std::string& how) {
  ++t.heard;
  ++(how == "told"      ? t.told
     : how == "removed" ? t.removed
     : how == "later"   ? t.later
     : how == "matched" ? t.matched
     : how == "queued"  ? t.queued
                        : t.leaked);
}

bool accepted_session(const std::map<std::string, heard_proposal>& heard,
                      const std::set<std::string>& roster) {
  const heard_proposal* made = nullptr;
  for (auto& [id, h] : heard)
    if (h.users == roster && (made == nullptr || h.seq > made->seq))
      made = &h;
  return made != nullptr && made->accepted;
}

} // namespace mm
