package harness

import "sync"

// Churn calls work(i) for i from 0 to n-1, parallel calls at a time, the way the soak suite churns
// lifecycles. It stops handing out work after the first failure (the calls under way finish)
// and returns every error, in the order they came; none means all n calls succeeded.
func Churn(n, parallel int, work func(i int) error) []error {
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := work(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		if failed {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return errs
}
