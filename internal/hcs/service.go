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

// modifyService sends a ModificationRequest to HcsModifyServiceSettings.
func (c *Client) modifyService(ctx context.Context, id string, req schema2.ServiceModificationRequest) error {
	const opName = "ModifyServiceSettings"
	api, err := c.apiFor(opName, id)
	if err != nil {
		return err
	}
	doc, err := marshal(req)
	if err != nil {
		return &Error{Op: opName, ID: id, Err: err}
	}
	_, err = bounded(ctx, opName, id, func() (struct{}, error) {
		res, err := api.ModifyServiceSettings(doc)
		if err != nil {
			return struct{}{}, &Error{Op: opName, ID: id, Err: err, Detail: resultDetail(res)}
		}
		return struct{}{}, nil
	}, nil)
	if err != nil {
		c.dropIfDisconnected(api, err)
	}
	return err
}

// AddCredentialGuard creates the Container Credential Guard instance id for a container with
// the credential spec credSpec over transport (schema2.CCGTransportLRPC for a process-isolated
// container, schema2.CCGTransportHvSocket for one in a utility VM), and returns the instance: its
// state, which the container document names (Container.ContainerCredentialGuard), and for
// HvSocket the service the VM must carry (HvSocketConfig). As hcsshim's CreateCredentialGuard
// (internal/credentials/credentials.go): HcsModifyServiceSettings with AddInstance, then the
// instance's state from the service property "ContainerCredentialGuard". HCS never removes an
// instance by itself: the caller must RemoveCredentialGuard it, also if this fails after the add.
func (c *Client) AddCredentialGuard(ctx context.Context, id, credSpec, transport string) (*schema2.ContainerCredentialGuardInstance, error) {
	details, err := json.Marshal(schema2.ContainerCredentialGuardAddInstanceRequest{Id: id, CredentialSpec: credSpec, Transport: transport})
	if err != nil {
		return nil, err
	}
	if err := c.modifyService(ctx, id, schema2.ServiceModificationRequest{
		PropertyType: schema2.ServicePropertyTypeContainerCredentialGuard,
		Settings:     schema2.ContainerCredentialGuardOperationRequest{Operation: schema2.CCGAddInstance, OperationDetails: details},
	}); err != nil {
		return nil, err
	}
	instances, err := c.CredentialGuards(ctx)
	if err != nil {
		return nil, err
	}
	for _, in := range instances {
		if in.Id == id && in.CredentialGuard != nil {
			if transport == schema2.CCGTransportHvSocket && (in.HvSocketConfig == nil || in.HvSocketConfig.ServiceId == "" || in.HvSocketConfig.ServiceConfig == nil) {
				return nil, &Error{Op: "GetServiceProperties", ID: id, Err: fmt.Errorf("the Container Credential Guard instance %q of transport %s has no HvSocketConfig", id, transport)}
			}
			return &in, nil
		}
	}
	return nil, &Error{Op: "GetServiceProperties", ID: id, Err: fmt.Errorf("no Container Credential Guard instance %q after adding it", id)}
}

// RemoveCredentialGuard removes the Container Credential Guard instance id; one that does not
// exist is ErrNotFound (IsGone).
func (c *Client) RemoveCredentialGuard(ctx context.Context, id string) error {
	details, err := json.Marshal(schema2.ContainerCredentialGuardRemoveInstanceRequest{Id: id})
	if err != nil {
		return err
	}
	return c.modifyService(ctx, id, schema2.ServiceModificationRequest{
		PropertyType: schema2.ServicePropertyTypeContainerCredentialGuard,
		Settings:     schema2.ContainerCredentialGuardOperationRequest{Operation: schema2.CCGRemoveInstance, OperationDetails: details},
	})
}

// CredentialGuards lists the Container Credential Guard instances (the service property
// "ContainerCredentialGuard").
func (c *Client) CredentialGuards(ctx context.Context) ([]schema2.ContainerCredentialGuardInstance, error) {
	const opName = "GetServiceProperties"
	api, err := c.apiFor(opName, "")
	if err != nil {
		return nil, err
	}
	q, _ := marshal(schema2.PropertyQuery{PropertyTypes: []schema2.PropertyType{schema2.ServicePropertyTypeContainerCredentialGuard}})
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
		return nil, &Error{Op: opName, Err: fmt.Errorf("decode service properties %.200q: want one ContainerCredentialGuard (%v)", doc, err)}
	}
	var info schema2.ContainerCredentialGuardSystemInfo
	if err := json.Unmarshal(sp.Properties[0], &info); err != nil {
		return nil, &Error{Op: opName, Err: fmt.Errorf("decode ContainerCredentialGuardSystemInfo %.200q: %v", sp.Properties[0], err)}
	}
	return info.Instances, nil
}
