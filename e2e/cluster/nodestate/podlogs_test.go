package nodestate

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPodLogCopierKeepsWholeLinesAcrossRestartsPartsAndRotation(t *testing.T) {
	pods, logs := t.TempDir(), t.TempDir()
	dir := filepath.Join(pods, "demo_counter-0_0f1e", "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string, flag int) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, name), flag|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	c := &PodLogCopier{PodsDir: pods, LogDir: logs}
	poll := func() string {
		t.Helper()
		if err := c.Poll(); err != nil {
			t.Fatal(err)
		}
		raw, _ := os.ReadFile(filepath.Join(logs, "demo", "counter-0", "app.log"))
		return string(raw)
	}
	const first, second = "first\nsecond half\n", "last of 0\nafter restart\n\n"
	steps := []struct {
		file, text string
		flag       int
		want, why  string
	}{
		{"0.log", "2026-11-27T08:00:00.1Z stdout F first\n2026-11-27T08:00:00.2Z stderr P sec", os.O_APPEND,
			"first\n", "an unfinished line waits"},
		{"0.log", "ond \n2026-11-27T08:00:00.3Z stderr F half\n", os.O_APPEND, first, "a P line joins the next F line"},
		{"1.log", "2026-11-27T08:00:01Z stdout F after restart\n2026-11-27T08:00:01Z stdout F \n", os.O_APPEND,
			first, "not yet polled"},
		{"0.log", "2026-11-27T08:00:00.4Z stdout F last of 0\n", os.O_APPEND, first + second,
			"0.log before 1.log, empty lines kept"},
		{"1.log", "2026-11-27T08:00:02Z stdout F rotated\n", os.O_TRUNC, first + second + "rotated\n",
			"a rotated file is read from its start"},
	}
	for i, s := range steps {
		write(s.file, s.text, s.flag)
		if i == 2 {
			continue
		}
		if got := poll(); got != s.want {
			t.Fatalf("step %d (%s): %q, want %q", i, s.why, got, s.want)
		}
	}
	if err := os.RemoveAll(filepath.Join(pods, "demo_counter-0_0f1e")); err != nil {
		t.Fatal(err)
	}
	if got := poll(); got != first+second+"rotated\n" {
		t.Fatalf("the copy outlives the pod's folder: %q", got)
	}
}
