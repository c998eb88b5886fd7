package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/spf13/pflag"
)

// profiles are the hidden --cpuprofile and --memprofile flags: pprof files of one run, for whoever
// optimises the simulator (go tool pprof mocker FILE).
type profiles struct{ cpu, mem string }

func (p *profiles) bind(fs *pflag.FlagSet) {
	fs.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.StringVar(&p.mem, "memprofile", "", "write a heap profile (allocations, and what is live at the end) to this file")
	fs.MarkHidden("cpuprofile")
	fs.MarkHidden("memprofile")
}

// start begins the CPU profile; stop ends it and writes the heap profile.
func (p *profiles) start() (stop func() error, err error) {
	var cpu *os.File
	if p.cpu != "" {
		if cpu, err = os.Create(p.cpu); err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			cpu.Close()
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpu.Close())
		}
		if p.mem != "" {
			f, err := os.Create(p.mem)
			if err != nil {
				return errors.Join(append(errs, fmt.Errorf("--memprofile: %w", err))...)
			}
			runtime.GC()
			errs = append(errs, pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		}
		return errors.Join(errs...)
	}, nil
}
