// Internal to the Boost.Beast adapter (io_threads.cc, the Beast server and clients): the event
// loops of an IoThreads. Never include it from a public header.
#pragma once

#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "http/internal/beast_stream.h"
#include "http/io_threads.h"

namespace kshard::http {

struct IoThreads::Impl {
  explicit Impl(IoThreadsOptions o);

  // The loop that new work (a connection, an exchange) should go to: the calling thread's own
  // when it is one of ours, so that what a handler starts stays on its thread; otherwise the next
  // loop in turn.
  std::size_t pick();
  // The next loop in turn, whichever thread asks (a listener spreading its connections).
  std::size_t nextLoop();
  // An executor for one connection on loop `index`: a strand when several threads run that loop,
  // the loop itself when one thread does (which serialises it already, and lets a dispatch from
  // another connection of the same thread run inline).
  beast_detail::net::any_io_executor connectionExecutor(std::size_t index);
  std::size_t loops() const { return contexts.size(); }
  bool runsInThisThread() const;
  // Stops the loops at once (handlers not run yet are dropped) and joins the threads.
  void stop();
  // Lets the loops run until they are out of work, then joins the threads. Only for a set that
  // one owner uses, which has ended all its operations.
  void drain();

  using Context = boost::asio::io_context;
  const IoThreadsOptions options;
  std::vector<std::unique_ptr<Context>> contexts;
  std::vector<boost::asio::executor_work_guard<Context::executor_type>> work;
  std::vector<std::thread> threads;
  std::atomic<std::size_t> next{0};
  std::mutex stopMu;
  bool stopped = false;
};

}  // namespace kshard::http
