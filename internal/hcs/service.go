package hcs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// ProcessorTopology returns the host's logical processors, the service property hcsshim clamps
// a utility VM's processor count to (internal/processorinfo/host_information.go).
func (c *Client) ProcessorTopology(ctx context.Context) (*schema2.ProcessorTopology, error) {
	const opName = "GetServiceProperties"
	api, err := c.apiFor(opName, "")
	if err != nil {
		return nil, err
	}
	q, _ := marshal(schema2.PropertyQuery{PropertyTypes: []schema2.PropertyType{schema2.ServicePropertyTypeProcessorTopology}})
	doc, err := bounded(ctx, opName, "", func() (string, error) {
		doc, err := api.GetServiceProperties(q)
		if err != nil {
			return "", &Error{Op: opName, Err: err, Detail: resultDetail(doc)}
		}
		return doc, nil
	}, nil)
	if err != nil {
		c.dropIfDisconnected(api, err)
		return nil, err
	}
	var sp schema2.ServiceProperties
	if err := json.Unmarshal([]byte(doc), &sp); err != nil || len(sp.Properties) != 1 {
		return nil, &Error{Op: opName, Err: fmt.Errorf("decode service properties %.200q: want one ProcessorTopology (%v)", doc, err)}
	}
	var t schema2.ProcessorTopology
	if err := json.Unmarshal(sp.Properties[0], &t); err != nil || t.LogicalProcessorCount == 0 {
		return nil, &Error{Op: opName, Err: fmt.Errorf("decode ProcessorTopology %.200q: no logical processors (%v)", sp.Properties[0], err)}
	}
	return &t, nil
}
