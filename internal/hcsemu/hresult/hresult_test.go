package hresult

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computecore"
)

func TestAs(t *testing.T) {
	e := Errorf(computecore.HCS_E_INVALID_STATE, "start of %q", "sys1")
	if !errors.Is(e, computecore.HCS_E_INVALID_STATE) || !strings.Contains(e.Error(), `start of "sys1"`) {
		t.Errorf("Errorf: %v", e)
	}
	if got := As(fmt.Errorf("wrapped: %w", e)); got != e {
		t.Errorf("As of a wrapped *Error: %v, want the *Error", got)
	}
	if got := As(fmt.Errorf("wrapped: %w", ErrBusy)); got.HResult != ErrBusy || !strings.Contains(got.Message, "wrapped") {
		t.Errorf("As of a wrapped HRESULT: %+v", got)
	}
	if got := As(errors.New("plain")); got.HResult != computecore.E_FAIL || got.Message != "plain" {
		t.Errorf("As of a plain error: %+v, want E_FAIL", got)
	}
	if As(nil) != nil {
		t.Error("As(nil) is not nil")
	}
}

func TestDecodeNamesTheField(t *testing.T) {
	type inner struct{ Count uint8 }
	type doc struct {
		Name  string
		Inner inner
	}
	for _, tc := range []struct {
		doc  string
		hr   computecore.HRESULT
		want string
	}{
		{`{"Name":"a","Inner":{"Count":1}}`, 0, ""},
		{``, computecore.HCS_E_INVALID_JSON, "empty"},
		{`{"Name":"a"} {}`, computecore.HCS_E_INVALID_JSON, "data after the document"},
		{`{"Inner":{"Countx":1}}`, computecore.HCS_E_INVALID_JSON, "Inner.Countx: unknown field"},
		{`{"Name":1}`, computecore.HCS_E_INVALID_JSON, "Name: expected a string"},
		{`{"Inner":{"Count":300}}`, computecore.E_INVALIDARG, "Inner.Count: 300 is not an integer in [0, 255]"},
	} {
		var v doc
		err := Decode(tc.doc, &v, "the doc")
		if tc.hr == 0 {
			if err != nil || v.Inner.Count != 1 {
				t.Errorf("%s: %v, %+v", tc.doc, err, v)
			}
			continue
		}
		if !errors.Is(err, tc.hr) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %v naming %q", tc.doc, err, tc.hr, tc.want)
		}
	}
	var v doc
	if err := DecodeOptional(" ", &v, "options"); err != nil {
		t.Errorf("DecodeOptional of nothing: %v", err)
	}
	if got := FieldNames(reflect.TypeOf(doc{})); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"Inner", "Name"}) {
		t.Errorf("FieldNames: %v", got)
	}
}

func TestGUIDs(t *testing.T) {
	v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	v5 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if a, b := NewGUID(), NewGUID(); !v4.MatchString(a) || a == b {
		t.Errorf("NewGUID: %q, %q", a, b)
	}
	if a, b := NameToGUID("layer"), NameToGUID("layer"); !v5.MatchString(a) || a != b || a == NameToGUID("other") {
		t.Errorf("NameToGUID: %q, %q, %q", a, b, NameToGUID("other"))
	}
}
