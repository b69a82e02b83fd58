//go:build tools

// The command this module builds; the import keeps its packages in go.sum.
package tools

import _ "go.etcd.io/etcd/server/v3"
