package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"
)

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of xs, the zero value for none.
// Nearest rank keeps every figure an observed sample rather than an interpolation.
func percentile[T cmp.Ordered](xs []T, p float64) T {
	var zero T
	if len(xs) == 0 {
		return zero
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = max(1, min(rank, len(s)))
	return s[rank-1]
}

// ratio formats a/b with two decimals, "n/a" when b is zero.
func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		xs   []int
		p    float64
		want int
	}{
		{"empty", nil, 50, 0},
		{"one", []int{7}, 90, 7},
		{"median of odd", []int{5, 1, 3}, 50, 3},
		{"median of even is the lower middle", []int{4, 1, 3, 2}, 50, 2},
		{"p90 of ten", []int{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 90, 9},
		{"p90 of twenty", []int{20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 90, 18},
		{"p100 is the max", []int{3, 9, 1}, 100, 9},
		{"tiny p is the min", []int{3, 9, 1}, 0.1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.xs)
			if got := percentile(tt.xs, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %d, want %d", tt.xs, tt.p, got, tt.want)
			}
			if !slices.Equal(in, tt.xs) {
				t.Errorf("percentile reordered its input: %v, was %v", tt.xs, in)
			}
		})
	}
}

func TestRatio(t *testing.T) {
	tests := []struct {
		a, b float64
		want string
	}{
		{3, 2, "1.50"},
		{1, 3, "0.33"},
		{1, 0, "n/a"},
	}
	for _, tt := range tests {
		if got := ratio(tt.a, tt.b); got != tt.want {
			t.Errorf("ratio(%v, %v) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}
