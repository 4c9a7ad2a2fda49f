import json
import threading
import time
import unittest

from tests.helpers import Recorder, ServerCase, code_of, kshard, post, start


def msg_path(ident, typ="counter"):
    return f"/kshard/entities/{kshard.path_escape(typ)}/{kshard.path_escape(ident)}"


class EntityServerTest(ServerCase):
    def setUp(self):
        super().setUp()
        self.rec = Recorder()
        self.server.handle("counter", self.rec)

    def test_calls_of_one_entity_run_one_at_a_time_and_others_concurrently(self):
        self.rec.delay = 0.005
        statuses = []
        threads = [threading.Thread(target=lambda i=i: statuses.append(
            self.post(msg_path(f"e{i % 4}"))[0])) for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(statuses, [200] * 40)
        self.assertEqual(self.rec.max_per, 1)
        self.assertGreaterEqual(self.rec.max_all, 2)

    def test_messages_are_taken_in_turn_order_and_late_ones_refused(self):
        for turn in range(1, 6):
            self.assertEqual(self.post(msg_path("a"), Kshard_Turn=str(turn))[0], 200)
        for turn in ("5", "3"):
            status, headers, body = self.post(msg_path("a"), Kshard_Turn=turn)
            self.assertEqual((status, code_of(body)), (409, "LateMessage"))
            self.assertNotIn("kshard-error", headers)
        self.assertEqual(self.post(msg_path("a") + "/stop", Kshard_Turn="7")[0], 200)
        self.assertEqual([(s.id, s.turn) for s in self.rec.stops], [("a", 7)])
        self.assertEqual(self.post(msg_path("a"), Kshard_Turn="6")[0], 409)
        self.assertEqual(self.server.active_entities(), 0)
        self.assertEqual(self.post(msg_path("a"), Kshard_Turn="8")[0], 200)
        self.assertEqual(self.post(msg_path("a"))[0], 200)  # no turn: not checked
        self.assertEqual(self.server.active_entities(), 1)

    def test_stop_of_an_entity_not_held_is_2xx_and_calls_no_handler(self):
        for path in (msg_path("never") + "/stop", "/kshard/entities/other/x/stop"):
            self.assertEqual(self.post(path, Kshard_Turn="3")[0], 200)
        self.assertEqual(self.rec.stops, [])
        self.assertEqual(self.post(msg_path("never"), Kshard_Turn="2")[0], 409)

    def test_a_failed_stop_keeps_the_entity_active(self):
        self.post(msg_path("a"), Kshard_Turn="1")
        self.rec.stop_error = kshard.Error(500, "StoreUnavailable", "disk full")
        status, _, body = self.post(msg_path("a") + "/stop", Kshard_Turn="1")
        self.assertEqual((status, code_of(body)), (500, "StoreUnavailable"))
        self.assertEqual(self.server.active_entities(), 1)
        self.rec.stop_error = None
        self.assertEqual(self.post(msg_path("a") + "/stop", Kshard_Turn="1")[0], 200)
        self.assertEqual(self.server.active_entities(), 0)

    def test_reset_stops_every_entity_and_refuses_other_sidecar_processes(self):
        resets = []
        self.server.on_reset(lambda: resets.append(1))
        for i, ident in enumerate("abc"):
            self.post(msg_path(ident), Kshard_Incarnation="old", Kshard_Turn=str(100 + i))
        self.assertEqual(self.post("/kshard/reset", Kshard_Incarnation="new")[0], 200)
        self.assertEqual(sorted(s.id for s in self.rec.stops), ["a", "b", "c"])
        self.assertTrue(all(s.reset for s in self.rec.stops))
        self.assertEqual((resets, self.server.active_entities()), ([1], 0))
        status, _, body = self.post(msg_path("a"), Kshard_Incarnation="old", Kshard_Turn="200")
        self.assertEqual((status, code_of(body)), (409, "StaleSidecar"))
        self.assertEqual(self.post(msg_path("a") + "/stop", Kshard_Incarnation="old")[0], 409)
        self.assertEqual(self.post(msg_path("a"), Kshard_Incarnation="new", Kshard_Turn="1")[0], 200)

    def test_reset_waits_for_the_calls_in_flight(self):
        self.rec.block = threading.Event()
        results = {}
        t1 = threading.Thread(target=lambda: results.setdefault(
            "msg", self.post(msg_path("a"), Kshard_Turn="1")[0]))
        t1.start()
        while self.rec.now == 0:
            time.sleep(0.001)
        t2 = threading.Thread(target=lambda: results.setdefault(
            "reset", self.post("/kshard/reset", Kshard_Incarnation="x")[0]))
        t2.start()
        time.sleep(0.1)
        self.assertNotIn("reset", results)
        self.rec.block.set()
        t1.join()
        t2.join()
        self.assertEqual(results, {"msg": 200, "reset": 200})
        self.assertEqual(len(self.rec.stops), 1)

    def test_error_answers_have_kshards_shape(self):
        def fail(msg):
            raise RuntimeError("boom")

        def refuse(msg):
            raise kshard.Error(422, "Invalid", "no")

        self.server.handle("failing", on_message=fail)
        self.server.handle("refusing", on_message=refuse)
        cases = [("/kshard/entities/nope/a", 404, "UnknownEntityType"),
                 ("/kshard/entities/failing/a", 500, "Internal"),
                 ("/kshard/entities/refusing/a", 422, "Invalid"),
                 ("/kshard/other", 404, "NotFound"),
                 ("/kshard/entities/counter/a/b/c", 404, "NotFound"),
                 ("/kshard/entities/counter/%zz", 400, "InvalidArgument"),
                 ("/kshard/entities/counter/%FF", 400, "InvalidArgument")]
        for path, status, code in cases:
            got, headers, body = self.post(path)
            self.assertEqual((got, code_of(body)), (status, code), path)
            self.assertTrue(headers["content-type"].startswith("application/json"))
        status, headers, _ = post(self.port, msg_path("a"), method="GET")
        self.assertEqual((status, headers.get("allow")), (405, "POST"))

    def test_headers_unicode_ids_and_large_bodies_reach_the_handler(self):
        ident = "ü/日本 🙂%+?#"
        body = b"x" * kshard.DEFAULT_MAX_BODY_BYTES
        status, _, out = self.post(msg_path(ident), body, Kshard_Shard="17", Kshard_Epoch="9",
                                   Kshard_Mode="tell", Kshard_Incarnation="inc", Kshard_Turn="4",
                                   Idempotency_Key="k1")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(out), {"id": ident, "bytes": len(body)})
        m = self.rec.messages[0]
        self.assertEqual((m.id, m.shard, m.epoch, m.mode, m.incarnation, m.turn),
                         (ident, 17, 9, "tell", "inc", 4))
        self.assertEqual(m.headers["idempotency-key"], "k1")
        status, _, out = self.post(msg_path(ident), body + b"x")
        self.assertEqual((status, code_of(out)), (413, "PayloadTooLarge"))

    def test_stop_bounds_are_forgotten_after_their_time(self):
        now = [1000.0]
        self.server._table.clock = lambda: now[0]
        self.server._table.keep = 60
        self.post(msg_path("a") + "/stop", Kshard_Turn="5")
        now[0] += 120
        self.post(msg_path("b") + "/stop", Kshard_Turn="5")
        self.assertIsNone(self.server._table.get(("counter", "a")))
        self.assertIsNotNone(self.server._table.get(("counter", "b")))


if __name__ == "__main__":
    unittest.main()


class HeaderAndPortTest(unittest.TestCase):
    def test_a_handlers_kshard_headers_are_not_passed_on(self):
        # A handler that copies a nested call's Kshard-Error onto its answer must not make its
        # caller read the message as not delivered: Kshard-* headers are the sidecar's to set.
        class Nested:
            def on_message(self, msg):
                return kshard.Reply(502, {"Kshard-Error": "SendTimeout", "X-App": "kept"}, b"{}")

            def on_stop(self, stop):
                pass

        server = kshard.EntityServer()
        server.handle("counter", Nested())
        httpd, port = start(server)
        try:
            status, headers, _ = post(port, msg_path("c1"))
        finally:
            httpd.shutdown()
            httpd.server_close()
        self.assertEqual((status, headers.get("kshard-error"), headers.get("x-app")),
                         (502, None, "kept"))

    def test_a_public_handler_does_not_serve_the_callbacks(self):
        # An app's public port listens beyond 127.0.0.1: a callback taken there would let anyone
        # activate an entity or reset the app behind the sidecar's back.
        server = kshard.EntityServer()
        rec = Recorder()
        server.handle("counter", rec)
        public = kshard.make_request_handler(None, lambda h: kshard.json_reply({"ok": True}))
        httpd = kshard.ThreadingHTTPServer(("127.0.0.1", 0), public)
        kshard.serve_in_thread(httpd)
        try:
            port = httpd.server_address[1]
            self.assertEqual(post(port, msg_path("c1"))[0], 200)
            self.assertEqual(post(port, "/kshard/reset")[0], 200)
        finally:
            httpd.shutdown()
            httpd.server_close()
        self.assertEqual(rec.messages, [])
