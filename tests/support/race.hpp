#pragma once

// Runs two functions on two threads, released together, round after round.

#include <atomic>
#include <functional>
#include <thread>

namespace mm::test {

/// Two persistent threads; `run(a, b)` releases both at the same instant and
/// returns when both are done. Spinning (not a condition variable) keeps the
/// release gap below a microsecond, so the calls really overlap.
class racer {
 public:
  racer() {
    for (int i = 0; i < 2; ++i)
      threads_[i] = std::thread([this, i] { loop(i); });
  }

  ~racer() {
    stop_ = true;
    generation_.fetch_add(1);
    for (auto& t : threads_)
      t.join();
  }

  void run(std::function<void()> a, std::function<void()> b) {
    work_[0] = std::move(a);
    work_[1] = std::move(b);
    done_ = 0;
    generation_.fetch_add(1, std::memory_order_release);
    while (done_.load(std::memory_order_acquire) < 2)
      std::this_thread::yield();
  }

 private:
  void loop(int i) {
    unsigned seen = 0;
    for (;;) {
      unsigned g;
      while ((g = generation_.load(std::memory_order_acquire)) == seen)
        std::this_thread::yield();
      seen = g;
      if (stop_)
        return;
      work_[i]();
      done_.fetch_add(1, std::memory_order_release);
    }
  }

  std::thread threads_[2];
  std::function<void()> work_[2];
  std::atomic<unsigned> generation_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> stop_{false};
};

} // namespace mm::test
