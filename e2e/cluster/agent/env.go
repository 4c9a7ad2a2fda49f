package agent

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fieldValue resolves a downward-API fieldRef. Whole label/annotation maps exist only in volumes.
func fieldValue(pod *v1.Pod, path string, inVolume bool) (string, error) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return pod.Status.PodIP, nil
	case "status.hostIP", "status.hostIPs":
		return pod.Status.HostIP, nil
	}
	if inVolume && (path == "metadata.labels" || path == "metadata.annotations") {
		m := pod.Labels
		if path == "metadata.annotations" {
			m = pod.Annotations
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%s\n", k, strconv.Quote(m[k]))
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

// subscript parses "<prefix>['key']" (or with double quotes).
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"[")
	if !ok || !strings.HasSuffix(rest, "]") || len(rest) < 3 {
		return "", false
	}
	inner := rest[:len(rest)-1]
	if q := inner[0]; (q == '\'' || q == '"') && inner[len(inner)-1] == q {
		return inner[1 : len(inner)-1], true
	}
	return "", false
}

// resourceValue resolves a resourceFieldRef: the container's limit (or request), else the node's
// capacity for limits, divided by the divisor and rounded up, as the kubelet does.
func resourceValue(pod *v1.Pod, ref *v1.ResourceFieldSelector) (string, error) {
	var c *v1.Container
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == ref.ContainerName || (ref.ContainerName == "" && c == nil) {
				c = &list[i]
			}
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef names unknown container %q", ref.ContainerName)
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)
	}
	rl := c.Resources.Limits
	if kind == "requests" {
		rl = c.Resources.Requests
	}
	q, found := rl[v1.ResourceName(name)]
	if !found {
		q = nodeCapacity()[v1.ResourceName(name)]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == "cpu" {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// expand applies Kubernetes' $(VAR) expansion ($$ escapes a dollar; unknown references stay).
func expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// buildEnv computes a container's environment: the process basics, the API server's service
// variables, envFrom, then env (in order, with $(VAR) expansion over what came before).
func (w *podWorker) buildEnv(ctx context.Context, pod *v1.Pod, c *v1.Container) ([]string, map[string]string, error) {
	a := w.a
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	set("PATH", defaultPath)
	set("HOSTNAME", pod.Name)
	set("HOME", "/root")
	host, port := a.Cfg.APIHost, strconv.Itoa(a.Cfg.APIPort)
	set("KUBERNETES_SERVICE_HOST", host)
	set("KUBERNETES_SERVICE_PORT", port)
	set("KUBERNETES_SERVICE_PORT_HTTPS", port)
	set("KUBERNETES_PORT", "tcp://"+host+":"+port)
	for _, from := range c.EnvFrom {
		data, err := w.envSource(ctx, pod.Namespace, from)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range data {
			set(from.Prefix+k, v)
		}
	}
	lookup := func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
	for _, e := range c.Env {
		var v string
		var err error
		switch {
		case e.ValueFrom == nil:
			v = expand(e.Value, lookup)
		case e.ValueFrom.FieldRef != nil:
			v, err = fieldValue(pod, e.ValueFrom.FieldRef.FieldPath, false)
		case e.ValueFrom.ResourceFieldRef != nil:
			ref := *e.ValueFrom.ResourceFieldRef
			if ref.ContainerName == "" {
				ref.ContainerName = c.Name
			}
			v, err = resourceValue(pod, &ref)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			r := e.ValueFrom.ConfigMapKeyRef
			v, err = w.keyRef(ctx, pod.Namespace, "configMap", r.Name, r.Key, r.Optional)
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			v, err = w.keyRef(ctx, pod.Namespace, "secret", r.Name, r.Key, r.Optional)
		default:
			err = fmt.Errorf("env %s: unsupported valueFrom", e.Name)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		set(e.Name, v)
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vals[k])
	}
	return env, vals, nil
}

func (w *podWorker) envSource(ctx context.Context, ns string, from v1.EnvFromSource) (map[string]string, error) {
	out := map[string]string{}
	switch {
	case from.ConfigMapRef != nil:
		cm, err := w.a.Client.CoreV1().ConfigMaps(ns).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("envFrom configMap %s: %w", from.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := w.a.Client.CoreV1().Secrets(ns).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && from.SecretRef.Optional != nil && *from.SecretRef.Optional {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("envFrom secret %s: %w", from.SecretRef.Name, err)
		}
		for k, v := range s.Data {
			out[k] = string(v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("envFrom: neither configMapRef nor secretRef")
}

func (w *podWorker) keyRef(ctx context.Context, ns, kind, name, key string, optional *bool) (string, error) {
	var data map[string]string
	var err error
	if kind == "configMap" {
		var cm *v1.ConfigMap
		if cm, err = w.a.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			data = cm.Data
		}
	} else {
		var s *v1.Secret
		if s, err = w.a.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
	}
	isOptional := optional != nil && *optional
	if apierrors.IsNotFound(err) && isOptional {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", kind, name, err)
	}
	v, ok := data[key]
	if !ok && !isOptional {
		return "", fmt.Errorf("%s %s has no key %q", kind, name, key)
	}
	return v, nil
}
