package schema2

// ResultError is the result document HCS returns with a failing HRESULT (HcsWaitForOperationResult
// and friends): the HRESULT again, a message, and the events HCS recorded on the way.
type ResultError struct {
	Error        int32        `json:"Error"`
	ErrorMessage string       `json:"ErrorMessage,omitempty"`
	ErrorEvents  []ErrorEvent `json:"ErrorEvents,omitempty"`
}

// ErrorEvent is one of ResultError.ErrorEvents.
type ErrorEvent struct {
	Message    string      `json:"Message,omitempty"`
	StackTrace string      `json:"StackTrace,omitempty"`
	Provider   string      `json:"Provider,omitempty"`
	EventId    uint16      `json:"EventId,omitempty"`
	Flags      uint32      `json:"Flags,omitempty"`
	Source     string      `json:"Source,omitempty"`
	Data       []EventData `json:"Data,omitempty"`
}

// EventData is one datum of an ErrorEvent. Type is "Empty", "String", "AnsiString", "SByte",
// "Byte", "Int16", "UInt16", "Int32", "UInt32", "Int64", "UInt64", "Single", "Double",
// "Boolean", "Binary" or "Guid".
type EventData struct {
	Type  string `json:"Type,omitempty"`
	Value string `json:"Value,omitempty"`
}
