package none

import (
	"context"
	"testing"

	"github.com/proxybench/proxybench/workload"
)

func TestNoneProgramsNothing(t *testing.T) {
	p := New()
	if p.Mode() != "none" {
		t.Fatalf("Mode() = %q, want none", p.Mode())
	}
	st, err := p.Sync(context.Background(), make([]workload.Service, 3))
	if err != nil {
		t.Fatal(err)
	}
	if st.Kind != "full" || st.Objects != 0 || st.Bytes != 0 || st.Wall < 0 {
		t.Errorf("Sync stats = %+v, want kind full and nothing programmed", st)
	}
	if err := p.Cleanup(context.Background()); err != nil {
		t.Errorf("Cleanup: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Sync(ctx, nil); err == nil {
		t.Errorf("Sync with a cancelled context: want an error")
	}
}
