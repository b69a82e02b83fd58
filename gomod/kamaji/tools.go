//go:build tools

// The command this module builds is the module's root package (package main, not importable);
// these imports are what it runs, and keep their packages in go.sum.
package tools

import (
	_ "github.com/clastix/kamaji/cmd"
	_ "github.com/clastix/kamaji/cmd/manager"
	_ "github.com/clastix/kamaji/cmd/migrate"
)
