#pragma once

// Where the integration tests find the private services that CTest fixtures
// start (tests/support/redis_server.sh, tests/support/postgres_server.sh). A
// missing service is a failure, never a skip: a test that cannot reach its
// store must not pass.

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace mm::test {

/// Reads the port of the private redis-server from $MM_TEST_REDIS_DIR/port.
inline uint16_t redis_port() {
  const char* dir = std::getenv("MM_TEST_REDIS_DIR");
  if (dir == nullptr)
    throw std::runtime_error("MM_TEST_REDIS_DIR is not set: run through ctest");
  std::ifstream in(std::string{dir} + "/port");
  int port = 0;
  if (!(in >> port) || port <= 0)
    throw std::runtime_error(std::string{"no redis port file in "} + dir);
  return static_cast<uint16_t>(port);
}

/// The directory of the private redis-server (for restarting it in tests).
inline std::string redis_dir() {
  const char* dir = std::getenv("MM_TEST_REDIS_DIR");
  if (dir == nullptr)
    throw std::runtime_error("MM_TEST_REDIS_DIR is not set: run through ctest");
  return dir;
}

/// The directory of the private Redis Cluster (tests/support/redis_cluster.sh).
inline std::string redis_cluster_dir() {
  const char* dir = std::getenv("MM_TEST_REDIS_CLUSTER_DIR");
  if (dir == nullptr)
    throw std::runtime_error(
      "MM_TEST_REDIS_CLUSTER_DIR is not set: run through ctest");
  return dir;
}

/// The node addresses of the private Redis Cluster, "127.0.0.1:P" each.
inline std::vector<std::string> redis_cluster_seeds() {
  std::ifstream in(redis_cluster_dir() + "/seeds");
  std::string line;
  std::vector<std::string> out;
  if (!std::getline(in, line) || line.empty())
    throw std::runtime_error("no seeds file in " + redis_cluster_dir());
  std::string cur;
  for (char c : line + ",") {
    if (c == ',') {
      if (!cur.empty())
        out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

/// The directory of the private PostgreSQL (tests/support/postgres_server.sh).
inline std::string pg_dir() {
  const char* dir = std::getenv("MM_TEST_PG_DIR");
  if (dir == nullptr)
    throw std::runtime_error("MM_TEST_PG_DIR is not set: run through ctest");
  return dir;
}

/// A libpq connection string for database `dbname` of the private
/// PostgreSQL, read from $MM_TEST_PG_DIR/port (loopback TCP, trust auth).
inline std::string pg_conninfo(const std::string& dbname = "postgres") {
  auto dir = pg_dir();
  std::ifstream in(dir + "/port");
  int port = 0;
  if (!(in >> port) || port <= 0)
    throw std::runtime_error("no postgres port file in " + dir);
  return "host=127.0.0.1 port=" + std::to_string(port)
         + " user=postgres dbname=" + dbname;
}

} // namespace mm::test
