#pragma once

// Who may use the web console and what they did (docs/console.md
// "Operators and the audit log"): named operators, each with a role
// (viewer: reads; operator: reads and acts) and a token of its own, known
// to matchd only by its SHA-256; and the audit log every console action
// is written to (a JSON line per action, in a file and in a short ring the
// console shows). No CAF, no Beast.

#include <cstddef>
#include <deque>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mm {

enum class console_role { viewer, operator_ };

/// "viewer" or "operator".
const char* to_string(console_role r) noexcept;

/// One console login.
struct console_operator {
  std::string name;
  console_role role = console_role::viewer;
};

/// The console's logins.
class console_operators {
 public:
  /// Reads the operators file (`--console-operators`): a JSON object
  /// {"operators": [{"name", "role", "token_sha256"}]}, names unique
  /// ([A-Za-z0-9._-], 1..64), role "viewer" or "operator", the hash 64 hex
  /// digits. False + `err` (naming the entry) on a file that cannot be
  /// read or is malformed; nothing is added then. Not idempotent (adds to
  /// what was read).
  bool load(const std::string& path, std::string& err);

  /// Adds the shared --console-token as the operator "console".
  void add_shared(const std::string& token);

  /// The login whose token is `token`; none for any other. Compares every
  /// entry's hash in constant time. Idempotent.
  std::optional<console_operator> find(const std::string& token) const;

  /// True when nobody can log in (the console is off).
  bool empty() const noexcept {
    return entries_.empty();
  }

  /// The SHA-256 of `token` as 64 lowercase hex digits (what the operators
  /// file holds). Idempotent.
  static std::string hash(const std::string& token);

 private:
  struct entry {
    console_operator who;
    std::string digest; ///< raw 32 bytes
  };
  std::vector<entry> entries_;
};

/// The audit log: every console action, allowed or refused.
class console_audit {
 public:
  /// Appends to `path` (created mode 0600 if missing; "" keeps only the
  /// ring). False + `err` when the file cannot be opened.
  bool open(const std::string& path, std::string& err);

  /// Writes one entry (a JSON object's text, one line) to the file, flushed,
  /// and to the ring of the last `ring_size` entries. Thread-safe.
  void write(const std::string& entry_json);

  /// The ring's entries, newest last, as a JSON array's text. Thread-safe.
  std::string recent_json() const;

  static constexpr size_t ring_size = 200;

 private:
  mutable std::mutex mtx_;
  std::ofstream file_;
  std::deque<std::string> ring_;
};

} // namespace mm
