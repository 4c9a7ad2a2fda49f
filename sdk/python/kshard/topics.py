"""Topics (sdk/README.md, "publishing to a topic"): a publication as the app's topic callback
gets it, and what a publish came to."""

from dataclasses import dataclass, field

HEADER_TOPIC = "Kshard-Topic"
HEADER_PUBLISHER = "Kshard-Publisher"


@dataclass
class Publication:
    """A topic's message, delivered once to every pod of the ShardMap. `publisher` is the pod
    whose app published it; `incarnation` the delivering sidecar process."""
    topic: str
    publisher: str
    incarnation: str
    headers: dict  # every request header (the publisher's and kshard's), names in lower case
    body: bytes


@dataclass
class PodFailure:
    """A pod that did not accept a publication, and why (a code of sdk/README.md)."""
    pod: str
    code: str
    message: str = ""


@dataclass
class PublishResult:
    """The pods a publication was sent to, those that accepted it (`entities`: the tells queued
    with `entities=`), and why the others did not."""
    topic: str
    pods: int
    accepted: int
    entities: int = 0
    entities_refused: int = 0
    failed: list = field(default_factory=list)  # of PodFailure

    @classmethod
    def from_json(cls, obj):
        return cls(str(obj.get("topic", "")), int(obj.get("pods", 0)),
                   int(obj.get("accepted", 0)), int(obj.get("entities", 0)),
                   int(obj.get("entitiesRefused", 0)),
                   [PodFailure(str(f.get("pod", "")), str(f.get("code", "")),
                               str(f.get("message", ""))) for f in obj.get("failed") or []])

    def everyone(self):
        """True when every pod the publication was sent to accepted it."""
        return self.accepted == self.pods and not self.failed
