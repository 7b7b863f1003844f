package image_test

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/proxybench/proxybench/internal/image"
)

var (
	helloOnce sync.Once
	helloPath string
	helloErr  error
	helloDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if helloDir != "" {
		os.RemoveAll(helloDir)
	}
	os.Exit(code)
}

// staticHello builds, once per test binary, a tiny static Go program
// (CGO_ENABLED=0) that prints its arguments: a stand-in for proxybench
// that builds in a second or two on a quiet machine.
func staticHello(t *testing.T) string {
	t.Helper()
	helloOnce.Do(func() {
		if helloDir, helloErr = os.MkdirTemp("", "pb-image-test-"); helloErr != nil {
			return
		}
		src := filepath.Join(helloDir, "main.go")
		if helloErr = os.WriteFile(src, []byte("package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() { fmt.Println(\"hello\", os.Args[1:]) }\n"), 0o644); helloErr != nil {
			return
		}
		out := filepath.Join(helloDir, "hello")
		cmd := exec.Command("go", "build", "-o", out, src)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
		cmd.Dir = helloDir
		if b, err := cmd.CombinedOutput(); err != nil {
			helloErr = fmt.Errorf("go build: %v\n%s", err, b)
			return
		}
		helloPath = out
	})
	if helloErr != nil {
		t.Fatal(helloErr)
	}
	return helloPath
}

// checkImages checks what TestBuildWriteRead and the slow proxybench test
// both check of a read-back pair: validate.Image (every digest and size
// of manifest, config and layer), OCI media types, the entrypoints, the
// nonroot user, the one layer shared, and bin byte for byte inside.
func checkImages(t *testing.T, imgs map[string]v1.Image, tag string, bin []byte) (agentBin string) {
	t.Helper()
	if len(imgs) != 2 || imgs[image.Ref(image.Agent, tag)] == nil || imgs[image.Ref(image.Pause, tag)] == nil {
		t.Fatalf("images %v, want %s and %s", keys(imgs), image.Ref(image.Agent, tag), image.Ref(image.Pause, tag))
	}
	agent, pause, err := image.Roles(imgs)
	if err != nil {
		t.Fatal(err)
	}
	var layerDigests []v1.Hash
	for _, c := range []struct {
		role  image.Role
		img   v1.Image
		entry []string
	}{{image.Agent, agent, []string{"/proxybench", "agent"}}, {image.Pause, pause, []string{"/proxybench", "pause"}}} {
		if err := validate.Image(c.img); err != nil {
			t.Errorf("%s: validate: %v", c.role, err)
		}
		if mt, _ := c.img.MediaType(); mt != types.OCIManifestSchema1 {
			t.Errorf("%s: manifest media type %s, want %s", c.role, mt, types.OCIManifestSchema1)
		}
		m, err := c.img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
			t.Errorf("%s: config %s, layers %v: want an OCI config and one OCI gzip layer", c.role, m.Config.MediaType, m.Layers)
		}
		layerDigests = append(layerDigests, m.Layers[0].Digest)
		cf, err := c.img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cf.Config.Entrypoint, c.entry) || cf.Config.User != "65532:65532" || cf.OS != "linux" || cf.Architecture == "" {
			t.Errorf("%s: entrypoint %q user %q platform %s/%s, want %q as 65532:65532 on linux", c.role,
				cf.Config.Entrypoint, cf.Config.User, cf.OS, cf.Architecture, c.entry)
		}
		got, err := image.FileFrom(c.img, image.BinaryPath)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, bin) {
			t.Errorf("%s: %s in the image is %d bytes and differs from the %d-byte binary", c.role, image.BinaryPath, len(got), len(bin))
		}
	}
	if len(layerDigests) == 2 && layerDigests[0] != layerDigests[1] {
		t.Errorf("agent layer %s, pause layer %s: want one layer shared", layerDigests[0], layerDigests[1])
	}
	got, _ := image.FileFrom(agent, image.BinaryPath)
	out := filepath.Join(t.TempDir(), "from-image")
	if err := os.WriteFile(out, got, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBuildWriteRead: build, write, read back and run the binary from
// the image; the same binary builds the same digests again (reproducible).
func TestBuildWriteRead(t *testing.T) {
	bin := staticHello(t)
	raw, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	b, err := image.Build(image.Spec{Binary: bin, Tag: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "img.tar")
	if err := image.WriteTar(b, tarPath); err != nil {
		t.Fatal(err)
	}
	imgs, err := image.Read(tarPath, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	exe := checkImages(t, imgs, "t1", raw)
	out, err := exec.Command(exe, "agent").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "hello [agent]" {
		t.Errorf("the binary from the image printed %q (%v), want \"hello [agent]\"", out, err)
	}
	again, err := image.Build(image.Spec{Binary: bin, Tag: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := b.Agent.Digest()
	d2, _ := again.Agent.Digest()
	read, _ := imgs[b.AgentRef].Digest()
	if d1 != d2 || d1 != read {
		t.Errorf("agent digests: built %s, rebuilt %s, read back %s: want one", d1, d2, read)
	}
}

// TestBuildRefusesDynamic: a dynamically linked binary (the system's
// /bin/true) or a file that is no ELF is refused, naming the fix.
func TestBuildRefusesDynamic(t *testing.T) {
	if _, err := image.Build(image.Spec{Binary: "/bin/true"}); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("/bin/true: err %v, want a refusal naming CGO_ENABLED=0", err)
	}
	txt := filepath.Join(t.TempDir(), "x")
	_ = os.WriteFile(txt, []byte("#!/bin/sh\n"), 0o755)
	if _, err := image.Build(image.Spec{Binary: txt}); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("a script: err %v, want \"not an ELF\"", err)
	}
}

// TestPush: Push writes the image to a registry (go-containerregistry's
// in-memory one, reached through a RoundTripper that calls its handler:
// no socket) and it reads back with the same digest.
func TestPush(t *testing.T) {
	b, err := image.Build(image.Spec{Binary: staticHello(t), Tag: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	rt := handlerTransport{registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	ref := "registry.test/team/proxybench:v1"
	if err := image.Push(ref, b.Agent, remote.WithTransport(rt)); err != nil {
		t.Fatal(err)
	}
	r, _ := name.ParseReference(ref)
	got, err := remote.Image(r, remote.WithTransport(rt))
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := b.Agent.Digest()
	d2, err := got.Digest()
	if err != nil || d1 != d2 {
		t.Errorf("pulled digest %s (%v), pushed %s", d2, err, d1)
	}
	if err := image.Push("Bad Ref!", b.Agent, remote.WithTransport(rt)); err == nil || !strings.Contains(err.Error(), "Bad Ref!") {
		t.Errorf("a malformed reference: err %v, want it named", err)
	}
}

// handlerTransport answers every request with h, in process.
type handlerTransport struct{ h http.Handler }

func (rt handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	// A server's request always has a Body (net/http's server sets one).
	in := req.Clone(req.Context())
	if in.Body == nil {
		in.Body = http.NoBody
	}
	in.RequestURI = req.URL.RequestURI()
	rt.h.ServeHTTP(w, in)
	res := w.Result()
	res.Request = req // as net/http's client sets it (Location headers resolve against it)
	return res, nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
