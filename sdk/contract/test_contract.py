"""The app contract suite (sdk/README.md), run against any counter app: the app command template
is $KSHARD_CONTRACT_APP (see run.py). Each test drives the app as its sidecar would."""

import json
import os
import threading
import unittest

from harness import App, FakeSidecar, error_code, request

TEMPLATE = os.environ.get("KSHARD_CONTRACT_APP", "")
MiB = 1 << 20


def value_of(answer):
    status, _, body = answer
    assert status == 200, (status, body)
    return json.loads(body)["value"]


@unittest.skipUnless(TEMPLATE, "set KSHARD_CONTRACT_APP to an app command template")
class ContractTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.app = App(TEMPLATE)

    @classmethod
    def tearDownClass(cls):
        cls.app.stop()

    def assertError(self, answer, status, code=None):
        got, headers, body = answer
        self.assertEqual(got, status, body)
        self.assertIsNotNone(error_code(body), f"not kshard's error shape: {body[:200]!r}")
        if code is not None:
            self.assertEqual(error_code(body), code)
        self.assertNotIn("kshard-error", headers, "an app's answer has no Kshard-Error")

    def test_messages_of_one_entity_are_applied_in_turn_order(self):
        for turn in range(1, 31):
            self.assertEqual(value_of(self.app.increment("order-1", turn=turn)), turn)

    def test_concurrent_calls_for_one_entity_lose_nothing(self):
        # The sidecar sends one at a time; an app must not lose updates even if calls overlap.
        def work():
            for _ in range(20):
                self.assertEqual(self.app.increment("order-2")[0], 200)
        threads = [threading.Thread(target=work) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(value_of(self.app.message("order-2", b'{"op":"get"}')), 120)

    def test_a_late_message_is_refused_and_does_not_restart_the_entity(self):
        for turn in (1, 2, 3):
            self.app.increment("late-1", turn=turn)
        self.assertError(self.app.increment("late-1", turn=3), 409, "LateMessage")
        self.assertError(self.app.increment("late-1", turn=2), 409, "LateMessage")
        self.assertEqual(self.app.stop_entity("late-1", turn=5)[0] // 100, 2)
        self.assertError(self.app.increment("late-1", turn=4), 409, "LateMessage")
        activations = [e for e in self.app.events() if e["entity"] == "late-1" and e["event"] == "activate"]
        self.assertEqual(len(activations), 1, "a late message started the entity again")
        self.assertEqual(value_of(self.app.increment("late-1", turn=6)), 4)

    def test_stop_saves_and_forgets_and_the_next_message_loads_again(self):
        self.assertEqual(value_of(self.app.increment("stop-1", by=5, turn=1, epoch=3, shard=7)), 5)
        self.assertEqual(self.app.stop_entity("stop-1", turn=1, shard=7)[0] // 100, 2)
        self.assertEqual(value_of(self.app.message("stop-1", b'{"op":"get"}', turn=2, epoch=3)), 5)
        events = [(e["event"], e["value"], e["shard"]) for e in self.app.events() if e["entity"] == "stop-1"]
        self.assertEqual(events, [("activate", 0, "7"), ("stop", 5, "7"), ("activate", 5, "1")])

    def test_a_stop_of_an_entity_not_held_is_2xx(self):
        self.assertEqual(self.app.stop_entity("never-started", turn=9)[0] // 100, 2)
        self.assertEqual(self.app.stop_entity("never-started")[0] // 100, 2)

    def test_activation_and_stop_lines_have_the_counters_shape(self):
        self.app.increment("shape-1", turn=1, epoch=4, shard=12)
        self.app.stop_entity("shape-1", turn=1, shard=12)
        lines = [e for e in self.app.events() if e["entity"] == "shape-1"]
        self.assertEqual([e["event"] for e in lines], ["activate", "stop"])
        for e in lines:
            self.assertEqual(set(e), {"ts_us", "event", "entity", "pod", "shard", "epoch", "value"})
            self.assertEqual((e["pod"], e["shard"], e["epoch"]), (self.app.pod, "12", 4))
            self.assertIsInstance(e["ts_us"], int)

    def test_error_answers_have_kshards_shape(self):
        self.assertError(self.app.message("err-1", b'{"op":"get"}', typ="no-such-type"), 404)
        self.assertError(self.app.message("err-1", b"not json"), 400, "BadRequest")
        self.assertError(self.app.message("err-1", b'{"op":"explode"}'), 400, "BadRequest")
        self.assertError(self.app.message("err-1", b'{"op":"increment","by":"x"}'), 400, "BadRequest")
        self.assertError(request(self.app.app_port, "POST", "/kshard/nothing-here"), 404)

    def test_large_bodies_up_to_the_sidecars_limit(self):
        head = b'{"op":"increment","by":2,"pad":"'
        body = head + b"x" * (4 * MiB - len(head) - 2) + b'"}'
        self.assertEqual(len(body), 4 * MiB)
        self.assertEqual(value_of(self.app.message("large-1", body, turn=1)), 2)
        self.assertEqual(value_of(self.app.message("large-1", body, turn=2)), 4)

    def test_unicode_and_reserved_characters_in_ids(self):
        # Ids up to 1024 bytes are valid, but the counters' store makes one file name of the
        # percent-encoded id (at most 255 bytes): longer ones are not tried here.
        for i, ident in enumerate(["ü", "日本語", "🙂 smile", "a/b", "50%+?#&=", "é" * 30]):
            status, _, body = self.app.increment(ident, by=i + 1, turn=1)
            self.assertEqual(status, 200, (ident, body))
            self.assertEqual(json.loads(body)["id"], ident)
            self.assertEqual(self.app.stop_entity(ident, turn=1)[0] // 100, 2)
            self.assertEqual(value_of(self.app.message(ident, b'{"op":"get"}', turn=2)), i + 1)

    def test_public_api_reaches_counters_through_the_sidecar(self):
        sidecar = FakeSidecar(self.app)
        try:
            port = self.app.public_port
            self.assertEqual(request(port, "GET", "/healthz")[0], 200)
            status, headers, body = request(port, "POST", "/counters/pub%C3%BC/increment?by=3")
            self.assertEqual((status, json.loads(body)["value"], json.loads(body)["id"]), (200, 3, "pubü"))
            self.assertEqual(headers.get("kshard-owner"), "fake-pod")
            self.assertEqual(json.loads(request(port, "GET", "/counters/pub%C3%BC")[2])["value"], 3)
            self.assertError(request(port, "POST", "/counters/pub/increment?by=x"), 400, "BadRequest")
            sidecar.refuse = (504, "SendTimeout")
            status, _, body = request(port, "GET", "/counters/pub")
            self.assertEqual((status, error_code(body)), (504, "SendTimeout"))
        finally:
            sidecar.close()
        status, _, body = request(self.app.public_port, "GET", "/counters/pub")
        self.assertEqual((status, error_code(body)), (502, "SidecarUnavailable"))


@unittest.skipUnless(TEMPLATE, "set KSHARD_CONTRACT_APP to an app command template")
class ResetAndFencingTest(unittest.TestCase):
    """Each test with its own app process: a reset changes what the app accepts."""

    def setUp(self):
        self.app = App(TEMPLATE)
        self.addCleanup(self.app.stop)

    def test_reset_stops_every_entity_and_refuses_the_previous_process(self):
        for i, ident in enumerate(["r1", "r2", "r3"]):
            self.assertEqual(value_of(self.app.increment(ident, by=i + 1, turn=100 + i,
                                                         incarnation="old")), i + 1)
        self.assertEqual(self.app.reset("new")[0] // 100, 2)
        stops = sorted((e["entity"], e["value"]) for e in self.app.events() if e["event"] == "stop")
        self.assertEqual(stops, [("r1", 1), ("r2", 2), ("r3", 3)])
        status, headers, body = self.app.increment("r1", turn=500, incarnation="old")
        self.assertEqual((status, error_code(body)), (409, "StaleSidecar"))
        self.assertNotEqual(self.app.stop_entity("r2", incarnation="old")[0] // 100, 2)
        # Turns start over with the new process; the values were saved.
        self.assertEqual(value_of(self.app.increment("r1", turn=1, incarnation="new")), 2)
        self.assertEqual(value_of(self.app.increment("r2", turn=2, incarnation="new")), 3)
        self.assertEqual(self.app.reset("new")[0] // 100, 2)  # repeated: still 2xx

    def test_an_older_epoch_is_fenced_by_a_newer_owner(self):
        other = App(TEMPLATE, pod="other-pod", state_dir=self.app.state_dir)
        self.addCleanup(other.stop)
        self.assertEqual(value_of(self.app.increment("f1", turn=1, epoch=1)), 1)
        self.assertEqual(value_of(other.increment("f1", turn=1, epoch=2)), 2)
        status, _, body = self.app.increment("f1", turn=2, epoch=1)
        self.assertEqual((status, error_code(body)), (409, "Fenced"))
        self.assertEqual(self.app.stop_entity("f1", turn=2)[0] // 100, 2)
        self.assertEqual(value_of(other.message("f1", b'{"op":"get"}', turn=2, epoch=2)), 2)


if __name__ == "__main__":
    unittest.main()
