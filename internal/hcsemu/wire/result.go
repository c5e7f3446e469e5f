package wire

import (
	"encoding/json"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// ResultError is HCS's ResultError document for a failure with hr and message, the result
// document of a failing response (Frame.Result). The daemon sends it for every failure; the
// client makes the same document for the failures it reports itself (the daemon is gone).
func ResultError(hr computecore.HRESULT, message string) string {
	b, _ := json.Marshal(schema2.ResultError{
		Error:        int32(uint32(hr)),
		ErrorMessage: message,
		ErrorEvents:  []schema2.ErrorEvent{{Message: message, Source: "hcsemu"}},
	})
	return string(b)
}
