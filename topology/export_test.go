//go:build linux

package topology

// FailSetUp makes CreateNetns's set-up step (lo up) fail with err, after
// the namespace was made, until restore is called.
func FailSetUp(err error) (restore func()) {
	old := setUp
	setUp = func(*Netns) error { return err }
	return func() { setUp = old }
}
