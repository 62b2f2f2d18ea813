#pragma once

// Mutual TLS between the nodes of a cluster: the start-up checks of the
// certificate files and the actor system settings CAF's OpenSSL module
// reads them from (docs/cluster.md, "Security").

#include <caf/fwd.hpp>

#include "actors/cluster_config.hpp"
#include "core/errc.hpp"

namespace mm {

/// Checks the files of `cfg.tls_cert`, `cfg.tls_key` and `cfg.tls_ca` the
/// way CAF's OpenSSL module will load them, so that a bad file is a named
/// error at start and not a failed connection later: each file exists and
/// is readable; the certificate chain and the CA bundle parse as PEM; the
/// key parses (unencrypted PEM) and matches the certificate; the
/// certificate chains to a CA of the bundle and is within its validity.
/// `invalid_argument` naming the option ("cluster-cert", "cluster-key",
/// "cluster-ca") and the file; `errc::none` when fine or when `!cfg.tls()`.
/// Reads the files only. Idempotent.
failure check_cluster_tls(const cluster_config& cfg);

/// Prepares an actor system config for `cfg`'s TLS: loads
/// `caf::openssl::manager` (after the io middleman, which it loads too)
/// and sets `openssl.certificate`, `openssl.key` and `openssl.cafile` from
/// `cfg`. Without `cfg.tls()`: loads the io middleman only. Call before the
/// actor system is made. Not idempotent (loads the modules each call).
void use_cluster_tls(caf::actor_system_config& sys_cfg,
                     const cluster_config& cfg);

/// Checks that actor system `sys` can serve `cfg`'s TLS: the OpenSSL module
/// is loaded and its settings name `cfg`'s files (CAF reads the files
/// from there, at every new connection). `invalid_argument` otherwise.
failure check_cluster_tls_system(caf::actor_system& sys,
                                 const cluster_config& cfg);

} // namespace mm
