#pragma once

#include <utility>
#include <variant>

#include "core/errc.hpp"

namespace mm {

/// A value or a `failure`; the CAF-free counterpart of `caf::expected` used by
/// the store layer so that its headers need no CAF.
template <class T>
class outcome {
 public:
  outcome(T value) : v_(std::move(value)) {
    // nop
  }

  outcome(failure f) : v_(std::move(f)) {
    // nop
  }

  outcome(errc code, std::string detail = {})
    : v_(failure{code, std::move(detail)}) {
    // nop
  }

  explicit operator bool() const noexcept {
    return v_.index() == 0;
  }

  T& operator*() {
    return std::get<0>(v_);
  }

  const T& operator*() const {
    return std::get<0>(v_);
  }

  T* operator->() {
    return &std::get<0>(v_);
  }

  const T* operator->() const {
    return &std::get<0>(v_);
  }

  const failure& error() const {
    return std::get<1>(v_);
  }

 private:
  std::variant<T, failure> v_;
};

} // namespace mm
