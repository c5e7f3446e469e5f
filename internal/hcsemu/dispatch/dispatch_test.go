package dispatch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

func TestCompose(t *testing.T) {
	m := func(context.Context, Subscriber, *wire.Frame) (Answer, error) { return Answer{}, nil }
	table := Compose(map[string]Method{"A": m}, map[string]Method{"B": m})
	if len(table) != 2 || table["A"] == nil || table["B"] == nil {
		t.Fatalf("Compose: %v", table)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"A"`) {
			t.Errorf("a method served twice: recovered %v, want a panic naming it", r)
		}
	}()
	Compose(map[string]Method{"A": m}, map[string]Method{"A": m})
}

func TestWithArgs(t *testing.T) {
	type args struct{ ID string }
	m := WithArgs(func(_ context.Context, _ Subscriber, a args) (Answer, error) {
		return Answer{Result: a.ID}, nil
	})
	a, err := m(context.Background(), nil, &wire.Frame{Args: json.RawMessage(`{"ID":"x"}`)})
	if err != nil || a.Result != "x" {
		t.Errorf("WithArgs: %+v, %v; want Result x", a, err)
	}
	if _, err := m(context.Background(), nil, &wire.Frame{Args: json.RawMessage(`{"Id":"x","Other":1}`)}); err == nil {
		t.Error("WithArgs accepted args with an unknown field")
	}
}
