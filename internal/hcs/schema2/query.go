package schema2

// PropertyType names a property to return, in PropertyQuery.PropertyTypes.
type PropertyType string

// Compute system property types (HcsGetComputeSystemProperties).
const (
	PropertyTypeMemory                      PropertyType = "Memory"
	PropertyTypeGuestMemory                 PropertyType = "GuestMemory"
	PropertyTypeStatistics                  PropertyType = "Statistics"
	PropertyTypeProcessList                 PropertyType = "ProcessList"
	PropertyTypeTerminateOnLastHandleClosed PropertyType = "TerminateOnLastHandleClosed"
	PropertyTypeSharedMemoryRegion          PropertyType = "SharedMemoryRegion"
	PropertyTypeGuestConnection             PropertyType = "GuestConnection"
	PropertyTypeICHeartbeatStatus           PropertyType = "ICHeartbeatStatus"
	PropertyTypeProcessorTopology           PropertyType = "ProcessorTopology"
	PropertyTypeCPUGroup                    PropertyType = "CpuGroup"
	PropertyTypeSystemGUID                  PropertyType = "SystemGUID"
)

// Service property types (HcsGetServiceProperties; GetPropertyType in the schema reference).
const (
	// PropertyTypeBasic returns a BasicInformation.
	PropertyTypeBasic PropertyType = "Basic"
)

// PropertyQuery is the query document of HcsGetComputeSystemProperties, HcsGetProcessProperties
// and HcsGetServiceProperties. Without PropertyTypes only the basic properties are returned.
type PropertyQuery struct {
	PropertyTypes []PropertyType `json:"PropertyTypes,omitempty"`
}
