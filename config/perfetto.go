package config

import (
	"strconv"
	"time"

	"github.com/mocker-sim/mocker/report/perfetto"
)

// PerfettoRange is --perfetto-window as times; to is 0 (everything) when it is not given.
func (c *Config) PerfettoRange() (from, to time.Duration, err error) {
	if c.PerfettoWindow == "" {
		return 0, 0, nil
	}
	return perfetto.ParseWindow(c.PerfettoWindow)
}

func (c *Config) validatePerfetto() error {
	if c.PerfettoWindow == "" {
		return nil
	}
	if c.Perfetto == "" {
		return &settingError{"perfetto-window", "perfetto-window " + strconv.Quote(c.PerfettoWindow) + ": applies to --perfetto, which is not given"}
	}
	if _, _, err := c.PerfettoRange(); err != nil {
		return &settingError{"perfetto-window", "perfetto-" + err.Error()}
	}
	return nil
}
