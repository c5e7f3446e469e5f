package computenetwork

import (
	"errors"
	"testing"
)

func TestGUIDRoundTrip(t *testing.T) {
	for _, s := range []string{
		"6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11",
		"{6F1B3A55-0E2B-4B8E-9C1E-0D6A1A3B7C11}",
		"00000000-0000-0000-0000-000000000000",
	} {
		g, err := ParseGUID(s)
		if err != nil {
			t.Fatalf("ParseGUID(%q): %v", s, err)
		}
		want := s
		if s[0] == '{' {
			want = "6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11"
		}
		if g.String() != want {
			t.Errorf("ParseGUID(%q).String() = %q, want %q", s, g.String(), want)
		}
	}
	g, _ := ParseGUID("6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11")
	if g.Data1 != 0x6f1b3a55 || g.Data2 != 0x0e2b || g.Data3 != 0x4b8e || g.Data4 != [8]byte{0x9c, 0x1e, 0x0d, 0x6a, 0x1a, 0x3b, 0x7c, 0x11} {
		t.Errorf("layout: %+v", g)
	}
	for _, bad := range []string{"", "not-a-guid", "6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c1", "6f1b3a55x0e2b-4b8e-9c1e-0d6a1a3b7c11", "6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c1z"} {
		if _, err := ParseGUID(bad); err == nil {
			t.Errorf("ParseGUID(%q) succeeded", bad)
		}
	}
}

func TestErrorIs(t *testing.T) {
	var err error = &Error{Op: "HcnOpenNetwork", HResult: HCN_E_NETWORK_NOT_FOUND, Result: `{"Error":"x"}`}
	if !errors.Is(err, HCN_E_NETWORK_NOT_FOUND) || errors.Is(err, HCN_E_ENDPOINT_NOT_FOUND) {
		t.Errorf("errors.Is is wrong for %v", err)
	}
	if got := err.Error(); got != `HcnOpenNetwork: HCN_E_NETWORK_NOT_FOUND (0x803b0001): {"Error":"x"}` {
		t.Errorf("Error() = %q", got)
	}
}
