//go:build linux

package runner

// Mode userspace registers itself with proxymodes at init.
import _ "github.com/proxybench/proxybench/proxymodes/userspace"
