package hcs

import (
	"fmt"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// hostOSVersionFromOS is the host build when HCS's service properties do not carry one (real
// HCS does not): RtlGetVersion gives major.minor.build, and the update build revision (the
// fourth part, as in "10.0.20348.1") is the UBR value of the CurrentVersion registry key.
func hostOSVersionFromOS() (string, error) {
	v := windows.RtlGetVersion()
	ubr := uint64(0)
	if k, err := registry.OpenKey(registry.LOCAL_MACHINE, `SOFTWARE\Microsoft\Windows NT\CurrentVersion`, registry.QUERY_VALUE); err == nil {
		if n, _, err := k.GetIntegerValue("UBR"); err == nil {
			ubr = n
		}
		k.Close()
	}
	return fmt.Sprintf("%d.%d.%d.%d", v.MajorVersion, v.MinorVersion, v.BuildNumber, ubr), nil
}
