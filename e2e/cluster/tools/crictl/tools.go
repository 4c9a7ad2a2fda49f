//go:build tools

// Package tools pins crictl (the CRI's command-line client: `crictl ps`, `crictl pods` on the
// local cluster's real node), which this wrapper module builds.
package tools

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
