#pragma once

// Runs matchd as a child process on a free loopback port for end-to-end
// tests, and stops it by its pid (SIGTERM, then SIGKILL after a bound).

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/free_port.hpp"

namespace mm::test {

class matchd_process {
 public:
  /// Starts `MATCHD_BIN` with `args` plus `--listen 127.0.0.1:<port>`;
  /// waits until the port accepts (at most 20 s). Output goes to `log_file`.
  /// `nofile` > 0 caps its open descriptors (RLIMIT_NOFILE).
  matchd_process(std::vector<std::string> args, const std::string& log_file,
                 rlim_t nofile = 0)
    : port_(free_tcp_port()) {
    args.insert(args.begin(), MATCHD_BIN);
    args.push_back("--listen");
    args.push_back("127.0.0.1:" + std::to_string(port_));
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        if (fd > 2)
          ::close(fd);
      }
      if (nofile > 0) {
        rlimit lim{nofile, nofile};
        ::setrlimit(RLIMIT_NOFILE, &lim);
      }
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!port_open(port_)) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("matchd exited at start; see " + log_file);
      }
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("matchd did not listen within 20 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  ~matchd_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  uint16_t port() const {
    return port_;
  }

  pid_t pid() const {
    return pid_;
  }

  /// Sends `sig` and waits up to `bound` for the exit; answers the exit
  /// status (-1: still running, then killed).
  int stop(int sig, std::chrono::milliseconds bound,
           std::chrono::milliseconds* took = nullptr) {
    auto t0 = std::chrono::steady_clock::now();
    ::kill(pid_, sig);
    while (std::chrono::steady_clock::now() - t0 < bound) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        if (took)
          *took = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - t0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }

 private:
  uint16_t port_;
  pid_t pid_ = -1;
};

} // namespace mm::test
