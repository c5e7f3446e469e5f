package hresult

import (
	"crypto/rand"
	"crypto/sha1"
	"fmt"
)

// NewGUID returns a random (version 4, RFC 4122 variant) GUID in its lower-case string form, as
// HNS names its objects and the storage filter its volumes.
func NewGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// NameToGUID is vmcompute's NameToGuid: a stable GUID for a layer name (hcsshim names a layer's
// descriptor by NameToGuid of its folder's base name). Assumption: Microsoft does not document
// the algorithm; this is a name-based (SHA-1, version 5) GUID of the name's UTF-8 bytes, which
// has the property callers rely on — the same name always gives the same GUID, and different
// names different ones.
func NameToGUID(name string) string {
	h := sha1.Sum([]byte(name))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
