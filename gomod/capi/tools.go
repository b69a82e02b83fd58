//go:build tools

// The commands this module builds; the imports keep their packages in go.sum.
package tools

import (
	_ "sigs.k8s.io/cluster-api/cmd/clusterctl"
	_ "sigs.k8s.io/cluster-api/core"
)
