// Command gen writes the op-level model's embedded tables (timing/aic/embedded) from AIConfigurator's
// performance database:
//
//	go run ./timing/aic/gen -db ../shared/data/aiconfigurator -out timing/aic/embedded
//
// See aic.Generate for what is kept, and timing/aic/embedded/PROVENANCE.md for the source.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/mocker-sim/mocker/timing/aic"
)

func main() {
	src := flag.String("db", "../shared/data/aiconfigurator", "root of AIConfigurator's performance database (<system>/<op>/<backend>/<version>/*.parquet)")
	out := flag.String("out", "timing/aic/embedded", "directory to write the compact tables into")
	system := flag.String("system", "h200_sxm", "GPU system to extract")
	flag.Parse()
	start := time.Now()
	if err := aic.Generate(*src, *out, *system); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "gen: wrote %s/%s in %.1fs\n", *out, *system, time.Since(start).Seconds())
}
