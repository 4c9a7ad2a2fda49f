// Package reportfile writes an end-to-end suite's report into its directory: <name>.json, the
// data indented, and <name>.md, the summary for people.
package reportfile

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// Write creates dir if need be and writes data as dir/name.json and markdown as dir/name.md.
func Write(dir, name string, data any, markdown string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(data, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".md"), []byte(markdown), 0o644)
}
