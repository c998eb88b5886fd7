package aic

import (
	"os"
	"testing"

	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/model"
)

// sharedData is the repository's shared data directory, seen from this package.
const sharedData = "../../../shared/data"

const aicRoot = sharedData + "/aiconfigurator"

// needData skips tb when the shared AIConfigurator database is not checked out.
func needData(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat(aicRoot + "/h200_sxm"); err != nil {
		tb.Skipf("shared AIConfigurator data not present (%v); these tests need %s", err, aicRoot)
	}
}

// h200 is the H200 system of the hardware catalog.
func h200(tb testing.TB) *hardware.System {
	tb.Helper()
	sys, err := hardware.Lookup("h200_sxm")
	if err != nil {
		tb.Fatal(err)
	}
	return sys
}

// h200Roofline is the H200's roofline, for loading single tables.
func h200Roofline(tb testing.TB) *roofline {
	tb.Helper()
	rf, err := newRoofline(h200(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return rf
}

// onH200 builds the catalog model name on an H200 over the shared database, with o's other options
// (its Model, System and Root are set here). It skips tb without the database.
func onH200(tb testing.TB, name string, o Options) (*Model, error) {
	tb.Helper()
	needData(tb)
	m, err := model.Lookup(name)
	if err != nil {
		tb.Fatal(err)
	}
	o.Model, o.System, o.Root = m, h200(tb), aicRoot
	return New(o)
}

// llama8B builds Llama-3.1-8B on one H200 with vLLM's newest tables at the given GEMM precision.
func llama8B(tb testing.TB, quant string) *Model {
	tb.Helper()
	mdl, err := onH200(tb, "llama-3.1-8b", Options{Backend: "vllm", GEMMQuant: quant})
	if err != nil {
		tb.Fatal(err)
	}
	return mdl
}
