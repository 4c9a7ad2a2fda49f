// EntityRegistry: the entities this pod runs, and the shards it owns.
//
// It is the sidecar's single-owner enforcement point. A message is delivered only while this pod
// owns the entity's shard; entities are turn-based (one message at a time, in arrival order);
// an entity starts on its first message and stops (through the app's stop callback) when idle
// for `idleTimeout`, when its shard is unassigned or revoked, and when the pod drains.
//
// Ownership per shard moves through three states:
//
//   not owned --assign(e)--> owned(e) --unassign/revoke--> handing off --all stopped--> not owned
//
// While handing off, no new message is accepted for the shard, messages already accepted (in a
// mailbox or at the app) finish, and then each of the shard's entities is stopped. Only then is
// the shard released, so the operator may give it to another pod without two pods ever running
// the same entity.
//
// Epoch fencing: an unassign carries the epoch at which the shard leaves this pod. An assign with
// an older epoch is a delayed duplicate from before that unassign and is refused; accepting it
// would let this pod own a shard the operator already gave to another pod.
//
// The ownership lease (sidecar/ownership_lease.h): once a lease duration is set, messages reach
// the app only while the lease runs. When it is about to run out without a renewal, the pod takes
// no new message and stops every entity (its shards stay owned, "fenced"); messages still queued
// when it has run out are refused (asks, which the sender retries elsewhere) or dropped (tells).
// A renewal lifts the fence. This bounds how long a pod cut off from the operator and the API
// server can serve, which is what lets the operator move the shards of a pod whose object
// vanished while its processes may still run.
//
// Entities that run without a message (sidecar/entity_registry_pinned.cc): keepActive starts an
// entity with a start turn (EntityHost::start) and pins it: a pinned entity is never passivated
// for idleness, but it stops like any other on a handoff, the drain and the lease's fence (the
// single-owner rule does not bend for it). Listeners (addShardsTakenListener) hear when this pod
// takes shards, and answer with keepActive. Singletons are pinned entities of the reserved type
// kSingletonEntityType; remembered entities are recorded through an EntityRecorder
// (sidecar/entity_recorder.h) before their first turn. An app's answer carrying
// Kshard-Passivate: true stops the entity after that turn (forgotten first, if remembered).
//
// The active-entity limit (spec.maxActiveEntitiesPerPod; zero: none): at most that many entities
// are active at the app at once, an entity counting from when its first message goes to the app
// until its stop call has returned. A message for a new entity beyond it waits, with the other
// new entities, in arrival order, for a place, while the least recently used idle entity that is
// not pinned is passivated to make one (entity_registry_limit.cc); a kept-active entity waits the
// same way, and once admitted is pinned: it counts, but is never stopped for the limit. A
// waiting entity has not reached the app: its tells are acknowledged only once it is admitted,
// so a handoff, the drain or the lease's fence refuses all its messages (kNotOwned: the sender
// tries the next owner) without losing an acknowledged one.
//
// Thread-safe. Callbacks into the EntityHost and completion callbacks run without the lock held.
// Lifetime: destroy the registry only after the EntityHost and the Scheduler have stopped calling
// back into it (the destructor cancels the registry's own timers).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/adaptive_mutex.h"
#include "base/log_throttle.h"
#include "base/logger.h"
#include "base/scheduler.h"
#include "base/status.h"
#include "base/unique_function.h"
#include "http/message.h"
#include "protocol/wire.h"
#include "sidecar/ownership_lease.h"
#include "sidecar/shard_load.h"

namespace kshard::sidecar {

using ShardId = std::int32_t;
using Epoch = std::uint64_t;

enum class DeliveryMode { kAsk, kTell };

struct EntityKey {
  std::string type;
  std::string id;
  friend bool operator==(const EntityKey&, const EntityKey&) = default;
};

struct EntityKeyHash {
  std::size_t operator()(const EntityKey& k) const;
};

struct Message {
  EntityKey key;
  ShardId shard = 0;
  DeliveryMode mode = DeliveryMode::kAsk;
  // Its turn number (protocol::kTurnHeader), set by the registry when it goes to the app.
  std::uint64_t turn = 0;
  // Passed on to the app (content type and the like): only fields passThroughHeaders keeps.
  http::Headers headers;
  std::string body;
};

// The app, as the registry sees it. Implementations answer each call exactly once, from any thread.
class EntityHost {
 public:
  using StartCallback = UniqueFunction<void(StatusOr<http::Response>&&)>;
  virtual ~EntityHost() = default;
  // Delivers one message; `epoch` is the fencing token of this pod's ownership of the shard.
  virtual void deliver(Message message, Epoch epoch,
                       UniqueFunction<void(StatusOr<http::Response>&&)> done) = 0;
  // Stops an entity; OK once its state is safe. `lastTurn`: the turn number of the last message
  // sent to it (a message of a lower or equal number reaching the app later is refused there).
  virtual void stop(const EntityKey& key, ShardId shard, std::uint64_t lastTurn,
                    std::function<void(Status)> done) = 0;
  // Starts an entity without a message (a start turn of number `turn`). OK with the app's 2xx
  // answer (whose headers may ask for passivation), an error for anything else. The default
  // answers Unimplemented: a host that cannot start entities keeps none pinned.
  virtual void start(const EntityKey& key, ShardId shard, Epoch epoch, std::uint64_t turn,
                     StartCallback done);
};

// The entity type of singletons (spec.singletons): a singleton named S is the entity
// {kSingletonEntityType, S} on the shard of S. The app API refuses it as an entity type, so no
// app entity shares it; AppHost maps it to the /kshard/singletons/{name} callbacks.
inline constexpr std::string_view kSingletonEntityType = "kshard.io/singleton";

class EntityRecorder;

// Why a message was not accepted. The sender retries kNotOwned and kDraining elsewhere or later.
enum class Refusal {
  kNotOwned,     // this pod does not own the shard (or it is being handed off)
  kDraining,     // the pod drains: no new entity starts here
  kOverloaded,   // the entity's mailbox is full
  kTellBacklog,  // too many tells (or bytes of them) wait for the app, across all entities
  // A new remembered entity would pass the bound of its shard's record or of its map's records
  // (sidecar/remembered_entities.h): the recorder refused it with ResourceExhausted.
  kRememberedFull,
  kEntityLimit,  // too many messages of new entities wait for a place under the limit
};

// kOverloaded, kTellBacklog and kEntityLimit: answered 503 EntityOverloaded, kRememberedFull 503
// RememberedEntitiesFull; none is retried.
inline bool isOverload(const std::optional<Refusal>& refusal) {
  return refusal == Refusal::kOverloaded || refusal == Refusal::kTellBacklog ||
         refusal == Refusal::kRememberedFull || refusal == Refusal::kEntityLimit;
}
// What that 503 says for each, and its error code.
std::string overloadMessage(Refusal refusal);
std::string_view overloadCode(Refusal refusal);

// The outcome of deliver(): the app's response (ask), 202 once queued (tell), or a refusal.
struct DeliveryOutcome {
  std::optional<Refusal> refusal;
  StatusOr<http::Response> response = http::Response{};
};

struct EntityRegistryOptions {
  Duration idleTimeout = std::chrono::seconds(60);  // zero: never passivate
  std::size_t maxMailbox = 1000;                    // queued messages per entity
  // Tells accepted (answered 202) and not yet answered by the app, across all entities, and
  // their bodies' bytes: beyond either, a tell is refused (503 EntityOverloaded) so that a caller
  // faster than the app is slowed down instead of filling the pod's memory. A tell larger than
  // the byte bound is still accepted when none waits.
  std::size_t maxPendingTells = protocol::kMaxPendingTells.defaultValue;
  std::size_t maxPendingTellBytes = protocol::kMaxPendingTellBytes.defaultValue;
  Duration stopRetryDelay = std::chrono::milliseconds(200);
  // Stop calls at the app at once; the rest wait their turn, those of shards being handed off
  // (an unassign, the drain) before idle passivations. Each stop call holds a connection to the
  // app: without a bound, a drain of N entities opened N connections at once.
  std::size_t maxConcurrentStops = protocol::kMaxConcurrentStops.defaultValue;
  // How long an EntityRecorder call (started, forgotten) may take: past it, the call counts as
  // failed and its late answer is ignored, so that a recorder that never answers does not keep
  // an entity busy, and its shard's handoff from completing, forever. The default is one API
  // request's timeout (kube::ClientOptions::requestTimeout).
  Duration recorderTimeout = std::chrono::seconds(30);
  // Called (under no lock) each time an idle entity is being stopped; for metrics.
  std::function<void()> onPassivation;
  // Entities active at the app at once (spec.maxActiveEntitiesPerPod; zero: no limit). The
  // messages of new entities waiting for a place are bounded by maxMailbox, all together.
  std::size_t maxActiveEntities = 0;
  // Called (under no lock) each time an idle entity is being stopped to make a place under
  // maxActiveEntities; for metrics.
  std::function<void()> onLimitPassivation;
};

class EntityRegistry {
 public:
  using DeliveryCallback = UniqueFunction<void(DeliveryOutcome&&)>;
  // Called with the shards that were not released before the deadline (empty: all released).
  using HandoffCallback = std::function<void(std::vector<ShardId> stillBusy)>;

  EntityRegistry(EntityHost& host, Scheduler& scheduler, EntityRegistryOptions options,
                 Logger logger);
  ~EntityRegistry();
  EntityRegistry(const EntityRegistry&) = delete;
  EntityRegistry& operator=(const EntityRegistry&) = delete;

  // Takes ownership of `shards` at `epoch`. Idempotent. Returns the shards refused because an
  // unassign at a newer epoch was already processed (a delayed, stale assign). A shard that is
  // being handed off is taken back: its remaining entities stay active here.
  //
  // `fromMap`: the assignment was read from the ShardMap (watched or polled), not commanded. It
  // must then be newer than any unassign processed: an unassign at epoch F tells this pod to let
  // go as of F, and a map written at F may still name this pod as the owner (the operator
  // releases a pod before it persists its removal), while a command at F was sent after it.
  std::vector<ShardId> assign(const std::vector<ShardId>& shards, Epoch epoch,
                              bool fromMap = false);

  // Releases `shards` as of `epoch` (see the epoch fencing above): refuses new messages for them,
  // lets accepted ones finish, stops their entities, and calls `done` once all are released or
  // when `timeout` passes (with the shards still busy; they keep handing off in the background).
  // Shards this pod does not own count as released.
  void unassign(const std::vector<ShardId>& shards, Epoch epoch, Duration timeout,
                HandoffCallback done);

  // The watched ShardMap gave `shard` to another pod at `epoch`: release it at once if this pod
  // holds it at an older epoch.
  void revokeIfOlder(ShardId shard, Epoch epoch);

  // Refuses new entities from now on, stops every active one (after their accepted messages),
  // and calls `done(true)` once none is left, or `done(false)` when `timeout` passes first.
  void drain(Duration timeout, std::function<void(bool complete)> done);
  // Takes new entities and assigns again after a drain that was not followed by the pod's end.
  void undrain();

  // The ownership lease (see above): its duration (spec.ownershipLease; zero keeps it off, and
  // until it is set nothing is fenced), and a confirmation whose request was sent at `sentAt`.
  void setLeaseDuration(Duration duration);
  void renewLease(SteadyTime sentAt);
  // True while the lease is off or runs and the fence has not begun.
  bool leaseValid() const;
  // When the lease runs out (SteadyTime::max() while it is off): no call to the app is sent or
  // waited for after it. Lock-free: read by AppHost for every call.
  SteadyTime appDeadline() const {
    return SteadyTime(Duration(appDeadline_.load(std::memory_order_acquire)));
  }

  // Accepts a message for delivery. Ask: `done` gets the app's answer. Tell: `done` gets 202 as
  // soon as the message is queued; the app's answer is only logged.
  void deliver(Message message, DeliveryCallback done);

  // Follows spec.entityIdleTimeout of the watched map. Applies at once: an entity idle for
  // longer than the new timeout is passivated by the next sweep, which is moved earlier.
  void setIdleTimeout(Duration timeout);
  // Follows spec.maxActiveEntitiesPerPod of the watched map (zero: no limit). Applies at once:
  // a lower limit passivates least recently used idle entities down to it, a higher one admits
  // waiting entities.
  void setMaxActiveEntities(std::size_t limit);

  bool owns(ShardId shard) const;
  std::optional<Epoch> ownedEpoch(ShardId shard) const;
  std::vector<ShardId> ownedShards() const;
  std::size_t activeEntities() const;
  std::size_t activeEntities(const std::string& type) const;
  // The entities of `type` active now and not stopping, with their shards: whom a topic's
  // publication with ?entities={type} is told to. A pass over every active entity.
  std::vector<std::pair<EntityKey, ShardId>> activeEntitiesOf(const std::string& type) const;
  // Active entities per type, sorted by type; a type with none active is not listed.
  std::vector<std::pair<std::string, std::size_t>> activeEntitiesByType() const;
  // New entities waiting for a place under the active-entity limit.
  std::size_t waitingEntities() const;
  bool draining() const;

  // Entities that run without a message (sidecar/entity_registry_pinned.cc).
  //
  // Makes `key` active now, if this pod owns `shard` (owned, not handing off, not fenced by the
  // lease, not draining): an absent entity is created pinned and started with a start turn
  // (EntityHost::start; messages arriving meanwhile wait behind it), once there is a place for it
  // under the active-entity limit; a present one is pinned. A failed start is tried again, with
  // backoff, while the shard stays owned. False when the pod does not own the shard (nothing
  // done). `key.id` must lie on `shard`.
  bool keepActive(EntityKey key, ShardId shard);
  // The entity is no longer kept active: with `stop`, it stops after its current turn (no
  // forgotten() call); without, it passivates when idle like any entity.
  void unpin(const EntityKey& key, bool stop);
  bool pinned(const EntityKey& key) const;
  // Called under no lock, with the shards newly taken and their epoch (once per epoch), each
  // time entities may run again on shards: an assign (commanded or from the map) takes shards
  // or takes back shards it was handing off, a renewal lifts the lease's fence, an undrain.
  // Listeners answer with keepActive. Add listeners before the registry is used.
  using ShardsTakenListener = std::function<void(std::vector<ShardId> shards, Epoch epoch)>;
  void addShardsTakenListener(ShardsTakenListener listener);
  // Remembered entities (sidecar/entity_recorder.h); null: none. Set before the registry is
  // used; `recorder` outlives it.
  void setRecorder(EntityRecorder* recorder);

  // The owned shards' load: the messages accepted and the app's time on the turns that ended
  // since the last sample, as rates folded into averages that decay with `halfLife` (weighted by
  // the time between samples, whatever their spacing), and each shard's active entities, by
  // shard. A turn counts when it ends: a long turn lands whole in the sample after it. A shard
  // is measured from when this pod took it, and its average is over that time only (no start
  // at zero). Any caller may sample (the metrics scrape, the operator's ping): each sample
  // folds in the time since the one before.
  std::vector<ShardLoad> sampleLoad(Duration halfLife);

 private:
  struct Pending {
    Message message;
    DeliveryCallback done;  // empty for tell (already answered) and for a start
    // A tell taken while its entity's record is pending (EntityRecorder::started), or while
    // it waits for a place under the active-entity limit: answered 202 once it is recorded or
    // admitted, refused if the record fails or the shard leaves first.
    DeliveryCallback heldAck;
  };
  // An entity's waiting messages. Empty most of the time (a message for an idle entity goes
  // straight to the app), so the queue exists only while messages wait: a std::deque allocates
  // about 600 bytes when constructed, which spread 10,000 entities over several times more memory
  // than they need, and the registry's lookup of an entity became the sidecar's costliest
  // function (TLB and cache misses).
  class Mailbox {
   public:
    bool empty() const { return queue_ == nullptr; }
    std::size_t size() const { return queue_ == nullptr ? 0 : queue_->size(); }
    void push(Pending p) {
      if (queue_ == nullptr) queue_ = std::make_unique<std::deque<Pending>>();
      queue_->push_back(std::move(p));
    }
    template <typename F>
    void forEach(F&& f) {
      if (queue_ != nullptr)
        for (Pending& p : *queue_) f(p);
    }
    // The oldest message; the mailbox must not be empty.
    Pending take() {
      Pending p = std::move(queue_->front());
      queue_->pop_front();
      if (queue_->empty()) queue_.reset();
      return p;
    }

   private:
    std::unique_ptr<std::deque<Pending>> queue_;  // null when empty
  };
  struct Entity {
    // Its own key in entities_, whose nodes never move: what a turn's callbacks name the entity
    // by, instead of a copy of the type and id per message.
    const EntityKey* key = nullptr;
    ShardId shard = 0;
    // While a tell's turn is at the app: its body's size, to take off pendingTellBytes_ when it
    // ends (it fits beside `shard`, in what was padding).
    std::uint32_t tellBytes = 0;
    std::size_t* typeCount = nullptr;  // its type's entry in typeCounts_, whose nodes never move
    Mailbox mailbox;
    bool busy = false;      // a message or the stop call is at the app, or the stop waits
    bool stopping = false;  // the stop call is at the app or waits its turn (a stop queue)
    // The list the entity is in (EntityList::id), linked by prev and next: the idle list while
    // it is idle (not busy, nothing in its mailbox, not stopping), a stop queue while its stop
    // call waits for one of the maxConcurrentStops places.
    std::uint8_t list = 0;
    // Stop calls that failed in a row (capped), for the retry's backoff; 0 once the app answers
    // a message.
    std::uint8_t stopFailures = 0;
    // Pinned: kept active (keepActive, a remembered entity recorded); never passivated for
    // idleness, and not in the idle list.
    bool pinned = false;
    // Start turns that failed in a row (capped), for the retry's backoff.
    std::uint8_t startFailures = 0;
    // needsStart: kept active, and no start turn has succeeded since it was (re)started: one
    // runs before its next message; startBackoff: the last start failed and its retry is not
    // due yet (messages go to the app meanwhile, as to any entity); needsRecord: a remembered
    // entity not (or no longer) recorded: its next message waits for EntityRecorder::started;
    // afterTurn: what the current turn's end does before anything else (AfterTurn); atApp: a
    // turn (a message or a start) was sent to the app since its last successful stop, so the app
    // may hold it: it is removed only by a successful stop.
    std::uint8_t needsStart : 1 = 0;
    std::uint8_t startBackoff : 1 = 0;
    std::uint8_t needsRecord : 1 = 0;
    std::uint8_t afterTurn : 2 = 0;
    std::uint8_t atApp : 1 = 0;
    std::uint64_t lastTurn = 0;  // the turn number of its last message (Message::turn)
    // When its last turn ended; while busy, when the current turn (or its stop) began.
    SteadyTime lastActive{};
    Entity* prev = nullptr;
    Entity* next = nullptr;
  };
  // An intrusive list of entities; an entity is in at most one (Entity::list). The idle list
  // holds the idle entities, least recently active first: an entity joins at the back when its
  // turn ends and leaves when a turn starts or it stops. One sweep timer passivates from the
  // front, so a message costs no timer, and a new entity no allocation beyond its map node. The
  // stop queues hold the entities whose stop waits, oldest first.
  struct EntityList {
    std::uint8_t id;  // nonzero, distinct per list
    Entity* head = nullptr;
    Entity* tail = nullptr;
    void pushBack(Entity& e);
    void remove(Entity& e);  // nothing when `e` is not in this list
  };
  enum ListId : std::uint8_t { kInNoList = 0, kIdleList, kHandoffStops, kPassivationStops };
  // Entity::afterTurn: stop (unpin), or forget then stop (the app asked, Kshard-Passivate).
  enum AfterTurn : std::uint8_t { kContinue = 0, kStopAfterTurn, kPassivateAfterTurn };
  // A caller waiting for shards to be released (an unassign or the drain).
  struct Handoff {
    std::vector<ShardId> shards;
    HandoffCallback done;
    Scheduler::TaskId deadline = 0;
  };
  enum class ShardState { kOwned, kHandingOff };
  struct Shard {
    ShardState state = ShardState::kOwned;
    Epoch epoch = 0;
    std::size_t entities = 0;
    // Load (sampleLoad): counted since the last sample, and the decayed averages of the rates.
    // `weight` is the share of the averages that measurements fill: it grows from 0 to 1 over
    // the first half-lives of a shard this pod just took, and dividing by it keeps a new
    // shard's rate from starting at zero (the receiver of a hot shard shows its load at once).
    std::uint64_t messages = 0;
    Duration busy{0};
    double messageRate = 0;
    double busyRate = 0;
    double weight = 0;
    SteadyTime measuredSince{};  // when this pod took the shard
  };
  // Work to do once the lock is released.
  using Actions = std::vector<UniqueFunction<void()>>;
  // A new entity waiting for a place under the active-entity limit, with its messages (a waiting
  // tell is not acknowledged yet: its answer is in Pending::heldAck).
  struct Waiter {
    EntityKey key;
    ShardId shard = 0;
    std::deque<Pending> messages;
    bool keep = false;  // kept active (keepActive): admitted pinned, with a start turn
  };
  using WaitQueue = std::list<Waiter>;

  // Starts the turn of the mailbox's first message.
  void startNextLocked(Entity& e, Actions& out);
  // Starts a turn with `next` (the entity is idle).
  void startTurnLocked(Entity& e, Pending next, Actions& out);
  // Hands a turn's message to the app, under no lock; the entity is busy (it stays in entities_).
  void startTurn(Entity& e, Epoch epoch, Message message, DeliveryCallback done);
  // The turn number of the entity's next message or start turn (Message::turn), recorded as its
  // last; the turn goes to the app (Entity::atApp).
  std::uint64_t nextTurnLocked(Entity& e);
  void onDelivered(Entity& e, DeliveryCallback done, StatusOr<http::Response> result);
  void onStopped(const EntityKey& key, Status result);
  void afterStopLocked(const EntityKey& key, Entity& e, const Status& result, Actions& out);
  // Starts a turn or a stop: the entity is busy and leaves the idle list.
  void markBusyLocked(Entity& e);
  // The sweep timer, armed to fire at `due` unless a sweep is already armed no later.
  void armSweepLocked(SteadyTime due);
  void onSweep(std::uint64_t seq);
  void afterTurnLocked(Entity& e, Actions& out);
  bool handingOffLocked(ShardId shard) const;
  // The entity's shard is handing off, or the lease fence is up: the entity must stop.
  bool mustStopLocked(ShardId shard) const { return fenced_ || handingOffLocked(shard); }
  // Whether a new message is taken now (the lease's fence has not begun).
  bool acceptingLocked() const;
  // Whether a message already taken may reach the app now (the lease runs).
  bool deliveringLocked() const;
  // A queued message that will not reach the app (the lease ran out): refused or dropped.
  void refuseQueuedLocked(Pending p, Actions& out, Refusal refusal = Refusal::kNotOwned);
  void armFenceLocked();
  void onFenceTimer(std::uint64_t seq);
  // Marks the entity stopping and calls the app's stop, or queues the call when
  // maxConcurrentStops are at the app. `handoff`: its shard is being released (queued first).
  void beginStopLocked(Entity& e, bool handoff, Actions& out);
  void sendStopLocked(Entity& e, Actions& out);
  // One stop call came back: sends the next waiting one, if any.
  void stopFinishedLocked(Actions& out);
  void removeEntityLocked(const EntityKey& key, Actions& out);
  void handOffLocked(const std::vector<ShardId>& shards, std::optional<Epoch> fence, Actions& out);
  void scheduleLocked(Duration delay, std::function<void()> task, Scheduler::TaskId* slot);
  void waitForReleaseLocked(std::vector<ShardId> shards, Duration timeout, HandoffCallback done,
                            Actions& out);
  void completeHandoffsLocked(Actions& out);
  void onHandoffDeadline(const std::shared_ptr<Handoff>& handoff);
  static void run(Actions& actions);

  // Entities that run without a message (entity_registry_pinned.cc).
  Entity& createEntityLocked(const EntityKey& key, ShardId id, Shard& shard);
  // Whether a new message for `shard` is taken now: owned (not handing off), the lease's fence
  // not begun.
  bool takingLocked(ShardId shard) const;
  // Whether entities of `shard` may start now: taking, and not draining.
  bool canRunLocked(ShardId shard) const;
  // A start turn is owed and may run now.
  bool startOwedLocked(const Entity& e) const {
    return e.needsStart && !e.startBackoff && canRunLocked(e.shard);
  }
  // Starts the start turn (the entity is idle).
  void beginStartLocked(Entity& e, Actions& out);
  void onStarted(Entity& e, StatusOr<http::Response> result);
  void scheduleStartRetryLocked(Entity& e);
  // The app's answer asks to passivate the entity (Kshard-Passivate: true); ignored for
  // singletons.
  void notePassivationLocked(Entity& e, const StatusOr<http::Response>& result);
  // An entity that must be recorded before its next turn: asks the recorder.
  void beginRecordLocked(Entity& e, Actions& out);
  void onRecorded(const EntityKey& key, std::uint64_t call, Status result);
  // The entity is recorded (or stays so): the tells held for it are answered 202 if a new tell
  // would be taken now, and refused otherwise.
  void releaseHeldAcksLocked(Entity& e, Actions& out);
  // Forgotten (if remembered), then stopped: the app asked.
  void beginPassivationLocked(Entity& e, Actions& out);
  void onForgotten(const EntityKey& key, std::uint64_t call, Status result);
  // A recorder call for the entity begins: it is busy, the call gets an id and its deadline
  // (recorderTimeout) armed, which answers it as failed, and the call goes out with `out`.
  // finishRecorderCallLocked: the call, when `id` is still the entity's current one (not answered
  // yet, nor past its deadline); it is then over. recorderAnsweredLocked: the entity the answer
  // is for, no longer busy, or null when it is gone.
  struct RecorderCall {
    std::uint64_t id = 0;
    Scheduler::TaskId deadline = 0;
    bool unpinned = false;  // unpin was called during it (the last of keepActive and unpin wins)
  };
  enum class RecorderCallKind { kRecord, kForget };
  void beginRecorderCallLocked(Entity& e, RecorderCallKind kind, Actions& out);
  std::optional<RecorderCall> finishRecorderCallLocked(const EntityKey& key, std::uint64_t id);
  Entity* recorderAnsweredLocked(const EntityKey& key);
  // Starts the owed start turns of idle entities (a start that failed while its shard could not
  // run, and so was not retried).
  void resumeOwedStartsLocked(Actions& out);
  void notifyShardsTakenLocked(std::vector<std::pair<ShardId, Epoch>> taken, Actions& out);
  void notifyAllOwnedLocked(Actions& out);
  // The active-entity limit (entity_registry_limit.cc).
  // Whether a message for `key`, not active, must wait for a place.
  bool mustWaitLocked(const EntityKey& key) const;
  // Queues the message of a waiting entity, or returns why not (its callback is then untouched).
  std::optional<Refusal> waitForPlaceLocked(Message& message, DeliveryCallback& done, Actions& out);
  // Admits waiting entities while there is room, then passivates least recently used idle
  // entities until the stops under way make room for the rest (and for a lower limit).
  void enforceLimitLocked(Actions& out);
  // Whether an entity that fell idle may be needed to make room.
  bool overLimitLocked() const {
    return options_.maxActiveEntities != 0 &&
           (!waitQueue_.empty() || entities_.size() > options_.maxActiveEntities);
  }
  // Creates the entity of the first waiter, acknowledges its tells and starts its first turn.
  void admitFirstWaiterLocked(Actions& out);
  // keepActive of a new entity at the limit: it waits for a place like a message's entity.
  void keepWhenAdmittedLocked(const EntityKey& key, ShardId shard, Actions& out);
  // unpin of an entity still waiting: it is no longer kept (dropped if no message waits).
  void unkeepWaiterLocked(const EntityKey& key);
  // Refuses every message of the waiting entities of `shards` (all of them: nullptr) with
  // kNotOwned: none was acknowledged, and the sender tries the next owner.
  void refuseWaitersLocked(const std::unordered_set<ShardId>* shards, Actions& out);
  // A stop failed: the limit's passivations pause for the stop retry's backoff.
  void pauseEvictionsLocked(const Entity& failed);
  Entity* leastRecentlyUsedLocked();

  EntityHost& host_;
  Scheduler& scheduler_;
  EntityRegistryOptions options_;  // idleTimeout under mu_
  Logger log_;

  // Taken by every I/O thread for each message (deliver and the turn's end): spins before it
  // sleeps, see base/adaptive_mutex.h.
  mutable AdaptiveMutex mu_;
  std::unordered_map<EntityKey, Entity, EntityKeyHash> entities_;
  // Entities per type, kept as they start and stop, so that a scrape reads it without a pass
  // over entities_ under the lock; a type leaves when its last entity stops.
  std::unordered_map<std::string, std::size_t> typeCounts_;
  std::unordered_map<ShardId, Shard> shards_;
  std::unordered_map<ShardId, Epoch> fences_;  // epoch of the last unassign/revoke per shard
  std::vector<std::shared_ptr<Handoff>> handoffs_;
  bool draining_ = false;
  OwnershipLease lease_;
  // lease_.until() (or the epoch's start while never renewed, max while off), in steady-clock
  // ticks, for appDeadline(); written under mu_.
  std::atomic<Duration::rep> appDeadline_{Duration::max().count()};
  void publishDeadlineLocked();
  bool fenced_ = false;             // the lease's fence is up: entities stop, nothing new is taken
  std::uint64_t fenceSeq_ = 0;      // the current fence timer; older ones find it stale
  std::uint64_t droppedTells_ = 0;  // tells dropped because the lease ran out
  LogThrottle fenceDropLog_{std::chrono::seconds(5)};
  std::unordered_map<Scheduler::TaskId, bool> timers_;  // pending timers, cancelled on destruction
  EntityList idle_{kIdleList};
  EntityList handoffStops_{kHandoffStops};
  EntityList passivationStops_{kPassivationStops};
  std::size_t stopsAtApp_ = 0;
  // Tells accepted and not yet answered by the app (in mailboxes or at the app), and their bytes.
  std::size_t pendingTells_ = 0;
  std::uint64_t turns_ = 0;     // the last turn number given (Message::turn)
  SteadyTime loadSampledAt_{};  // the last sampleLoad; the registry's creation before it
  std::size_t pendingTellBytes_ = 0;
  // An app that is down fails every entity's stop and every tell: at most one "entity stop
  // failed" and one "tell delivery failed" line per 5 s, each with the failures it stands for.
  LogThrottle stopFailureLog_{std::chrono::seconds(5)};
  LogThrottle tellFailureLog_{std::chrono::seconds(5)};
  // The sweep that passivates idle entities: at most one is current (armed, with sweepSeq_);
  // an older one that still fires finds its sequence number stale and does nothing.
  bool sweepArmed_ = false;
  SteadyTime sweepDue_{};
  std::uint64_t sweepSeq_ = 0;
  std::vector<ShardsTakenListener> takenListeners_;
  EntityRecorder* recorder_ = nullptr;
  // The recorder calls in flight, by entity (an entity has at most one: it is busy meanwhile).
  std::unordered_map<EntityKey, RecorderCall, EntityKeyHash> recorderCalls_;
  std::uint64_t recorderCallSeq_ = 0;
  LogThrottle startFailureLog_{std::chrono::seconds(5)};
  // Entities whose stop call is at the app or waits for a place (Entity::stopping): each frees
  // a place under the limit when it returns, unless it failed or messages came meanwhile.
  std::size_t stopping_ = 0;
  // The waiting entities, first come first, and each by key; their messages, all together.
  WaitQueue waitQueue_;
  std::unordered_map<EntityKey, WaitQueue::iterator, EntityKeyHash> waiting_;
  std::size_t waitingMessages_ = 0;
  // After a failed stop, no passivation for the limit before this (pauseEvictionsLocked), so
  // that an app that fails every stop is not asked for another entity's stop at once.
  SteadyTime evictionsPausedUntil_{};
  bool evictionTimerArmed_ = false;
};

}  // namespace kshard::sidecar
