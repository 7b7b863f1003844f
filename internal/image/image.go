// Package image builds the images the cluster engine runs (docs/cluster.md):
// the agent image, one static proxybench binary whose entrypoint is
// `proxybench agent`, and a pause image (the pod sandbox a kubelet starts
// first) holding the same binary with `proxybench pause` as its
// entrypoint, so the two share their one layer. It writes them as one OCI
// image layout packed in a tar file (oci-layout, index.json, blobs/sha256/...
// of the OCI image-spec v1.1 "Image Layout"), which `ctr images import`
// reads, and pushes them to a registry. Everything is done with
// go-containerregistry: no Docker daemon, no registry needed to build.
//
// Builds are reproducible: the layer's files carry the zero time and
// fixed owners, the configs a fixed creation time, so the same binary
// gives the same digests.
package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BinaryPath is where the image holds the proxybench binary.
const BinaryPath = "/proxybench"

// Repository is the default repository of the built images; their
// references are Repository+"/proxybench:<tag>" and Repository+"/pause:<tag>".
// It names no registry anyone serves: the images are imported into
// containerd from the tarball, or pushed under another name (Push).
const Repository = "proxybench.local"

// NonRoot is the user and group the agent image runs as (no privileges:
// docs/cluster.md, "Safety").
const NonRoot = 65532

// RefAnnotation is the OCI annotation naming an image of the layout
// (image-spec annotations.md); containerd's importer names the images it
// imports from it.
const RefAnnotation = "org.opencontainers.image.ref.name"

// RoleLabel is the config label that says which image one is (Role).
const RoleLabel = "io.proxybench.role"

// Role is which of the two images one is.
type Role string

const (
	Agent Role = "proxybench" // entrypoint /proxybench agent
	Pause Role = "pause"      // entrypoint /proxybench pause
)

// Ref is the reference of role's image with tag under Repository.
func Ref(role Role, tag string) string { return Repository + "/" + string(role) + ":" + tag }

// Spec is what Build builds.
type Spec struct {
	// Binary is the proxybench binary to put in the images. It must be a
	// static Linux executable (CGO_ENABLED=0): the image has no libc.
	Binary string
	// Tag is the images' tag (default "dev").
	Tag string
	// Platform is the images' platform (default linux/<the binary's
	// ELF machine>: amd64 or arm64).
	Platform *v1.Platform
}

// Built is a built pair of images.
type Built struct {
	Agent, Pause v1.Image
	// AgentRef, PauseRef are their references (Ref).
	AgentRef, PauseRef string
}

// created is the fixed creation time of every config (reproducible builds).
var created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Build builds the agent and pause images from spec.Binary. Errors name
// the binary and what is wrong with it (missing, not an ELF executable,
// dynamically linked).
func Build(spec Spec) (*Built, error) {
	if spec.Tag == "" {
		spec.Tag = "dev"
	}
	bin, err := os.ReadFile(spec.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: binary: %w", err)
	}
	arch, err := CheckStatic(bin)
	if err != nil {
		return nil, fmt.Errorf("image: binary %q: %w", spec.Binary, err)
	}
	plat := spec.Platform
	if plat == nil {
		plat = &v1.Platform{OS: "linux", Architecture: arch}
	}
	layerTar, err := binaryLayer(bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	b := &Built{AgentRef: Ref(Agent, spec.Tag), PauseRef: Ref(Pause, spec.Tag)}
	user := fmt.Sprintf("%d:%d", NonRoot, NonRoot)
	if b.Agent, err = withLayer(layer, plat, v1.Config{Entrypoint: []string{BinaryPath, "agent"}, User: user,
		Env: []string{"PATH=/"}, Labels: map[string]string{RoleLabel: string(Agent)}}); err != nil {
		return nil, err
	}
	// The pause container runs as the nonroot user too: it only waits.
	if b.Pause, err = withLayer(layer, plat, v1.Config{Entrypoint: []string{BinaryPath, "pause"}, User: user,
		Env: []string{"PATH=/"}, Labels: map[string]string{RoleLabel: string(Pause)}}); err != nil {
		return nil, err
	}
	return b, nil
}

// withLayer is an OCI image of the one layer with config cfg.
func withLayer(layer v1.Layer, plat *v1.Platform, cfg v1.Config) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, fmt.Errorf("image: append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Config = cfg
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = v1.Time{Time: created}
	cf.History = []v1.History{{Created: v1.Time{Time: created}, CreatedBy: "proxybench image build"}}
	return mutate.ConfigFile(img, cf)
}

// binaryLayer is the uncompressed tar of the layer: /proxybench (0755,
// owned by root, readable by all) and an empty /tmp (1777), all with the
// zero time.
func binaryLayer(bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdrs := []*tar.Header{
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
		{Name: strings.TrimPrefix(BinaryPath, "/"), Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))},
	}
	for _, h := range hdrs {
		h.Format = tar.FormatPAX
		h.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(bin); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteTar writes b's two images as one OCI image layout packed in a tar
// file at out (each manifest annotated with its reference, RefAnnotation),
// through a temporary layout folder beside out. The blob the two images
// share is stored once.
func WriteTar(b *Built, out string) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".image-layout-")
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image: layout: %w", err)
	}
	for _, im := range []struct {
		img v1.Image
		ref string
	}{{b.Agent, b.AgentRef}, {b.Pause, b.PauseRef}} {
		if err := p.AppendImage(im.img, layout.WithAnnotations(map[string]string{RefAnnotation: im.ref})); err != nil {
			return fmt.Errorf("image: layout: %w", err)
		}
	}
	tmp := out + ".tmp"
	if err := packDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}

// packDir writes the files under dir into a tar file at out, paths
// relative to dir, in lexical order, with the zero time.
func packDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if d.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			return tw.WriteHeader(h)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("image: write %s: %w", out, err)
	}
	return nil
}

// Read unpacks the OCI layout tar file into folder dir (which must
// exist and be empty) and returns its images by reference
// (RefAnnotation). An image without that annotation, a path escaping dir
// or a layout go-containerregistry cannot read is an error.
func Read(file, dir string) (map[string]v1.Image, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("image: read %s: %w", file, err)
		}
		clean := path.Clean(h.Name)
		if strings.HasPrefix(clean, "../") || clean == ".." || strings.HasPrefix(clean, "/") {
			return nil, fmt.Errorf("image: %s: entry %q leaves the layout", file, h.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(clean))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return nil, err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return nil, err
			}
			w, err := os.Create(dst)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(w, tr)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("image: %s: entry %q has type %q, want a file or folder", file, h.Name, h.Typeflag)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image: %s: %w", file, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image: %s: index.json: %w", file, err)
	}
	out := map[string]v1.Image{}
	for _, d := range im.Manifests {
		ref := d.Annotations[RefAnnotation]
		if ref == "" {
			return nil, fmt.Errorf("image: %s: manifest %s has no %s annotation", file, d.Digest, RefAnnotation)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("image: %s: %s: %w", file, ref, err)
		}
		out[ref] = img
	}
	return out, nil
}

// FileFrom returns the contents of file name (an absolute path in the
// image, e.g. BinaryPath) from img's flattened filesystem.
func FileFrom(img v1.Image, name string) ([]byte, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	want := strings.TrimPrefix(name, "/")
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("image: no file %s in the image", name)
		}
		if err != nil {
			return nil, fmt.Errorf("image: %w", err)
		}
		if strings.TrimPrefix(path.Clean(h.Name), "/") == want {
			return io.ReadAll(tr)
		}
	}
}

// Push pushes img to ref (a registry reference, e.g.
// registry.example:5000/proxybench:v1), authenticating with the default
// keychain (~/.docker/config.json, $DOCKER_CONFIG) and using opts (e.g.
// remote.WithTransport). A malformed ref is an error naming it.
func Push(ref string, img v1.Image, opts ...remote.Option) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("image: reference %q: %w", ref, err)
	}
	opts = append([]remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.Write(r, img, opts...); err != nil {
		return fmt.Errorf("image: push %s: %w", ref, err)
	}
	return nil
}

// Roles picks the agent and the pause image out of the images Read
// returned, by the role label Build gives each
// (io.proxybench.role). A tarball lacking one is an error naming it.
func Roles(imgs map[string]v1.Image) (agent, pause v1.Image, err error) {
	for ref, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, nil, fmt.Errorf("image: %s: config: %w", ref, err)
		}
		switch Role(cf.Config.Labels[RoleLabel]) {
		case Agent:
			agent = img
		case Pause:
			pause = img
		}
	}
	if agent == nil || pause == nil {
		return nil, nil, fmt.Errorf("image: want an agent and a pause image (label %s), found %d images without both", RoleLabel, len(imgs))
	}
	return agent, pause, nil
}
