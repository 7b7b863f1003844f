//go:build linux

package runner

import _ "github.com/proxybench/proxybench/proxymodes/nftables"
