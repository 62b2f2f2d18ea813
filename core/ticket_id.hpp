#pragma once

// The queue ticket a session files for a client's join. A client names its
// ticket (`t-1`); two users may pick the same name, and one user may reuse a
// name in a later join. Everything below the session (queue scripts,
// finalizer, match rows, events) is keyed by the store ticket instead, which
// is made here from the user, the client's ticket, a nonce drawn per join
// and the join's self-heal number:
//
//   <nonce>.<heal>:<length of user>:<user>:<client ticket>
//
// The length prefix keeps the encoding unambiguous although ids may contain
// ':'. The session turns store tickets in events back into the client's
// ticket (docs/queue.md, "Ticket ids").

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace mm {

/// Longest client-chosen id (user, ticket) the API accepts.
constexpr size_t max_client_id = 128;

/// Longest store ticket: the queue scripts and match stores accept this.
constexpr size_t max_store_ticket = 300;

/// The parts of a store ticket.
struct store_ticket_parts {
  std::string nonce;
  uint32_t heal = 0;
  std::string user;
  std::string ticket; ///< the client's
};

/// True when `id` is 1..128 bytes of [A-Za-z0-9._:@-] (the API's id rule).
bool valid_client_id(const std::string& id) noexcept;

/// Makes the store ticket of a join. `nonce`: [0-9a-f]+ (see `make_nonce`).
/// Checks nothing: the caller passes a valid user and client ticket. The
/// same arguments give the same ticket.
std::string make_store_ticket(const std::string& nonce, uint32_t heal,
                              const std::string& user,
                              const std::string& ticket);

/// Splits a store ticket; nothing when `id` is not one (e.g. a ticket that a
/// test or an embedding host filed with the broker directly).
std::optional<store_ticket_parts> parse_store_ticket(const std::string& id);

/// The client's ticket inside `id` when it is `user`'s store ticket, else
/// `id` unchanged.
std::string client_ticket_of(const std::string& id, const std::string& user);

/// 16 hex digits from a process-wide random generator. Thread-safe; every
/// call draws a new nonce.
std::string make_nonce();

} // namespace mm
