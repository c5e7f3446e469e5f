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
