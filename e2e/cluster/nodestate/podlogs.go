package nodestate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// PodLogCopier keeps the real node's container logs after their pods are gone. The kubelet writes
// each container's output to <pods dir>/<namespace>_<pod>_<uid>/<container>/<restart>.log in the
// CRI format ("<time> <stream> <P|F> <text>") and removes the folder soon after the pod is
// deleted. Poll appends every new complete line, as plain text, to
// <log dir>/<namespace>/<pod>/<container>.log: one file per container name across restarts and
// across pods of that name, the layout the cluster's tests and users read.
type PodLogCopier struct {
	PodsDir string // the kubelet's podLogsDir
	LogDir  string // .cluster/logs

	offsets map[string]int64  // bytes of each source file copied so far
	partial map[string][]byte // text of "P" (partial) lines awaiting their "F" line, per source
}

// Poll copies what the kubelet's logs gained since the last Poll. A file shorter than what was
// copied of it (rotated or truncated) is read again from its start.
func (c *PodLogCopier) Poll() error {
	if c.offsets == nil {
		c.offsets, c.partial = map[string]int64{}, map[string][]byte{}
	}
	files, err := filepath.Glob(filepath.Join(c.PodsDir, "*", "*", "*.log"))
	if err != nil {
		return err
	}
	sort.Slice(files, func(i, j int) bool { return restartOrder(files[i], files[j]) })
	var errs []error
	for _, f := range files {
		errs = append(errs, c.copyFile(f))
	}
	return errors.Join(errs...)
}

// restartOrder puts a container's 1.log after its 0.log and before its 10.log.
func restartOrder(a, b string) bool {
	if da, db := filepath.Dir(a), filepath.Dir(b); da != db {
		return da < db
	}
	na, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(a), ".log"))
	nb, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(b), ".log"))
	return na < nb
}

func (c *PodLogCopier) copyFile(src string) error {
	container := filepath.Base(filepath.Dir(src))
	parts := strings.SplitN(filepath.Base(filepath.Dir(filepath.Dir(src))), "_", 3)
	if len(parts) != 3 {
		return nil // not a pod's folder
	}
	f, err := os.Open(src)
	if err != nil {
		return nil // removed meanwhile
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	off := c.offsets[src]
	if st.Size() < off {
		off, c.partial[src] = 0, nil
	}
	if st.Size() == off {
		return nil
	}
	raw, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return err
	}
	end := bytes.LastIndexByte(raw, '\n')
	if end < 0 {
		return nil // no complete line yet
	}
	c.offsets[src] = off + int64(end) + 1
	var out []byte
	for _, line := range bytes.Split(raw[:end], []byte("\n")) {
		text, full, ok := ParseCRILogLine(line)
		if !ok {
			continue
		}
		c.partial[src] = append(c.partial[src], text...)
		if full {
			out = append(append(out, c.partial[src]...), '\n')
			c.partial[src] = nil
		}
	}
	return appendTo(filepath.Join(c.LogDir, parts[0], parts[1], container+".log"), out)
}

// ParseCRILogLine splits one line of the CRI log format into its text and whether the line is
// whole ("F") or the first parts of a longer one ("P").
func ParseCRILogLine(line []byte) (text []byte, full, ok bool) {
	f := bytes.SplitN(line, []byte(" "), 4)
	if len(f) < 3 {
		return nil, false, false
	}
	if len(f) == 4 {
		text = f[3]
	}
	switch string(f[2]) {
	case "F":
		return text, true, true
	case "P":
		return text, false, true
	}
	return nil, false, false
}

func appendTo(path string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
