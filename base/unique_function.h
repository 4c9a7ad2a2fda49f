// UniqueFunction<R(Args...)>: a move-only std::function.
//
// The data path hands one-shot continuations along: a request's Responder, the router's "done",
// a forwarded message's callback, the HTTP client's response callback. std::function needs a
// copyable target, which forced a move-only Responder into a shared_ptr, and it stores any target
// larger than two pointers on the heap: a few allocations per message, for nothing. A
// UniqueFunction takes move-only targets and keeps those up to kInlineBytes in place.
//
// As std::function: empty when default-constructed, from nullptr or moved from; calling an empty
// one throws std::bad_function_call; operator() is const and calls the target as a non-const
// lvalue.
#pragma once

#include <cstddef>
#include <functional>
#include <new>
#include <type_traits>
#include <utility>

namespace kshard {

template <typename Signature>
class UniqueFunction;

template <typename R, typename... Args>
class UniqueFunction<R(Args...)> {
 public:
  // Room for a lambda capturing `this`, a shared_ptr and a Responder; a lambda that captures
  // another UniqueFunction (80 bytes) does not fit and lives on the heap.
  static constexpr std::size_t kInlineBytes = 64;

  UniqueFunction() noexcept = default;
  UniqueFunction(std::nullptr_t) noexcept {
  }  // NOLINT(google-explicit-constructor): as std::function

  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, UniqueFunction> &&
                                        !std::is_same_v<D, std::nullptr_t> &&
                                        std::is_invocable_r_v<R, D&, Args...>>>
  UniqueFunction(F&& f) {  // NOLINT(google-explicit-constructor): as std::function
    if constexpr (std::is_pointer_v<D> || std::is_member_pointer_v<D> || isStdFunction<D>::value) {
      if (f == nullptr) return;
    }
    if constexpr (kStoredInline<D>) {
      ::new (static_cast<void*>(buffer_)) D(std::forward<F>(f));
      ops_ = &kInlineOps<D>;
    } else {
      ::new (static_cast<void*>(buffer_)) D*(new D(std::forward<F>(f)));
      ops_ = &kHeapOps<D>;
    }
  }

  UniqueFunction(UniqueFunction&& other) noexcept { takeFrom(other); }
  UniqueFunction& operator=(UniqueFunction&& other) noexcept {
    if (this != &other) {
      reset();
      takeFrom(other);
    }
    return *this;
  }
  UniqueFunction& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }
  UniqueFunction(const UniqueFunction&) = delete;
  UniqueFunction& operator=(const UniqueFunction&) = delete;
  ~UniqueFunction() { reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }
  friend bool operator==(const UniqueFunction& f, std::nullptr_t) noexcept { return !f; }

  R operator()(Args... args) const {
    if (ops_ == nullptr) throw std::bad_function_call();
    return ops_->invoke(buffer_, std::forward<Args>(args)...);
  }

 private:
  struct Ops {
    R (*invoke)(void* target, Args&&... args);
    // Moves the target from one buffer into another (uninitialised) one and ends the first.
    void (*relocate)(void* from, void* to) noexcept;
    void (*destroy)(void* target) noexcept;
  };

  template <typename T>
  struct isStdFunction : std::false_type {};
  template <typename S>
  struct isStdFunction<std::function<S>> : std::true_type {};

  // Targets that may move while a UniqueFunction is moved stay in place; the others (large, or
  // with a throwing move) live on the heap and only their pointer moves.
  template <typename D>
  static constexpr bool kStoredInline =
      sizeof(D) <= kInlineBytes &&
      alignof(D) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<D>;

  template <typename D>
  static constexpr Ops kInlineOps = {
      [](void* t, Args&&... args) -> R {
        return std::invoke(*static_cast<D*>(t), std::forward<Args>(args)...);
      },
      [](void* from, void* to) noexcept {
        D* source = static_cast<D*>(from);
        ::new (to) D(std::move(*source));
        source->~D();
      },
      [](void* t) noexcept { static_cast<D*>(t)->~D(); },
  };

  template <typename D>
  static constexpr Ops kHeapOps = {
      [](void* t, Args&&... args) -> R {
        return std::invoke(**static_cast<D**>(t), std::forward<Args>(args)...);
      },
      [](void* from, void* to) noexcept { ::new (to) D*(*static_cast<D**>(from)); },
      [](void* t) noexcept { delete *static_cast<D**>(t); },
  };

  void takeFrom(UniqueFunction& other) noexcept {
    if (other.ops_ == nullptr) return;
    other.ops_->relocate(other.buffer_, buffer_);
    ops_ = std::exchange(other.ops_, nullptr);
  }

  void reset() noexcept {
    if (ops_ == nullptr) return;
    // Cleared first: a target whose destructor asks whether this function is set sees it empty.
    const Ops* ops = std::exchange(ops_, nullptr);
    ops->destroy(buffer_);
  }

  alignas(std::max_align_t) mutable unsigned char buffer_[kInlineBytes];
  const Ops* ops_ = nullptr;
};

}  // namespace kshard
