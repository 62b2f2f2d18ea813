// Mutual TLS between nodes (interface in actors/cluster_tls.hpp).

#include "actors/cluster_tls.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509err.h>

namespace mm {

namespace {

failure bad(const char* option, const std::string& file,
            const std::string& why) {
  return failure{errc::invalid_argument,
                 std::string{option} + " '" + file + "': " + why};
}

/// The last OpenSSL error as text (and the queue emptied).
std::string ssl_error() {
  std::string out;
  while (auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out = buf; // the last one is the most specific
  }
  return out.empty() ? "not valid PEM" : out;
}

/// Empty when `file` can be opened for reading; else why not.
std::string unreadable(const std::string& file) {
  std::unique_ptr<FILE, int (*)(FILE*)> f{std::fopen(file.c_str(), "rb"),
                                          &std::fclose};
  if (!f)
    return std::strerror(errno);
  return {};
}

} // namespace

failure check_cluster_tls(const cluster_config& cfg) {
  if (!cfg.tls())
    return {};
  struct item {
    const char* option;
    const std::string& file;
  };
  for (auto& [option, file] :
       {item{"cluster-cert", cfg.tls_cert}, item{"cluster-key", cfg.tls_key},
        item{"cluster-ca", cfg.tls_ca}}) {
    if (file.empty())
      return bad(option, file,
                 "missing (give all three of cluster-cert, "
                 "cluster-key, cluster-ca)");
    if (auto why = unreadable(file); !why.empty())
      return bad(option, file, "cannot read: " + why);
  }
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx{SSL_CTX_new(TLS_method()),
                                                   &SSL_CTX_free};
  if (!ctx)
    return failure{errc::invalid_argument,
                   "cannot make a TLS context: " + ssl_error()};
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), cfg.tls_cert.c_str()) != 1)
    return bad("cluster-cert", cfg.tls_cert,
               "not a PEM certificate (chain): " + ssl_error());
  // No passphrase callback: an encrypted key fails here, not at a prompt.
  SSL_CTX_set_default_passwd_cb(ctx.get(),
                                [](char*, int, int, void*) { return 0; });
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), cfg.tls_key.c_str(),
                                  SSL_FILETYPE_PEM)
      != 1) {
    // OpenSSL compares the key with the certificate while loading it.
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return bad("cluster-key", cfg.tls_key,
                 "does not match the certificate " + cfg.tls_cert);
    }
    return bad("cluster-key", cfg.tls_key,
               "not an unencrypted PEM private key: " + ssl_error());
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return bad("cluster-key", cfg.tls_key,
               "does not match the certificate " + cfg.tls_cert);
  if (SSL_CTX_load_verify_locations(ctx.get(), cfg.tls_ca.c_str(), nullptr)
      != 1)
    return bad("cluster-ca", cfg.tls_ca, "not a PEM CA bundle: " + ssl_error());
  // Our own certificate must pass the check our peers make of it.
  auto* cert = SSL_CTX_get0_certificate(ctx.get());
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(ctx.get(), &chain);
  std::unique_ptr<X509_STORE_CTX, void (*)(X509_STORE_CTX*)> vctx{
    X509_STORE_CTX_new(), &X509_STORE_CTX_free};
  if (!cert || !vctx
      || X509_STORE_CTX_init(vctx.get(), SSL_CTX_get_cert_store(ctx.get()),
                             cert, chain)
           != 1)
    return bad("cluster-cert", cfg.tls_cert, "cannot be checked");
  if (X509_verify_cert(vctx.get()) != 1)
    return bad(
      "cluster-cert", cfg.tls_cert,
      std::string{"not accepted by the CA bundle "} + cfg.tls_ca + ": "
        + X509_verify_cert_error_string(X509_STORE_CTX_get_error(vctx.get())));
  ERR_clear_error();
  return {};
}

void use_cluster_tls(caf::actor_system_config& sys_cfg,
                     const cluster_config& cfg) {
  sys_cfg.load<caf::io::middleman>();
  if (!cfg.tls())
    return;
  sys_cfg.load<caf::openssl::manager>();
  sys_cfg.openssl_certificate = cfg.tls_cert;
  sys_cfg.openssl_key = cfg.tls_key;
  sys_cfg.openssl_cafile = cfg.tls_ca;
  sys_cfg.openssl_capath.clear();
  sys_cfg.openssl_passphrase.clear();
}

failure check_cluster_tls_system(caf::actor_system& sys,
                                 const cluster_config& cfg) {
  if (!cfg.tls())
    return {};
  if (!sys.has_openssl_manager())
    return failure{errc::invalid_argument,
                   "cluster TLS needs CAF's OpenSSL module: load it into the "
                   "actor system config (use_cluster_tls(cfg, cluster), or "
                   "cfg.load<caf::openssl::manager>() with openssl.* set)"};
  auto& c = sys.config();
  auto differs = [](const std::string& key, const std::string& have,
                    const std::string& want) {
    return failure{errc::invalid_argument,
                   "the actor system's " + key + " is '" + have
                     + "', the cluster's '" + want
                     + "' (CAF reads the files from the actor system "
                       "config: use_cluster_tls)"};
  };
  if (c.openssl_certificate != cfg.tls_cert)
    return differs("openssl.certificate", c.openssl_certificate, cfg.tls_cert);
  if (c.openssl_key != cfg.tls_key)
    return differs("openssl.key", c.openssl_key, cfg.tls_key);
  if (c.openssl_cafile != cfg.tls_ca)
    return differs("openssl.cafile", c.openssl_cafile, cfg.tls_ca);
  return {};
}

} // namespace mm
