// Command etcd is etcd built from the Go module proxy: etcd's own server module has replace
// directives, so `go install` cannot build it; this wrapper module depends on the published
// modules instead.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
