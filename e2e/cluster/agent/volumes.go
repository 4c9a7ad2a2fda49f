package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// payloadFile is one file of a secret, configMap, downwardAPI or projected volume.
type payloadFile struct {
	data []byte
	mode os.FileMode
}

// token is a service-account token of a projected volume, kept until it is due for refresh.
type token struct {
	value     string
	refreshAt time.Time
}

// volumeSet materialises a pod's volumes under <pod dir>/volumes/<name> and keeps them up to date
// (secrets, configMaps and labels change; tokens are refreshed at 80% of their lifetime, as the
// kubelet does). Files are written the kubelet's way: into a fresh "..<timestamp>" directory,
// then the "..data" symlink is swapped atomically, so a reader never sees half an update.
type volumeSet struct {
	w      *podWorker
	dirs   map[string]string // volume name → host path to bind-mount
	hashes map[string][32]byte
	tokens map[string]token
}

func newVolumeSet(w *podWorker) *volumeSet {
	return &volumeSet{w: w, dirs: map[string]string{}, hashes: map[string][32]byte{}, tokens: map[string]token{}}
}

// sync creates or refreshes every volume of the pod. Only one sync runs at a time (the pod
// worker's start, then its refresh loop); container starts read the finished map through dir.
func (vs *volumeSet) sync(ctx context.Context, pod *v1.Pod) error {
	var errs []error
	dirs := map[string]string{}
	for i := range pod.Spec.Volumes {
		path, err := vs.syncVolume(ctx, pod, &pod.Spec.Volumes[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", pod.Spec.Volumes[i].Name, err))
			continue
		}
		dirs[pod.Spec.Volumes[i].Name] = path
	}
	vs.w.mu.Lock()
	for name, path := range dirs {
		vs.dirs[name] = path
	}
	vs.w.mu.Unlock()
	return errors.Join(errs...)
}

// syncVolume materialises one volume and returns the host path to bind-mount.
func (vs *volumeSet) syncVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (string, error) {
	dir := filepath.Join(vs.w.dir, "volumes", vol.Name)
	var payload map[string]payloadFile
	var err error
	switch {
	case vol.EmptyDir != nil:
		return dir, os.MkdirAll(dir, 0o777)
	case vol.HostPath != nil:
		if t := vol.HostPath.Type; t != nil && (*t == v1.HostPathDirectoryOrCreate) {
			return vol.HostPath.Path, os.MkdirAll(vol.HostPath.Path, 0o755)
		}
		return vol.HostPath.Path, nil
	case vol.Secret != nil:
		payload, err = vs.secretPayload(ctx, pod.Namespace, vol.Secret.SecretName, vol.Secret.Items,
			vol.Secret.DefaultMode, vol.Secret.Optional)
	case vol.ConfigMap != nil:
		payload, err = vs.configMapPayload(ctx, pod.Namespace, vol.ConfigMap.Name, vol.ConfigMap.Items,
			vol.ConfigMap.DefaultMode, vol.ConfigMap.Optional)
	case vol.DownwardAPI != nil:
		payload, err = downwardPayload(pod, vol.DownwardAPI.Items, vol.DownwardAPI.DefaultMode)
	case vol.Projected != nil:
		payload, err = vs.projectedPayload(ctx, pod, vol)
	default:
		return "", fmt.Errorf("this node agent supports emptyDir, hostPath, secret, configMap, downwardAPI and projected volumes only")
	}
	if err != nil {
		return "", err
	}
	return dir, vs.write(vol.Name, dir, payload)
}

func mode(def *int32, item *int32) os.FileMode {
	if item != nil {
		return os.FileMode(*item)
	}
	if def != nil {
		return os.FileMode(*def)
	}
	return 0o644
}

func keyPayload(data map[string][]byte, items []v1.KeyToPath, def *int32, what string) (map[string]payloadFile, error) {
	out := map[string]payloadFile{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = payloadFile{v, mode(def, nil)}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		out[it.Path] = payloadFile{v, mode(def, it.Mode)}
	}
	return out, nil
}

func (vs *volumeSet) secretPayload(ctx context.Context, ns, name string, items []v1.KeyToPath, def *int32, optional *bool) (map[string]payloadFile, error) {
	s, err := vs.w.a.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return map[string]payloadFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	return keyPayload(s.Data, items, def, "secret "+name)
}

func (vs *volumeSet) configMapPayload(ctx context.Context, ns, name string, items []v1.KeyToPath, def *int32, optional *bool) (map[string]payloadFile, error) {
	cm, err := vs.w.a.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return map[string]payloadFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("configMap %s/%s: %w", ns, name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyPayload(data, items, def, "configMap "+name)
}

func downwardPayload(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, def *int32) (map[string]payloadFile, error) {
	out := map[string]payloadFile{}
	for _, it := range items {
		var val string
		var err error
		switch {
		case it.FieldRef != nil:
			val, err = fieldValue(pod, it.FieldRef.FieldPath, true)
		case it.ResourceFieldRef != nil:
			val, err = resourceValue(pod, it.ResourceFieldRef)
		default:
			err = fmt.Errorf("item %q has neither fieldRef nor resourceFieldRef", it.Path)
		}
		if err != nil {
			return nil, err
		}
		out[it.Path] = payloadFile{[]byte(val), mode(def, it.Mode)}
	}
	return out, nil
}

func (vs *volumeSet) projectedPayload(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (map[string]payloadFile, error) {
	out := map[string]payloadFile{}
	def := vol.Projected.DefaultMode
	merge := func(p map[string]payloadFile, err error) error {
		if err != nil {
			return err
		}
		for k, v := range p {
			out[k] = v
		}
		return nil
	}
	for _, src := range vol.Projected.Sources {
		var err error
		switch {
		case src.Secret != nil:
			err = merge(vs.secretPayload(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, def, src.Secret.Optional))
		case src.ConfigMap != nil:
			err = merge(vs.configMapPayload(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, def, src.ConfigMap.Optional))
		case src.DownwardAPI != nil:
			err = merge(downwardPayload(pod, src.DownwardAPI.Items, def))
		case src.ServiceAccountToken != nil:
			var tok string
			tok, err = vs.token(ctx, pod, vol.Name, src.ServiceAccountToken)
			if err == nil {
				out[src.ServiceAccountToken.Path] = payloadFile{[]byte(tok), mode(def, nil)}
			}
		default:
			err = fmt.Errorf("unsupported projected source (supported: secret, configMap, downwardAPI, serviceAccountToken)")
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// token returns a TokenRequest token bound to the pod, requesting a new one at 80% of the
// previous one's lifetime (or after 24 h), as the kubelet does.
func (vs *volumeSet) token(ctx context.Context, pod *v1.Pod, volName string, src *v1.ServiceAccountTokenProjection) (string, error) {
	key := volName + "/" + src.Path
	if t, ok := vs.tokens[key]; ok && time.Now().Before(t.refreshAt) {
		return t.value, nil
	}
	exp := int64(3600)
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	resp, err := vs.w.a.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token request for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	now := time.Now()
	lifetime := resp.Status.ExpirationTimestamp.Sub(now)
	refresh := now.Add(lifetime * 8 / 10)
	if day := now.Add(24 * time.Hour); refresh.After(day) {
		refresh = day
	}
	vs.tokens[key] = token{resp.Status.Token, refresh}
	return resp.Status.Token, nil
}

// write replaces the volume's content atomically if it changed.
func (vs *volumeSet) write(name, dir string, payload map[string]payloadFile) error {
	keys := make([]string, 0, len(payload))
	for k := range payload {
		if strings.HasPrefix(k, "..") || filepath.IsAbs(k) || strings.Contains(k, "/../") {
			return fmt.Errorf("invalid file path %q", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", k, payload[k].mode, len(payload[k].data))
		h.Write(payload[k].data)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	if old, ok := vs.hashes[name]; ok && bytes.Equal(old[:], sum[:]) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	stamp := "..data_" + time.Now().UTC().Format("2006_01_02_15_04_05.000000000")
	tsDir := filepath.Join(dir, stamp)
	if err := os.Mkdir(tsDir, 0o755); err != nil {
		return err
	}
	for _, k := range keys {
		p := filepath.Join(tsDir, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, payload[k].data, payload[k].mode); err != nil {
			return err
		}
		if err := os.Chmod(p, payload[k].mode); err != nil {
			return err
		}
	}
	oldTarget, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(stamp, tmpLink); err != nil {
		return err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	top := map[string]bool{}
	for _, k := range keys {
		first := strings.SplitN(k, "/", 2)[0]
		top[first] = true
		link := filepath.Join(dir, first)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", first), link); err != nil {
				return err
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") && !top[e.Name()] {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	if oldTarget != "" && oldTarget != stamp {
		_ = os.RemoveAll(filepath.Join(dir, oldTarget))
	}
	vs.hashes[name] = sum
	return nil
}

// readOnlyVolume says whether the kubelet would mount the volume read-only whatever the mount says.
func readOnlyVolume(vol *v1.Volume) bool {
	return vol.Secret != nil || vol.ConfigMap != nil || vol.DownwardAPI != nil || vol.Projected != nil
}
