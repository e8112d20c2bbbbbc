// Package slowstart runs a controller's burst of writes as upstream's
// controllers do (slowStartBatch): in batches of 1, 2, 4, ... calls that run
// at once, stopping after the first batch with a failure, so that a
// controller whose writes fail (quota, admission, a namespace going away)
// makes one failed request rather than hundreds.
package slowstart

import (
	"cmp"
	"sync"
)

// MaxBatch is upstream's MaxBatchSize: the most calls in flight at once.
const MaxBatch = 500

// Run calls fn for 0..n-1 in slow-start batches and returns how many calls
// succeeded, with the first error of the batch that failed.
func Run(n int, fn func(i int) error) (int, error) {
	done := 0
	for batch := min(n, 1); batch > 0; batch = min(2*batch, n-done, MaxBatch) {
		errs := make([]error, batch)
		var wg sync.WaitGroup
		for j := range batch {
			wg.Go(func() { errs[j] = fn(done + j) })
		}
		wg.Wait()
		failed, first := 0, error(nil)
		for _, err := range errs {
			if err != nil {
				failed++
				first = cmp.Or(first, err)
			}
		}
		if failed > 0 {
			// The errors of one batch are likely alike: the first
			// stands for them, as upstream's.
			return done + batch - failed, first
		}
		done += batch
	}
	return done, nil
}
