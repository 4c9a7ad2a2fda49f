package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// imageFile is the format of e2e/images.yaml: image reference → executable, relative to the repo root.
type imageFile struct {
	Images map[string]string `json:"images"`
}

// ImageResolver maps image references to local executables. The file is read on every lookup, so
// an edit (or a binary built later) takes effect at the next container start.
type ImageResolver struct {
	Path     string // the images.yaml file
	RepoRoot string // relative executable paths are relative to this
}

// ImageError says why an image cannot be "pulled": a pod's container waits with it as the message.
type ImageError struct{ Msg string }

func (e *ImageError) Error() string { return e.Msg }

// normaliseImage strips a docker.io/ or docker.io/library/ prefix and adds the implicit :latest tag.
func normaliseImage(image string) string {
	image = strings.TrimPrefix(image, "docker.io/")
	image = strings.TrimPrefix(image, "library/")
	if strings.Contains(image, "@") {
		return image
	}
	slash := strings.LastIndex(image, "/")
	if !strings.Contains(image[slash+1:], ":") {
		image += ":latest"
	}
	return image
}

// Resolve returns the absolute path of the executable for image. Exact entries win over
// "name:*" wildcard entries.
func (r *ImageResolver) Resolve(image string) (string, error) {
	raw, err := os.ReadFile(r.Path)
	if err != nil {
		return "", &ImageError{fmt.Sprintf("cannot read the image map %s: %v", r.Path, err)}
	}
	var f imageFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		return "", &ImageError{fmt.Sprintf("image map %s is malformed: %v", r.Path, err)}
	}
	ref := normaliseImage(image)
	rel, ok := f.Images[ref]
	if !ok {
		name := ref
		if i := strings.LastIndexAny(ref, ":@"); i > strings.LastIndex(ref, "/") {
			name = ref[:i]
		}
		rel, ok = f.Images[name+":*"]
	}
	if !ok {
		return "", &ImageError{fmt.Sprintf("image %q is not in the image map %s (add \"%s: <executable>\")", image, r.Path, ref)}
	}
	path := rel
	if !filepath.IsAbs(path) {
		path = filepath.Join(r.RepoRoot, rel)
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", &ImageError{fmt.Sprintf("image %q maps to %s, which does not exist (not built yet?)", image, path)}
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", &ImageError{fmt.Sprintf("image %q maps to %s, which is not an executable file", image, path)}
	}
	return path, nil
}

// resolveArgv applies Kubernetes' rules for command/args over an image whose entrypoint is the
// mapped executable: no command runs the executable with args; a command whose first word names
// the executable (by path or base name) runs it; any other command runs as given, looked up on the
// host's PATH when it is not absolute.
func resolveArgv(executable string, command, args []string) ([]string, error) {
	if len(command) == 0 {
		return append([]string{executable}, args...), nil
	}
	argv := append(append([]string{}, command...), args...)
	first := command[0]
	if first == executable || filepath.Base(first) == filepath.Base(executable) {
		argv[0] = executable
		return argv, nil
	}
	if filepath.IsAbs(first) {
		if _, err := os.Stat(first); err != nil {
			return nil, fmt.Errorf("command %s does not exist on this node", first)
		}
		return argv, nil
	}
	path, err := lookPath(first)
	if err != nil {
		return nil, fmt.Errorf("command %q not found on this node's PATH", first)
	}
	argv[0] = path
	return argv, nil
}

func lookPath(name string) (string, error) {
	for _, dir := range strings.Split(defaultPath, ":") {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
