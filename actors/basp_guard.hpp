#pragma once

// The guard in front of a plaintext cluster port (`cluster.insecure`). CAF
// 0.17.6's BASP code trusts the frame headers a peer sends: a handshake
// header with an empty payload crashes the node, and a forged payload
// length makes it allocate that much before reading a byte
// (docs/cluster.md, "Security"). Under mutual TLS no stranger gets that
// far; without it, the guard reads every frame a connecting peer sends,
// checks its header, and forwards only well-formed frames to CAF's own
// port, which then listens on loopback alone. No CAF here.

#include <cstdint>
#include <memory>
#include <string>

namespace mm {

/// What the guard lets through, per frame a connecting peer sends.
struct basp_guard_limits {
  /// Largest payload of one frame. The engine's peer messages are a few KB;
  /// a header announcing more is refused before anything is allocated.
  uint32_t max_payload = 8u << 20;
  /// Largest payload of the client handshake (the first frame).
  uint32_t max_handshake = 64u << 10;
};

/// A plain TCP forwarder that checks BASP frames from clients. One thread.
class basp_guard {
 public:
  virtual ~basp_guard() = default;

  /// The port it listens on (the cluster port peers connect to).
  virtual uint16_t port() const noexcept = 0;

  /// Connections closed for a malformed frame since the start.
  virtual uint64_t refused() const noexcept = 0;

  /// Stops listening, closes every connection and joins the thread.
  /// Idempotent.
  virtual void stop() noexcept = 0;
};

/// Starts a guard listening on `bind`:`port` (0: any free port) that
/// forwards to 127.0.0.1:`target_port`. Every connection's first frame must
/// be a client handshake; a client handshake (first or again) has a
/// payload of 1..max_handshake bytes and no actors; every other frame is a
/// message, monitor, down or heartbeat frame (a server handshake or an
/// unknown operation is refused) whose payload is non-empty (a
/// heartbeat's empty) and at most max_payload bytes. A frame
/// that breaks a rule closes both sides of its connection before any of
/// it reaches CAF. What CAF sends back is copied unchecked. Answers null
/// and sets `error` when it cannot listen.
std::unique_ptr<basp_guard>
start_basp_guard(const std::string& bind, uint16_t port, uint16_t target_port,
                 basp_guard_limits limits, std::string& error);

} // namespace mm
