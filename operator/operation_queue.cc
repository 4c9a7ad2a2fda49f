#include "operator/operation_queue.h"

#include <memory>
#include <utility>

namespace kshard::manager {

NextOperation nextOperation(const QueueFacts& f) {
  if (f.running || f.stopped) return NextOperation::kWait;
  const bool urgent =
      f.requested && f.requested->immediate && f.acting && !f.empty && f.frontIsRegister;
  if (f.empty || urgent) {
    return f.requested && f.acting ? NextOperation::kRound : NextOperation::kWait;
  }
  return NextOperation::kFront;
}

OperationQueue::~OperationQueue() { cancelTimers(); }

void OperationQueue::enqueue(Op op, bool front) {
  if (front) {
    ops_.push_front(std::move(op));
  } else {
    ops_.push_back(std::move(op));
  }
  pump();
}

void OperationQueue::pump() {
  const QueueFacts facts{opRunning_,   c_.stopped,
                         c_.acting(),  requested_,
                         ops_.empty(), !ops_.empty() && ops_.front().name == "register"};
  switch (nextOperation(facts)) {
    case NextOperation::kWait:
      return;
    case NextOperation::kRound: {
      const RoundRequest r = *requested_;
      requested_.reset();
      ops_.push_front(Op{"round",
                         [this, r](std::function<void()> done) { startRound_(r, std::move(done)); },
                         nullptr});
      break;
    }
    case NextOperation::kFront:
      break;
  }
  Op op = std::move(ops_.front());
  ops_.pop_front();
  opRunning_ = true;
  const std::uint64_t seq = ++opSeq_;
  auto finished = std::make_shared<bool>(false);
  op.run([this, seq, finished] {
    if (*finished) return;
    *finished = true;
    // Continue on a fresh strand task: the operation may finish deep inside its own callbacks.
    c_.strand.post([this, seq] {
      if (opSeq_ != seq || !opRunning_) return;
      opRunning_ = false;
      pump();
    });
  });
}

void OperationQueue::requestRound(RoundRequest request) {
  if (!requested_) requested_ = RoundRequest{};
  requested_->immediate |= request.immediate;
  requested_->resendAll |= request.resendAll;
  pump();
}

void OperationQueue::cancelAll(const http::Response& answer) {
  cancelTimers();
  requested_.reset();
  std::deque<Op> queued;
  queued.swap(ops_);
  for (Op& op : queued) {
    if (op.reply) op.reply(answer);
  }
}

void OperationQueue::cancelTimers() {
  c_.d.scheduler.cancel(periodicTimer_);
  c_.d.scheduler.cancel(retryTimer_);
  periodicTimer_ = retryTimer_ = 0;
}

void OperationQueue::retryRoundIn(Duration delay) {
  if (retryTimer_ != 0) return;
  retryTimer_ = c_.strand.after(delay, [this] {
    retryTimer_ = 0;
    requestRound({});
  });
}

void OperationQueue::retryIn(Duration delay, std::function<void()> action) {
  c_.d.scheduler.cancel(retryTimer_);
  retryTimer_ = c_.strand.after(delay, [this, action = std::move(action)] {
    retryTimer_ = 0;
    action();
  });
}

void OperationQueue::schedulePeriodic() {
  c_.d.scheduler.cancel(periodicTimer_);
  periodicTimer_ = c_.strand.after(c_.current.spec.rebalanceInterval, [this] {
    periodicTimer_ = 0;
    requestRound({});
  });
}

}  // namespace kshard::manager
