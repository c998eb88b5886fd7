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

// llama8B builds Llama-3.1-8B on one H200 with vLLM's newest tables at the given GEMM precision.
func llama8B(tb testing.TB, quant string) *Model {
	tb.Helper()
	needData(tb)
	m, err := model.Lookup("llama-3.1-8b")
	if err != nil {
		tb.Fatal(err)
	}
	sys, err := hardware.Lookup("h200_sxm")
	if err != nil {
		tb.Fatal(err)
	}
	mdl, err := New(Options{Model: m, System: sys, Root: aicRoot, Backend: "vllm", GEMMQuant: quant})
	if err != nil {
		tb.Fatal(err)
	}
	return mdl
}
