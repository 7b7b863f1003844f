//go:build linux

package runner

// The ipvs mode registers itself (proxymodes.Register) when linked in.
import _ "github.com/proxybench/proxybench/proxymodes/ipvs"
