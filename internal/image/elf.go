package image

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
)

// CheckStatic checks that bin is a statically linked Linux ELF executable
// (no PT_INTERP program header: nothing for a dynamic loader to do in an
// image that has no libc) and returns its Go architecture name (amd64,
// arm64). A Go binary built with CGO_ENABLED=0 passes; one built with cgo
// (the default net and os/user packages link libc) does not.
func CheckStatic(bin []byte) (arch string, err error) {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return "", fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("ELF type %s, want an executable", f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", errors.New("dynamically linked (it has an ELF interpreter); fix: build it with CGO_ENABLED=0 (make image does)")
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	}
	return "", fmt.Errorf("ELF machine %s: only amd64 and arm64 images are built", f.Machine)
}
