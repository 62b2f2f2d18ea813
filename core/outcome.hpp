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
  /// A value.
  outcome(T value) : v_(std::move(value)) {
    // nop
  }

  /// A failure.
  outcome(failure f) : v_(std::move(f)) {
    // nop
  }

  /// A failure with `code` and `detail`.
  outcome(errc code, std::string detail = {})
    : v_(failure{code, std::move(detail)}) {
    // nop
  }

  /// True when it holds a value.
  explicit operator bool() const noexcept {
    return v_.index() == 0;
  }

  /// The value; throws `std::bad_variant_access` on a failure.
  T& operator*() {
    return std::get<0>(v_);
  }

  /// The value; throws `std::bad_variant_access` on a failure.
  const T& operator*() const {
    return std::get<0>(v_);
  }

  /// The value; throws `std::bad_variant_access` on a failure.
  T* operator->() {
    return &std::get<0>(v_);
  }

  /// The value; throws `std::bad_variant_access` on a failure.
  const T* operator->() const {
    return &std::get<0>(v_);
  }

  /// The failure; throws `std::bad_variant_access` on a value.
  const failure& error() const {
    return std::get<1>(v_);
  }

 private:
  std::variant<T, failure> v_;
};

} // namespace mm
