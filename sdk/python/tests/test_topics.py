import json
import threading
import unittest

from tests.helpers import code_of, kshard, post, start
from tests import test_client
from tests.test_client import sidecar_error


class TopicCallbackTest(unittest.TestCase):
    def serve(self, server):
        httpd, port = start(server)
        self.addCleanup(httpd.server_close)
        self.addCleanup(httpd.shutdown)
        return port

    def test_publications_reach_the_topic_handler_with_their_publisher(self):
        server = kshard.EntityServer()
        got, mu = [], threading.Lock()

        @server.handle_topics
        def on_topic(pub):
            with mu:
                got.append(pub)
            if pub.topic == "refused":
                raise kshard.Error(422, "NotForMe", "this app ignores " + pub.topic)

        port = self.serve(server)
        status, _, body = post(port, "/kshard/topics/news%2Fsport", b"hello",
                               {"Kshard-Topic": "news/sport", "Kshard-Publisher": "pod-2",
                                "Kshard-Incarnation": "inc-1"})
        self.assertEqual(status, 200, body)
        status, _, body = post(port, "/kshard/topics/refused")
        self.assertEqual((status, code_of(body)), (422, "NotForMe"))
        p = got[0]
        self.assertEqual((len(got), p.topic, p.publisher, p.incarnation, p.body),
                         (2, "news/sport", "pod-2", "inc-1", b"hello"))
        self.assertEqual(server.active_entities(), 0)
        for bad in ("/kshard/topics/", "/kshard/topics/a/b", "/kshard/topics/%zz"):
            status, _, body = post(port, bad)
            self.assertEqual((status, code_of(body)), (400, "BadRequest"), bad)

    def test_an_app_without_a_topic_handler_refuses_publications(self):
        port = self.serve(kshard.EntityServer())
        status, _, body = post(port, "/kshard/topics/news", b"x")
        self.assertEqual((status, code_of(body)), (404, "NotFound"))
        self.assertEqual(post(port, "/kshard/topics/news", method="GET")[0], 405)

    def test_a_stale_sidecar_process_is_refused(self):
        server = kshard.EntityServer()
        server.handle_topics(lambda pub: None)
        port = self.serve(server)
        self.assertEqual(post(port, "/kshard/reset", headers={"Kshard-Incarnation": "new"})[0], 200)
        status, _, body = post(port, "/kshard/topics/news", b"x", {"Kshard-Incarnation": "old"})
        self.assertEqual((status, code_of(body)), (409, "StaleSidecar"))
        self.assertEqual(post(port, "/kshard/topics/news", b"x", {"Kshard-Incarnation": "new"})[0], 200)


class PublishTest(unittest.TestCase):
    fake = test_client.ClientTest.fake  # a fake sidecar's app API, closed after the test

    def test_publish_returns_what_every_pod_made_of_it(self):
        def answer(h, body):
            tells = 4 if "?entities=" in h.path else 0
            return 200, {"Content-Type": "application/json"}, json.dumps({
                "topic": "news/sport", "pods": 3, "accepted": 2, "entities": tells,
                "entitiesRefused": 1, "failed": [
                    {"pod": "p3", "code": "OutcomeUnknown", "message": "no answer in time"}]}).encode()
        f = self.fake(answer)
        r = f.client.publish("news/sport", b"hello", idempotency_key="k")
        self.assertEqual((r.topic, r.pods, r.accepted, r.entities, r.entities_refused, r.everyone()),
                         ("news/sport", 3, 2, 0, 1, False))
        self.assertEqual(r.failed, [kshard.PodFailure("p3", "OutcomeUnknown", "no answer in time")])
        path, headers = f.requests[0]
        self.assertEqual((path, headers["Idempotency-Key"]), ("/v1/topics/news%2Fsport", "k"))
        r = f.client.publish("news/sport", b"hello", entities="counter")
        self.assertEqual((f.requests[1][0], r.entities), ("/v1/topics/news%2Fsport?entities=counter", 4))
        self.assertTrue(kshard.PublishResult("t", 2, 2).everyone())

    def test_publish_errors_are_the_sidecars(self):
        f = self.fake(lambda h, b: sidecar_error(400, "BadRequest"))
        with self.assertRaises(kshard.BadRequestError):
            f.client.publish("..")
        f = self.fake(lambda h, b: (503, {"Kshard-Error": "NotReady"}, kshard.error_body("NotReady", "")))
        with self.assertRaises(kshard.NotReadyError):
            f.client.publish("news")
        f = self.fake(lambda h, b: (200, {}, b"not json"))
        with self.assertRaises(kshard.Error):
            f.client.publish("news")


if __name__ == "__main__":
    unittest.main()
