import threading
import unittest

from tests.helpers import Recorder, ServerCase, code_of, kshard
from tests.test_server import msg_path as path


class Starter(Recorder):
    """A Recorder that is told of starts; fails them while `fail` is set."""

    def __init__(self):
        super().__init__()
        self.starts, self.fail, self.passivate = [], None, False

    def on_start(self, st):
        with self.mu:
            self.starts.append(st)
            if self.fail is not None:
                raise self.fail
            return kshard.Reply(passivate=self.passivate) if self.passivate else None


class Singleton:
    def __init__(self):
        self.mu = threading.Lock()
        self.calls, self.fail = [], None

    def note(self, call):
        with self.mu:
            self.calls.append(call)

    def on_start(self, st):
        self.note(f"start {st.type} {st.id}")
        if self.fail is not None:
            raise self.fail

    def on_message(self, msg):
        self.note("message " + msg.body.decode())
        return kshard.Reply(body=b"tick", passivate=True)

    def on_stop(self, stop):
        self.note(("reset-stop " if stop.reset else "stop ") + stop.id)


class StartTest(ServerCase):
    def test_a_start_activates_an_entity_without_a_message(self):
        rec = Recorder()  # no on_start
        self.server.handle("counter", rec)
        self.assertEqual(self.post(path("a") + "/start", Kshard_Turn="3", Kshard_Epoch="7")[0], 200)
        self.assertEqual((self.server.active_entities(), rec.messages), (1, []))
        status, _, body = self.post(path("a"), Kshard_Turn="2")
        self.assertEqual((status, code_of(body)), (409, "LateMessage"))
        self.assertEqual(self.post(path("a") + "/stop", Kshard_Turn="3")[0], 200)
        self.assertEqual([(s.id, s.turn) for s in rec.stops], [("a", 3)])
        self.assertEqual(self.post(path("a") + "/start", Kshard_Turn="3")[0], 409)
        status, _, body = self.post(path("a", "other") + "/start")
        self.assertEqual((status, code_of(body)), (404, "UnknownEntityType"))

    def test_on_start_runs_once_and_a_failed_start_is_asked_again(self):
        h = Starter()
        h.fail = kshard.Error(503, "StoreUnavailable", "not yet")
        self.server.handle("counter", h)
        status, _, body = self.post(path("a") + "/start", Kshard_Turn="1", Kshard_Epoch="4",
                                    Kshard_Shard="9")
        self.assertEqual((status, code_of(body), self.server.active_entities()),
                         (503, "StoreUnavailable", 0))
        self.post(path("a") + "/stop", Kshard_Turn="1")
        self.assertEqual(h.stops, [])  # never started: nothing to stop
        h.fail = None
        self.assertEqual(self.post(path("a") + "/start", Kshard_Turn="2")[0], 200)
        self.post(path("a") + "/start", Kshard_Turn="3")  # running: no call
        self.post(path("b"), Kshard_Turn="4")
        self.post(path("b") + "/start", Kshard_Turn="5")  # a message started it
        self.assertEqual((len(h.starts), self.server.active_entities()), (2, 2))
        st = h.starts[0]
        self.assertEqual((st.type, st.id, st.turn, st.epoch, st.shard), ("counter", "a", 1, 4, 9))

    def test_passivate_is_set_on_the_answer_only_by_the_reply(self):
        h = Starter()
        h.passivate = True
        self.server.handle("counter", h)
        self.server.handle("closing", on_message=lambda m: kshard.json_reply("bye", passivate=True))
        self.server.handle("sneaky", on_message=lambda m: kshard.Reply(
            headers={"Kshard-Passivate": "true"}))
        _, headers, _ = self.post(path("a") + "/start")
        self.assertEqual(headers.get("kshard-passivate"), "true")
        status, headers, body = self.post(path("x", "closing"))
        self.assertEqual((status, headers.get("kshard-passivate"), body), (200, "true", b'"bye"'))
        self.assertNotIn("kshard-passivate", self.post(path("x", "sneaky"))[1])

    def test_a_singleton_starts_takes_messages_and_stops(self):
        h = Singleton()
        h.fail = RuntimeError("not yet")
        self.server.handle_singleton("ticker", h)
        url = "/kshard/singletons/ticker"
        self.assertEqual(self.post(url + "/start", Kshard_Turn="1")[0], 500)
        # A message while the start is asked again: delivered, and the start still runs on_start.
        status, headers, body = self.post(url, b"m1", Kshard_Turn="2")
        self.assertEqual((status, body), (200, b"tick"))
        self.assertEqual(headers.get("kshard-passivate"), "true")  # the sidecar ignores it
        h.fail = None
        self.post(url + "/start", Kshard_Turn="3")
        self.post(url + "/start", Kshard_Turn="4")  # running: no call
        self.assertEqual(self.post(url, b"m2", Kshard_Turn="4")[0], 409)
        self.post(url + "/stop", Kshard_Turn="4")
        self.post(url + "/stop", Kshard_Turn="4")  # not running: no call
        self.assertEqual(h.calls, ["start kshard.io/singleton ticker", "message m1",
                                   "start kshard.io/singleton ticker", "stop ticker"])
        status, _, body = self.post("/kshard/singletons/other/start")
        self.assertEqual((status, code_of(body)), (404, "UnknownSingleton"))
        self.assertEqual(self.post(path("ticker", kshard.SINGLETON_TYPE))[0], 404)
        self.server.handle_singleton("quiet", on_start=lambda st: None)
        status, _, body = self.post("/kshard/singletons/quiet")
        self.assertEqual((status, code_of(body)), (404, "NotFound"))

    def test_reset_stops_singletons_and_refuses_the_old_processes_starts(self):
        rec, h = Recorder(), Singleton()
        self.server.handle("counter", rec)
        self.server.handle_singleton("ticker", h)
        self.post("/kshard/singletons/ticker/start", Kshard_Incarnation="old", Kshard_Turn="1")
        self.post(path("a") + "/start", Kshard_Incarnation="old", Kshard_Turn="2")
        self.assertEqual(self.post("/kshard/reset", Kshard_Incarnation="new")[0], 200)
        self.assertEqual((h.calls[1:], len(rec.stops)), (["reset-stop ticker"], 1))
        for p in ("/kshard/singletons/ticker/start", path("a") + "/start"):
            status, _, body = self.post(p, Kshard_Incarnation="old", Kshard_Turn="9")
            self.assertEqual((status, code_of(body)), (409, "StaleSidecar"), p)
        self.assertEqual(self.post("/kshard/singletons/ticker/start", Kshard_Incarnation="new",
                                   Kshard_Turn="1")[0], 200)
        self.assertEqual(self.server.active_entities(), 1)


if __name__ == "__main__":
    unittest.main()
