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
	sp, doc, err := c.serviceProperties(ctx, schema2.ServicePropertyTypeProcessorTopology)
	if err != nil {
		return nil, err
	}
	if len(sp.Properties) != 1 {
		return nil, &Error{Op: opName, Err: fmt.Errorf("decode service properties %.200q: want one ProcessorTopology", doc)}
	}
	var t schema2.ProcessorTopology
	if err := json.Unmarshal(sp.Properties[0], &t); err != nil || t.LogicalProcessorCount == 0 {
		return nil, &Error{Op: opName, Err: fmt.Errorf("decode ProcessorTopology %.200q: no logical processors (%v)", sp.Properties[0], err)}
	}
	return &t, nil
}

// serviceProperties asks HCS for the service properties of one type (HcsGetServiceProperties),
// bounded by ctx; it returns them decoded and the document as HCS sent it, for error messages.
func (c *Client) serviceProperties(ctx context.Context, t schema2.PropertyType) (*schema2.ServiceProperties, string, error) {
	const opName = "GetServiceProperties"
	api, err := c.apiFor(opName, "")
	if err != nil {
		return nil, "", err
	}
	q, _ := marshal(schema2.PropertyQuery{PropertyTypes: []schema2.PropertyType{t}})
	doc, err := bounded(ctx, opName, "", func() (string, error) {
		doc, err := api.GetServiceProperties(q)
		if err != nil {
			return "", &Error{Op: opName, Err: err, Detail: resultDetail(doc)}
		}
		return doc, nil
	}, nil)
	if err != nil {
		c.dropIfDisconnected(api, err)
		return nil, "", err
	}
	var sp schema2.ServiceProperties
	if err := json.Unmarshal([]byte(doc), &sp); err != nil {
		return nil, doc, &Error{Op: opName, Err: fmt.Errorf("decode service properties %.200q: %w", doc, err)}
	}
	return &sp, doc, nil
}
