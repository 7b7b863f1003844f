module github.com/proxybench/proxybench

go 1.26.8

require (
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
)

require golang.org/x/sys v0.50.0 // indirect
