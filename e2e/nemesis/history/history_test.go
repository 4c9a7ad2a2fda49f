package history

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"kshard.local/e2e/scenarios/load"
)

// t0 is the start of every hand-made history; at(s) is s seconds after it.
var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func inc(counter string, start, end float64, value int64) Op {
	return Op{Counter: counter, Kind: Increment, Start: at(start), End: at(end), Outcome: OK, Value: value,
		Entry: "p1", ServedBy: "p2", Source: "load"}
}

func read(counter string, start, end float64, value int64) Op {
	op := inc(counter, start, end, value)
	op.Kind = Read
	return op
}

func failed(counter string, start, end float64, code string) Op {
	return Op{Counter: counter, Kind: Increment, Start: at(start), End: at(end), Outcome: Classify(code), Code: code,
		Entry: "p1", Source: "load"}
}

func checks(vs []Violation) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, v.Check+" "+v.Counter)
	}
	return strings.Join(parts, ", ")
}

func TestFailuresAreClassifiedByWhatTheySayAboutDelivery(t *testing.T) {
	cases := []struct {
		err     error
		code    string
		outcome Outcome
	}{
		{&load.HTTPError{Status: 504, Code: "SendTimeout"}, "SendTimeout", NotApplied},
		{&load.HTTPError{Status: 502, Code: "AppUnavailable"}, "AppUnavailable", NotApplied},
		{&load.HTTPError{Status: 409, Code: "Fenced"}, "Fenced", NotApplied},
		{&load.HTTPError{Status: 502, Code: "OutcomeUnknown"}, "OutcomeUnknown", Unknown},
		{&load.HTTPError{Status: 504, Code: "OutcomeUnknown"}, "OutcomeUnknown", Unknown},
		{&load.HTTPError{Status: 502, Code: "SidecarUnavailable"}, "SidecarUnavailable", Unknown},
		{&load.HTTPError{Status: 503}, "HTTP503", Unknown},
		{fmt.Errorf("%w: connection refused", load.ErrNotDelivered), CodeNotDelivered, NotApplied},
		{load.ErrNoReadyPod, CodeNoReadyPod, NotApplied},
		{errors.New("timeout"), CodeClientTimeout, Unknown},
		{errors.New("connection reset"), CodeConnectionBroken, Unknown},
		{errors.New(`bad reply "<html>"`), CodeBadReply, Unknown},
	}
	for _, c := range cases {
		if code := CodeOf(c.err); code != c.code || Classify(code) != c.outcome {
			t.Errorf("%v: code %q (%s), want %q (%s)", c.err, code, Classify(code), c.code, c.outcome)
		}
	}
	q := load.Request{Entity: "c1", Start: at(0), End: at(1), Entry: "p1"}
	op := FromRequest(q, Increment, 0, &load.HTTPError{Status: 504, Code: "OutcomeUnknown"}, "load")
	if op.Outcome != Unknown || op.Code != "OutcomeUnknown" || op.Counter != "c1" || op.Detail == "" {
		t.Errorf("op %+v", op)
	}
	q.OK, q.ServedBy = true, "p2"
	if op := FromRequest(q, Read, 7, nil, "final"); op.Outcome != OK || op.Value != 7 || op.ServedBy != "p2" {
		t.Errorf("op %+v", op)
	}
}

func TestFinalValuesWithinAcknowledgedAndUnknownPass(t *testing.T) {
	ops := []Op{inc("a", 0, 1, 1), inc("a", 2, 3, 2), failed("a", 4, 5, "OutcomeUnknown"), inc("a", 6, 7, 4),
		failed("a", 8, 9, "SendTimeout"), inc("b", 0, 1, 1)}
	for _, final := range []int64{3, 4} {
		if vs := CheckFinal(ops, map[string]int64{"a": final, "b": 1}); len(vs) != 0 {
			t.Errorf("final %d: %v", final, vs)
		}
	}
}

func TestALostIncrementFailsTheFinalCheck(t *testing.T) {
	ops := []Op{inc("a", 0, 1, 1), inc("a", 2, 3, 2), inc("a", 4, 5, 3)}
	vs := CheckFinal(ops, map[string]int64{"a": 2})
	if checks(vs) != "lost a" || !vs[0].At.Equal(at(5)) || !strings.Contains(vs[0].Text, "answered 3") {
		t.Fatalf("violations %+v", vs)
	}
}

func TestAnAppliedRefusalFailsTheFinalCheck(t *testing.T) {
	// SendTimeout says the message was not delivered: the counter may not count it.
	ops := []Op{inc("a", 0, 1, 1), failed("a", 2, 3, "SendTimeout"), failed("a", 4, 5, "OutcomeUnknown")}
	if vs := CheckFinal(ops, map[string]int64{"a": 3}); checks(vs) != "excess a" {
		t.Fatalf("violations %+v", vs)
	}
	if vs := CheckFinal(ops, map[string]int64{"a": 2}); len(vs) != 0 {
		t.Fatalf("violations %+v", vs)
	}
}

func TestACounterWithoutAFinalValueFails(t *testing.T) {
	if vs := CheckFinal([]Op{inc("a", 0, 1, 1)}, map[string]int64{}); checks(vs) != "unread a" {
		t.Fatalf("violations %+v", vs)
	}
}

func TestValuesThatOnlyGrowPass(t *testing.T) {
	ops := []Op{
		inc("a", 0, 1, 1), read("a", 1.5, 2, 1), inc("a", 2, 3, 2), failed("a", 3, 4, "OutcomeUnknown"),
		inc("a", 5, 6, 4), read("a", 7, 8, 4),
		// Concurrent operations may be answered in any order.
		inc("b", 0, 10, 2), inc("b", 1, 2, 1), read("b", 1, 11, 1),
	}
	if vs, n := CheckOrder(ops, 10); len(n) != 0 {
		t.Fatalf("violations %+v", vs)
	}
}

func TestAValueGoingBackFails(t *testing.T) {
	cases := map[string][]Op{
		"increment after increment": {inc("a", 0, 1, 5), inc("a", 2, 3, 5)},
		"increment after a read":    {read("a", 0, 1, 5), inc("a", 2, 3, 5)},
		"read after increment":      {inc("a", 0, 1, 5), read("a", 2, 3, 4)},
		"read after read":           {read("a", 0, 1, 5), read("a", 2, 3, 4)},
		"after a later answer":      {inc("a", 0, 1, 1), inc("a", 1, 2, 6), inc("a", 2.5, 3, 3)},
	}
	for name, ops := range cases {
		vs, n := CheckOrder(ops, 10)
		if n["went-back"] == 0 || vs[0].Check != "went-back" || vs[0].Counter != "a" {
			t.Errorf("%s: violations %+v", name, vs)
		}
	}
}

func TestTwoIncrementsWithOneValueFail(t *testing.T) {
	vs, n := CheckOrder([]Op{inc("a", 0, 2, 3), inc("a", 1, 3, 3)}, 10)
	if n["duplicate"] != 1 || len(n) != 1 || checks(vs) != "duplicate a" {
		t.Fatalf("violations %+v", vs)
	}
	// Two reads may see one value.
	if vs, n := CheckOrder([]Op{read("a", 0, 2, 3), read("a", 1, 3, 3)}, 10); len(n) != 0 {
		t.Fatalf("violations %+v", vs)
	}
}

func TestOrderViolationsAreCappedPerCounterButCounted(t *testing.T) {
	ops := []Op{inc("a", 0, 1, 9)}
	for i := 0; i < 5; i++ {
		ops = append(ops, read("a", float64(2+i), float64(2+i)+0.5, 1))
	}
	vs, n := CheckOrder(ops, 2)
	if len(vs) != 2 || n["went-back"] != 5 {
		t.Fatalf("%d violations shown, counted %v", len(vs), n)
	}
}

func TestTheHistoryIsWrittenOneOperationPerLine(t *testing.T) {
	var r Recorder
	r.Add(inc("b", 2, 3, 1))
	r.Add(inc("a", 0, 1, 1))
	ops := r.Ops()
	if ops[0].Counter != "a" {
		t.Fatalf("ops not in start order: %+v", ops)
	}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, ops); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(buf.String(), "\n"); lines != 2 || !strings.Contains(buf.String(), `"kind":"increment"`) {
		t.Fatalf("written %q", buf.String())
	}
}
