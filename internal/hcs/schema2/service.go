package schema2

import "encoding/json"

// ServiceProperties is the result document of HcsGetServiceProperties: one element per
// PropertyType asked for, in the order asked (a BasicInformation for PropertyTypeBasic).
type ServiceProperties struct {
	Properties []json.RawMessage `json:"Properties,omitempty"`
}

// BasicInformation is the service's answer to PropertyTypeBasic.
type BasicInformation struct {
	SupportedSchemaVersions []Version `json:"SupportedSchemaVersions,omitempty"`
	// OsVersion is the host's build as "major.minor.build.revision" (for instance 10.0.20348.1).
	// It is an extension of this project's: the emulator fills it (its --os-version), real HCS
	// does not, and internal/hcs then asks Windows itself (RtlGetVersion).
	OsVersion string `json:"OsVersion,omitempty"`
}

// ServicePropertyTypeProcessorTopology is the service property HcsGetServiceProperties answers
// with a ProcessorTopology (hcsshim internal/processorinfo/host_information.go); the same
// name as the compute system property PropertyTypeProcessorTopology.
const ServicePropertyTypeProcessorTopology = PropertyTypeProcessorTopology

// ProcessorTopology is the host's logical processors (VirtDocs ProcessorTopology). hcsshim
// clamps a utility VM's processor count to LogicalProcessorCount.
type ProcessorTopology struct {
	LogicalProcessorCount uint32             `json:"LogicalProcessorCount,omitempty"`
	LogicalProcessors     []LogicalProcessor `json:"LogicalProcessors,omitempty"`
}

// LogicalProcessor is one element of ProcessorTopology.LogicalProcessors.
type LogicalProcessor struct {
	LpIndex     uint32 `json:"LpIndex,omitempty"`
	NodeNumber  uint8  `json:"NodeNumber,omitempty"`
	PackageId   uint32 `json:"PackageId,omitempty"`
	CoreId      uint32 `json:"CoreId,omitempty"`
	RootVpIndex int32  `json:"RootVpIndex,omitempty"`
}
