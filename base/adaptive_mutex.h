// AdaptiveMutex: a mutex for short critical sections that many threads enter often. When it is
// taken, a thread first spins for a while (glibc's PTHREAD_MUTEX_ADAPTIVE_NP, up to
// glibc.pthread.mutex_spin_count tries) before it sleeps in the kernel.
//
// The sidecar's I/O threads each take the entity registry's and the routing table's lock once or
// twice per message, for a few hundred nanoseconds. With std::mutex a thread that finds the lock
// taken goes straight to a futex wait, and both the wait and the wake-up are system calls and a
// context switch, far longer than the critical section it waited for. Satisfies Lockable: use it
// with std::lock_guard and std::unique_lock (and std::condition_variable_any).
#pragma once

#include <pthread.h>

#include <cstdlib>

namespace kshard {

class AdaptiveMutex {
 public:
  AdaptiveMutex() {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&mutex_, &attr);
    pthread_mutexattr_destroy(&attr);
  }
  ~AdaptiveMutex() { pthread_mutex_destroy(&mutex_); }
  AdaptiveMutex(const AdaptiveMutex&) = delete;
  AdaptiveMutex& operator=(const AdaptiveMutex&) = delete;

  void lock() {
    // Fails only on a misuse that std::mutex leaves undefined (a corrupt mutex); stop there.
    if (pthread_mutex_lock(&mutex_) != 0) std::abort();
  }
  bool try_lock() { return pthread_mutex_trylock(&mutex_) == 0; }
  void unlock() { pthread_mutex_unlock(&mutex_); }

 private:
  pthread_mutex_t mutex_;
};

}  // namespace kshard
