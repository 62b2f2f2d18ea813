// The console's logins and its audit log (console_operators.hpp).

#include "app/matchd/console_operators.hpp"

#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <openssl/crypto.h>
#include <openssl/sha.h>

namespace mm {

namespace {

using json = nlohmann::json;

std::string sha256_raw(const std::string& s) {
  unsigned char out[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), out);
  return std::string(reinterpret_cast<char*>(out), sizeof(out));
}

bool unhex(const std::string& h, std::string& out) {
  auto nib = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  if (h.size() != 2 * SHA256_DIGEST_LENGTH)
    return false;
  out.clear();
  for (size_t i = 0; i < h.size(); i += 2) {
    auto a = nib(h[i]), b = nib(h[i + 1]);
    if (a < 0 || b < 0)
      return false;
    out.push_back(static_cast<char>(a * 16 + b));
  }
  return true;
}

bool good_name(const std::string& n) {
  if (n.empty() || n.size() > 64)
    return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_'
          || c == '-'))
      return false;
  return true;
}

} // namespace

const char* to_string(console_role r) noexcept {
  return r == console_role::operator_ ? "operator" : "viewer";
}

std::string console_operators::hash(const std::string& token) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : sha256_raw(token)) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 15]);
  }
  return out;
}

bool console_operators::load(const std::string& path, std::string& err) {
  std::ifstream in{path};
  if (!in) {
    err = "cannot read " + path;
    return false;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  auto j = json::parse(buf.str(), nullptr, false);
  if (!j.is_object() || !j.contains("operators")
      || !j["operators"].is_array()) {
    err = path + ": not a JSON object with an \"operators\" array";
    return false;
  }
  std::vector<entry> read;
  std::set<std::string> names;
  for (auto& e : entries_)
    names.insert(e.who.name);
  size_t i = 0;
  for (auto& o : j["operators"]) {
    auto where = path + ": operators[" + std::to_string(i++) + "]";
    if (!o.is_object()) {
      err = where + ": not an object";
      return false;
    }
    entry e;
    e.who.name = o.value("name", std::string{});
    auto role = o.value("role", std::string{});
    auto digest = o.value("token_sha256", std::string{});
    if (!good_name(e.who.name) || !names.insert(e.who.name).second) {
      err = where + ": name must be 1-64 of [A-Za-z0-9._-] and unique";
      return false;
    }
    if (role != "viewer" && role != "operator") {
      err = where + ": role must be \"viewer\" or \"operator\"";
      return false;
    }
    e.who.role = role == "operator" ? console_role::operator_
                                    : console_role::viewer;
    if (!unhex(digest, e.digest)) {
      err = where + ": token_sha256 must be 64 hex digits";
      return false;
    }
    read.push_back(std::move(e));
  }
  entries_.insert(entries_.end(), read.begin(), read.end());
  return true;
}

void console_operators::add_shared(const std::string& token) {
  entries_.push_back(entry{console_operator{"console", console_role::operator_},
                           sha256_raw(token)});
}

std::optional<console_operator>
console_operators::find(const std::string& token) const {
  // Hashing first makes every comparison the same length; each entry is
  // compared, found or not.
  auto d = sha256_raw(token);
  std::optional<console_operator> who;
  for (auto& e : entries_)
    if (CRYPTO_memcmp(d.data(), e.digest.data(), d.size()) == 0 && !who)
      who = e.who;
  return who;
}

bool console_audit::open(const std::string& path, std::string& err) {
  if (path.empty())
    return true;
  // Created 0600: the log names operators and users.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                  0600);
  if (fd < 0) {
    err = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  ::close(fd);
  std::lock_guard<std::mutex> guard{mtx_};
  file_.open(path, std::ios::app);
  if (!file_) {
    err = "cannot open " + path;
    return false;
  }
  return true;
}

void console_audit::write(const std::string& entry_json) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (file_.is_open()) {
    file_ << entry_json << '\n';
    file_.flush();
  }
  ring_.push_back(entry_json);
  if (ring_.size() > ring_size)
    ring_.pop_front();
}

std::string console_audit::recent_json() const {
  std::lock_guard<std::mutex> guard{mtx_};
  std::string out = "[";
  for (size_t i = 0; i < ring_.size(); ++i) {
    if (i > 0)
      out += ",";
    out += ring_[i];
  }
  return out + "]";
}

} // namespace mm
