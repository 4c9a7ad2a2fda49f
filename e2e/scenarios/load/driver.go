package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/time/rate"
)

// Pod is a pod requests can enter through.
type Pod struct {
	Name string
	IP   string
}

// Pods gives the pods that are ready to take requests now (ready, not terminating).
type Pods interface {
	Ready() []Pod
}

// Config of one driver.
type Config struct {
	Name     string
	Entities []*Entity
	// Rate is the total request rate, per second, over all entities.
	Rate float64
	// Weights, when set (one per entity), share Rate among the entities in proportion: entity i
	// is sent Rate x Weights[i] / sum(Weights) requests per second, a skewed workload (see
	// ZipfWeights). Unset, the entities share one limiter.
	Weights []float64
	// Increments per entity; 0 drives until Stop.
	Increments int
	Pods       Pods
	Recorder   *Recorder
	// Port of the counter's public API (8081).
	Port int
	// Timeout of one request; longer than the ShardMap's sendTimeout, so that a request the
	// sidecar is still retrying is not abandoned (and possibly applied later).
	Timeout time.Duration
}

// Client sends the counter's public API requests.
type Client struct {
	http    *http.Client
	port    int
	timeout time.Duration
}

// NewClient returns a client with keep-alive connections to every pod.
func NewClient(port int, timeout time.Duration) *Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 3 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		MaxIdleConns:        1024,
		IdleConnTimeout:     30 * time.Second,
	}
	return &Client{http: &http.Client{Transport: tr}, port: port, timeout: timeout}
}

// Reply is the counter's answer: {"id", "value", "pod", "epoch"}.
type Reply struct {
	ID    string `json:"id"`
	Value int64  `json:"value"`
	Pod   string `json:"pod"`
	Epoch int64  `json:"epoch"`
}

// ErrNotDelivered marks a failure before any byte reached the pod (the connection could not be
// opened): the request was certainly not applied and may go to another pod.
var ErrNotDelivered = errors.New("not delivered")

// ErrNoReadyPod: no pod took requests (none was tried), so nothing was delivered.
var ErrNoReadyPod = errors.New("no ready pod")

// Do sends one request to the counter id through pod: POST .../increment, or GET when !increment.
func (c *Client) Do(ctx context.Context, pod Pod, id string, increment bool) (Reply, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	target := fmt.Sprintf("http://%s/counters/%s", net.JoinHostPort(pod.IP, strconv.Itoa(c.port)), url.PathEscape(id))
	method := http.MethodGet
	if increment {
		method, target = http.MethodPost, target+"/increment"
	}
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return Reply{}, err
	}
	res, err := c.http.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return Reply{}, fmt.Errorf("%w: %s", ErrNotDelivered, Reason(err))
		}
		return Reply{}, errors.New(Reason(err))
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return Reply{}, errors.New("reading the reply: " + Reason(err))
	}
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		code := e.Error.Code
		if code == "" {
			code = res.Header.Get("Kshard-Error")
		}
		return Reply{}, &HTTPError{Status: res.StatusCode, Code: code}
	}
	var r Reply
	if err := json.Unmarshal(body, &r); err != nil {
		return Reply{}, fmt.Errorf("bad reply %q", truncate(string(body), 80))
	}
	return r, nil
}

// HTTPError is an answer other than 200: its status and the error code of its body
// ({"error": {"code": ...}}), or of its Kshard-Error header when the body has none.
type HTTPError struct {
	Status int
	Code   string
}

func (e *HTTPError) Error() string { return fmt.Sprintf("http %d %s", e.Status, e.Code) }

var addressPattern = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+(:\d+)?`)

// Reason turns a transport error into a short, address-free category for counting.
func Reason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Timeout() {
		return "timeout"
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to pod"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before the reply"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	msg := err.Error()
	if ue != nil {
		msg = ue.Err.Error()
	}
	return addressPattern.ReplaceAllString(msg, "<addr>")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Driver drives a set of entities, one goroutine each.
type Driver struct {
	cfg     Config
	client  *Client
	limiter *rate.Limiter
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	done    chan struct{}
}

// Start starts driving; it returns at once.
func Start(cfg Config) *Driver {
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Driver{cfg: cfg, client: NewClient(cfg.Port, cfg.Timeout),
		limiter: rate.NewLimiter(rate.Limit(cfg.Rate), 1), cancel: cancel, done: make(chan struct{})}
	var sum float64
	for _, w := range cfg.Weights {
		sum += w
	}
	for i, e := range cfg.Entities {
		limiter := d.limiter
		if len(cfg.Weights) == len(cfg.Entities) && sum > 0 {
			limiter = rate.NewLimiter(rate.Limit(cfg.Rate*cfg.Weights[i]/sum), 1)
		}
		d.wg.Add(1)
		go d.drive(ctx, e, limiter)
	}
	go func() { d.wg.Wait(); close(d.done) }()
	return d
}

// Done is closed when every entity finished (a finite run) or after Stop.
func (d *Driver) Done() <-chan struct{} { return d.done }

// Stop sends no new request and waits for those in flight (they are not cancelled: an abandoned
// request could still be applied later and spoil the checks).
func (d *Driver) Stop() {
	d.cancel()
	<-d.done
}

func (d *Driver) drive(ctx context.Context, e *Entity, limiter *rate.Limiter) {
	defer d.wg.Done()
	for i := 0; d.cfg.Increments == 0 || i < d.cfg.Increments; i++ {
		if err := limiter.Wait(ctx); err != nil {
			return
		}
		q := d.send(e, true)
		if q.OK {
			// A violation is kept in the entity and reported by the checks.
			_ = e.OnAck(q.value)
		} else {
			e.OnFailure()
		}
		d.cfg.Recorder.add(q.Request)
	}
}

type result struct {
	Request
	value int64
}

// send makes one logical request of the driver and records it.
func (d *Driver) send(e *Entity, increment bool) result {
	q, r, _ := d.client.Send(d.cfg.Pods, e.ID, increment)
	q.Driver, q.Shard = d.cfg.Name, e.Shard
	return result{Request: q, value: r.Value}
}

// Send makes one logical request to the counter id through a random ready pod: attempts that
// are refused before reaching a pod (ErrNotDelivered, or no ready pod) go to another ready pod,
// until the client's timeout. It returns the request as recorded (no driver, no shard), the
// reply when q.OK, and the last attempt's error otherwise.
func (c *Client) Send(pods Pods, id string, increment bool) (Request, Reply, error) {
	q := Request{Entity: id, Start: time.Now()}
	deadline := q.Start.Add(c.timeout)
	var r Reply
	var err error
	for {
		pod, ok := pick(pods)
		if !ok {
			err = ErrNoReadyPod
			q.Reason = err.Error()
			if time.Now().After(deadline) {
				break
			}
			q.Rerouted++
			time.Sleep(100 * time.Millisecond)
			continue
		}
		q.Entry = pod.Name
		r, err = c.Do(context.Background(), pod, id, increment)
		if err == nil {
			q.OK, q.ServedBy, q.Reason = true, r.Pod, ""
			break
		}
		q.Reason = err.Error()
		if !errors.Is(err, ErrNotDelivered) || time.Now().After(deadline) {
			break
		}
		q.Rerouted++
		time.Sleep(20 * time.Millisecond)
	}
	q.End = time.Now()
	return q, r, err
}

func pick(p Pods) (Pod, bool) {
	ready := p.Ready()
	if len(ready) == 0 {
		return Pod{}, false
	}
	return ready[rand.IntN(len(ready))], true
}

// ReadAll reads every entity's counter (GET, retried on failure since reads change nothing) with
// `parallel` requests at a time and checks it with Entity.CheckFinal. It returns the read errors
// (entities that could not be read); violations are kept in the entities.
func ReadAll(client *Client, pods Pods, entities []*Entity, parallel int, deadline time.Time) []error {
	var mu sync.Mutex
	var errs []error
	EachParallel(entities, parallel, func(e *Entity) {
		var last error
		ok := Retry(deadline, 200*time.Millisecond, func() bool {
			pod, ok := pick(pods)
			if !ok {
				last = errors.New("no ready pod")
				return false
			}
			r, err := client.Do(context.Background(), pod, e.ID, false)
			if err != nil {
				last = fmt.Errorf("via %s: %w", pod.Name, err)
				return false
			}
			_ = e.CheckFinal(r.Value)
			return true
		})
		if !ok {
			mu.Lock()
			errs = append(errs, fmt.Errorf("reading %s: %w", e.ID, last))
			mu.Unlock()
		}
	})
	return errs
}

// EachParallel calls f for every entity, `parallel` calls at a time, and returns when all returned.
func EachParallel(entities []*Entity, parallel int, f func(*Entity)) {
	work := make(chan *Entity)
	var wg sync.WaitGroup
	for i := 0; i < parallel; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				f(e)
			}
		}()
	}
	for _, e := range entities {
		work <- e
	}
	close(work)
	wg.Wait()
}

// Retry calls attempt until it succeeds, every `every`, and returns true; or false once an attempt
// failed after deadline.
func Retry(deadline time.Time, every time.Duration, attempt func() bool) bool {
	for !attempt() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}
