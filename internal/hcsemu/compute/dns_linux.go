package compute

import (
	"errors"
	"io/fs"
	"path"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/hns"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

// resolvConfRel is hns.ResolvConfFile relative to the container's volume.
const resolvConfRel = "etc/resolv.conf"

// writeResolvConfLocked writes hns.ResolvConfFile into a container's volume from the DNS
// settings of the adapters it has now (internal/hcsemu/hns dns.go): a process-isolated
// container's are the endpoints of its HNS namespace, a hosted container's its VM's NICs. A
// container in no network, or one without a volume, gets nothing.
func (s *system) writeResolvConfLocked() error {
	c := s.doc.Container
	if c == nil || s.vol == nil {
		return nil
	}
	var adapters []hns.AdapterDNS
	switch {
	case s.hosted != nil:
		adapters = s.e.net.VMDNS(s.doc.HostingSystemId)
	case s.netnsID != "":
		adapters = s.e.net.NamespaceDNS(s.netnsID)
	default:
		return nil
	}
	search := ""
	if c.Networking != nil {
		search = c.Networking.DnsSearchList
	}
	if err := s.vol.writeFile(resolvConfRel, []byte(hns.ResolvConf(adapters, search))); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "compute system %q: write %s: %v", s.id, hns.ResolvConfFile, err)
	}
	return nil
}

// writeFile replaces the file at rel (slash-separated, relative to the volume) with data, in
// the folder its parent names without regard to case (made if missing), through a temporary
// file renamed over it, so a reader sees the old file or the new one.
func (v *volume) writeFile(rel string, data []byte) error {
	dir, name := path.Split(rel)
	dir = path.Clean(dir)
	found, _, err := v.lookup(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := v.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		found = dir
	case err != nil:
		return err
	}
	if file, _, err := v.lookup(path.Join(found, name)); err == nil {
		name = path.Base(file)
	}
	tmp := path.Join(found, "."+name+".hcsemu")
	if err := v.root.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := v.root.Rename(tmp, path.Join(found, name)); err != nil {
		v.root.Remove(tmp)
		return err
	}
	return nil
}
