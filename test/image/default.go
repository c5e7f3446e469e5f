package image

import "github.com/openhcs/runhcs/internal/emuvhdx"

// Registry hive deltas of a base layer, as Windows base images ship them under Hives/.
var baseHives = []string{"DEFAULT_Delta", "SAM_Delta", "SECURITY_Delta", "SOFTWARE_Delta", "SYSTEM_Delta"}

// hiveData stands in for a registry hive: the "regf" signature of the hive format and padding.
// Nothing under the emulator loads it.
var hiveData = append([]byte("regf"), make([]byte, 508)...)

// BaseOptions tune BaseLayer.
type BaseOptions struct {
	// UtilityVM adds UtilityVM/Files/…, the boot files a base layer of a Hyper-V capable image
	// has (boot manager and BCD store, as placeholders), and UtilityVM/SystemTemplate.vhdx, so
	// utility VMs can be made from it.
	UtilityVM bool
	// Extra entries to add to the base layer.
	Extra []Entry
	// OSVersion is the Windows build the layer is of ("10.0.17763.1"), recorded in OSBuildFile
	// under Files/ (and under UtilityVM/Files/ with UtilityVM); "" means DefaultOSVersion.
	OSVersion string
}

// OSBuildFile is where a base layer records the Windows build it is of, relative to an OS file
// tree (a layer's Files/, the container's C:\, and a utility VM's UtilityVM/Files/): one line,
// "major.minor.build.revision". It is hcsemu's convention, not Windows': real base layers carry
// the build in the SOFTWARE registry hive (Windows\System32\config\SOFTWARE, CurrentVersion),
// which the emulator cannot read. hcsemu reads this file to check image and host builds as HCS
// does (internal/hcsemu/osbuild.go); a layer without it is of an unknown build, and no check is
// made for it.
const OSBuildFile = "Windows/System32/hcsemu-osbuild.txt"

// ToolPaths are where Windows has the tools whose stand-ins the workload carries (test/workload
// doc.go, "Stand-ins for Windows tools"), in a layer's Files/ tree, spelled as on a Windows
// Server 2022 installation. The binary is the workload itself: it acts as the tool it is
// started as.
var ToolPaths = []string{
	"Windows/System32/cmd.exe",
	"Windows/System32/WindowsPowerShell/v1.0/powershell.exe",
	"Windows/System32/PING.EXE",
	"Windows/System32/ipconfig.exe",
	"Windows/System32/HOSTNAME.EXE",
}

// DefaultPath is the test image's PATH: the folders a Windows Server container's PATH starts
// with (the system folders and Windows PowerShell's), then the workload's folder.
const DefaultPath = `C:\Windows\System32;C:\Windows;C:\Windows\System32\WindowsPowerShell\v1.0;C:\workload`

// BaseLayer is a Windows base layer holding the workload binary at Files/workload/workload.exe and
// Files/Windows/System32/workload.exe and, as its stand-ins for Windows tools, at ToolPaths (hard
// links to the latter); the usual Windows folders and the registry hive deltas.
func BaseLayer(workload []byte, o BaseOptions) Layer {
	l := Layer{Comment: "base layer with the workload"}
	add := func(e Entry) { l.Entries = append(l.Entries, e) }
	add(Entry{Path: "Files/workload/workload.exe", Data: workload})
	add(Entry{Path: "Files/Windows/System32/workload.exe", Data: workload})
	for _, p := range ToolPaths {
		// Hard links: one copy of the binary however many names it has.
		add(Entry{Path: "Files/" + p, Link: "Files/Windows/System32/workload.exe"})
	}
	add(Entry{Path: "Files/Windows/System32/drivers/etc/hosts", Data: []byte("127.0.0.1 localhost\r\n")})
	add(Entry{Path: "Files/Windows/Temp", Dir: true})
	add(Entry{Path: "Files/Users/Public", Dir: true})
	add(Entry{Path: "Files/ProgramData", Dir: true, Attributes: FileAttributeDirectory | FileAttributeHidden})
	add(Entry{Path: "Files/License.txt", Data: []byte("runhcs test image: not Windows, only its layer format.\r\n")})
	build := o.OSVersion
	if build == "" {
		build = DefaultOSVersion
	}
	add(Entry{Path: "Files/" + OSBuildFile, Data: []byte(build + "\r\n")})
	for _, h := range baseHives {
		add(Entry{Path: "Hives/" + h, Data: hiveData})
	}
	if o.UtilityVM {
		add(Entry{Path: "UtilityVM/Files/EFI/Microsoft/Boot/bootmgfw.efi", Data: []byte("placeholder boot manager")})
		add(Entry{Path: "UtilityVM/Files/EFI/Microsoft/Boot/BCD", Data: []byte("placeholder BCD store")})
		add(Entry{Path: "UtilityVM/Files/Windows/System32/workload.exe", Data: workload})
		add(Entry{Path: "UtilityVM/Files/" + OSBuildFile, Data: []byte(build + "\r\n")})
		// The utility VM's scratch template, which containerd's snapshotter and hcsshim copy to
		// <snapshot>\vm\sandbox.vhdx: an empty disk in the emulated VHDX format (a JSON header,
		// package internal/emuvhdx), 10 GB, the default UVM scratch size.
		add(Entry{Path: "UtilityVM/SystemTemplate.vhdx", Data: emuvhdx.Encode(10<<30, "")})
	}
	l.Entries = append(l.Entries, o.Extra...)
	return l
}

// Default is the standard test image: BaseLayer (with UtilityVM files) and a config whose PATH
// (DefaultPath) finds the workload and the tools' stand-ins and whose default command prints
// DefaultOutput.
func Default(workload []byte) *Image {
	return &Image{
		Name:         DefaultName,
		OSVersion:    DefaultOSVersion,
		Architecture: "amd64",
		Env:          []string{"PATH=" + DefaultPath},
		Cmd:          []string{WorkloadPath, "echo", DefaultOutput},
		WorkingDir:   `C:\`,
		Layers:       []Layer{BaseLayer(workload, BaseOptions{UtilityVM: true})},
	}
}
