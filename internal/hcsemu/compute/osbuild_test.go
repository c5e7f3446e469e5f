package compute

import "testing"

// TestProcessIsolationRuns: Microsoft's compatibility tables (VirtDocs version-compatibility.md),
// host by host.
func TestProcessIsolationRuns(t *testing.T) {
	for _, tc := range []struct {
		host, img string
		want      bool
	}{
		{"10.0.17763.1", "10.0.17763.5000", true}, // 2019: revisions need not match
		{"10.0.17763.1", "10.0.14393.1", false},   // 2019 host, 2016 image
		{"10.0.17763.1", "10.0.20348.1", false},   // 2019 host, 2022 image
		{"10.0.20348.1", "10.0.20348.2700", true}, // 2022
		{"10.0.20348.1", "10.0.17763.1", false},   // 2022 host, 2019 image
		{"10.0.20348.1", "10.0.26100.1", false},   // 2022 host, 2025 image
		{"10.0.26100.1", "10.0.26100.1", true},    // 2025
		{"10.0.26100.1", "10.0.20348.1", true},    // 2025 host, 2022 image: supported
		{"10.0.26100.1", "10.0.17763.1", false},   // 2025 host, 2019 image
		{"10.0.26100.1", "10.0.26200.1", false},   // newer than the host
		{"10.0.22621.1", "10.0.20348.1", true},    // Windows 11 host, 2022 image
		{"10.0.22621.1", "10.0.17763.1", false},   // Windows 11 host, 2019 image
		{"10.0.20348.1", "6.3.20348.1", false},    // another major.minor
	} {
		host, err := parseOSBuild(tc.host)
		if err != nil {
			t.Fatal(err)
		}
		img, err := parseOSBuild(tc.img)
		if err != nil {
			t.Fatal(err)
		}
		if got := processIsolationRuns(host, img); got != tc.want {
			t.Errorf("host %s, image %s: %v, want %v", tc.host, tc.img, got, tc.want)
		}
	}
}
