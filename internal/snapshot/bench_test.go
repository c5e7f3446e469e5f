package snapshot

import (
	"context"
	"fmt"
	"testing"
)

// chain commits depth layers on top of each other and returns the top one's name.
func chain(b *testing.B, sn *Snapshotter, depth int) string {
	ctx := context.Background()
	parent := ""
	for i := 0; i < depth; i++ {
		key, name := fmt.Sprintf("a%d", i), fmt.Sprintf("l%d", i)
		if _, err := sn.Prepare(ctx, key, parent); err != nil {
			b.Fatal(err)
		}
		if err := sn.Commit(ctx, name, key); err != nil {
			b.Fatal(err)
		}
		parent = name
	}
	return parent
}

// BenchmarkPrepare measures Prepare over chains of depth 1, 10 and 50; its cost must not grow
// with the depth beyond writing the longer layerchain.json and mount option.
func BenchmarkPrepare(b *testing.B) {
	for _, depth := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			sn := newSnapshotter(b)
			top := chain(b, sn, depth)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := sn.Prepare(ctx, fmt.Sprintf("c%d", i), top); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCommit measures Commit of an empty active snapshot over chains of depth 1, 10, 50.
func BenchmarkCommit(b *testing.B) {
	for _, depth := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			sn := newSnapshotter(b)
			top := chain(b, sn, depth)
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if _, err := sn.Prepare(ctx, fmt.Sprintf("c%d", i), top); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := sn.Commit(ctx, fmt.Sprintf("n%d", i), fmt.Sprintf("c%d", i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
