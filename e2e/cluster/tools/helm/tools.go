//go:build tools

// Package tools pins helm, so that its dependencies are verified by this module's go.sum.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
