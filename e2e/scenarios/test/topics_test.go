package scenariotest

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"kshard.local/e2e/scenarios/load"
)

const topicPublications = 20

// publishAnswer is the sidecar's answer to POST /v1/topics/{topic} (docs/openapi/sidecar.yaml),
// passed back by the counter's POST /topics/{topic}/publish.
type publishAnswer struct {
	Topic    string `json:"topic"`
	Pods     int    `json:"pods"`
	Accepted int    `json:"accepted"`
	Failed   []struct {
		Pod     string `json:"pod"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"failed"`
}

// scenarioTopics: under the continuous load, topicPublications publications, each on a topic of
// its own, through the counter of a random ready pod (its sidecar's POST /v1/topics/{topic}).
// Each answer counts every pod of the ShardMap as it was around the publish, and all of them
// accepted it; afterwards every pod's counter (GET /topics) received each publication exactly
// once.
func scenarioTopics(c sc, s *suite) {
	s.waitSteady(c, 3)
	s.startContinuous()
	start := time.Now()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var topics []string
	published := 0
	for i := 0; i < topicPublications; i++ {
		topic := fmt.Sprintf("%s-topic-%d", s.runID, i)
		if s.publishOnce(c, rng, topic, i) {
			published++
		}
		topics = append(topics, topic)
	}
	c.r.figure("publications accepted by every pod of the map", fmt.Sprintf("%d of %d", published, len(topics)))

	// An accepted publication was answered by each pod's counter: the counts are in. Each pod
	// that ran all along is read; none may count a publication twice or miss one.
	pods := s.pods.Ready()
	if len(pods) == 0 {
		c.fatalf("no ready pod to read the topic counts from")
	}
	exact := 0
	for _, p := range pods {
		counts, err := topicCounts(p)
		if err != nil {
			c.errorf("GET /topics of %s: %v", p.Name, err)
			continue
		}
		var wrong []string
		for _, t := range topics {
			if counts[t] != 1 {
				wrong = append(wrong, fmt.Sprintf("%s ×%d", t, counts[t]))
			}
		}
		if len(wrong) > 0 {
			c.errorf("the counter of %s did not receive each publication exactly once: %s", p.Name, strings.Join(head(wrong, 10), "; "))
		} else {
			exact++
		}
	}
	c.r.figure("pods whose counter received each publication exactly once", fmt.Sprintf("%d of %d", exact, len(pods)))

	st := s.window(c, start, time.Now())
	c.r.figure("failed requests of the continuous load", st.Failed)
	if st.Failed > 0 {
		c.errorf("%d of %d requests failed during the publications: %v", st.Failed, st.Sent, c.r.Requests[continuousDriver].FailReasons)
	}
}

// publishOnce publishes one message on `topic` through a random ready pod and checks the answer
// against the ShardMap's registered pods before and after it; true when every pod accepted it.
func (s *suite) publishOnce(c sc, rng *rand.Rand, topic string, n int) bool {
	c.Helper()
	ready := s.pods.Ready()
	if len(ready) == 0 {
		c.fatalf("no ready pod to publish through")
	}
	via := ready[rng.Intn(len(ready))]
	before := s.latest().Registered()
	target := fmt.Sprintf("http://%s/topics/%s/publish", net.JoinHostPort(via.IP, strconv.Itoa(publicPort)), url.PathEscape(topic))
	code, body, err := httpDo(http.MethodPost, target, nil, []byte(fmt.Sprintf(`{"n":%d}`, n)))
	after := s.latest().Registered()
	if err != nil || code != http.StatusOK {
		c.errorf("publish %s through %s: %d %s %v", topic, via.Name, code, truncate(body, 300), err)
		return false
	}
	var a publishAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		c.errorf("publish %s through %s: the answer is not JSON: %v: %s", topic, via.Name, err, truncate(body, 300))
		return false
	}
	c.logf("published %s through %s: %d of %d pods accepted", topic, via.Name, a.Accepted, a.Pods)
	ok := true
	if len(a.Failed) > 0 || a.Accepted != a.Pods {
		c.errorf("publish %s through %s: %d of %d pods accepted, failed: %+v", topic, via.Name, a.Accepted, a.Pods, a.Failed)
		ok = false
	}
	// The map did not change around the publish (the scenario scales nothing): the sidecar's
	// view is the map's registered pods.
	if slices.Equal(before, after) && a.Pods != len(before) {
		c.errorf("publish %s through %s counted %d pods; the ShardMap registers %d (%v)", topic, via.Name, a.Pods, len(before), before)
		ok = false
	}
	return ok
}

// topicCounts reads a pod's counter's publications received, by topic.
func topicCounts(p load.Pod) (map[string]int, error) {
	code, body, err := httpDo(http.MethodGet, fmt.Sprintf("http://%s/topics", net.JoinHostPort(p.IP, strconv.Itoa(publicPort))), nil, nil)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%d %s", code, truncate(body, 200))
	}
	var out struct {
		Topics map[string]int `json:"topics"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		return nil, fmt.Errorf("not JSON: %v: %s", err, truncate(body, 200))
	}
	return out.Topics, nil
}
