// Package benchmain is the scaffolding the bench commands and their tests
// share: quiet logging, a deadline, an optional CPU profile, and printing
// the result.
package benchmain

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"testing"
	"time"
)

// Result is what a benchmark measured.
type Result interface {
	// Print writes the figures as a table.
	Print(w io.Writer)
}

// Main runs bench for a bench command: with warnings-only logging, under a
// 30-minute deadline and, unless cpuProfile is empty, writing a CPU profile
// of the run to that file. It prints the result to stdout, or the error to
// stderr and exits with status 1.
func Main[R Result](cpuProfile string, bench func(context.Context) (R, error)) {
	if err := run(cpuProfile, bench); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run[R Result](cpuProfile string, bench func(context.Context) (R, error)) error {
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	res, err := bench(ctx)
	if err != nil {
		return err
	}
	res.Print(os.Stdout)
	return nil
}

// Small runs bench for a test that keeps a benchmark working at a small
// size: under a two-minute deadline, failing t if bench fails. It returns
// the result and what it prints.
func Small[R Result](t testing.TB, bench func(context.Context) (R, error)) (R, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := bench(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	res.Print(&buf)
	return res, buf.String()
}
