// Package schema2 holds the Host Compute Service (HCS) JSON schema, version 2, as Go types:
// the documents runhcs sends to HCS (compute system configurations, process parameters, modify
// and signal requests, property queries) and the ones it reads back (properties, statistics,
// process status, exit statuses, result errors, service properties).
//
// Field names and JSON tags are exactly those of Microsoft's "HCS JSON Schema Reference"
// (https://learn.microsoft.com/virtualization/api/hcs/schemareference), which is also how
// hcsshim's internal/hcs/schema2 spells them. Fields HCS treats as optional carry omitempty (or
// omitzero for arrays and times, whose zero values omitempty would still encode), so a document
// this package emits names only what its author set.
//
// The package is a leaf: it imports only the standard library, so the emulator (internal/hcsemu),
// the typed client (internal/hcs) and the translators above (internal/oci) can all
// share it. Other packages may add fields or constants that are missing; they must never rename
// one, since the names are the wire format.
package schema2
