// Command etcd is etcd's own server (go.etcd.io/etcd/server/v3/etcdmain),
// built from this module so proxybench runs a pinned etcd per testbed.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
